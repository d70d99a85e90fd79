// What a handler gets besides its decoded request: the request header, the connection it came on, and the
// node-wide services it may use. A handler runs on the connection's shard.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mala/common/config.h"
#include "mala/common/error_code.h"
#include "mala/metadata/metadata_image.h"
#include "mala/net/request_dispatcher.h"
#include "mala/protocol/request_header.h"
#include "mala/replication/replica_placement.h"
#include "mala/replication/replication_quota.h"
#include "mala/storage/txn_marker.h"

namespace mala::net {
class shard_pool;
}
namespace mala::security {
struct sasl_settings;
}
namespace mala::replication {
class replica_manager;
}
namespace mala::controller {
class quorum_controller;
}
namespace mala::raft {
class raft_node;
}
namespace mala::coordinator {
class group_coordinator;
class transaction_coordinator;
}  // namespace mala::coordinator

namespace mala::broker {

class handler_table;
class authorizer;
class sharded_fetch_session_cache;
class producer_id_allocator;
class controller_channel;
class client_quota_manager;
class broker_metrics;
class client_telemetry;

// KIP-890: a partition leader's question to the transaction coordinator of a transactional id (Kafka's
// AddPartitionsToTxnManager): are these partitions in the producer's transaction (VerifyOnly), or, under
// transactions v2 (Produce v12+, TxnOffsetCommit v5+), add them.
struct txn_verification_request {
  std::string transactional_id;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  std::vector<std::pair<std::string, int32_t>> partitions;  // topic, partition
  bool add = false;
};
// The coordinator's answer per partition of the request, in its order (the coordinator's codes, untranslated:
// PRODUCER_FENCED, TRANSACTION_ABORTABLE, CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION, ...).
using txn_verification_answer = std::vector<error_code>;

// Node-wide services shared by every handler; outlives the server.
struct broker_services {
  int32_t node_id = -1;
  metadata::metadata_cache* metadata = nullptr;
  const handler_table* handlers = nullptr;
  // Whether this node's replica of a partition is offline (its log dir failed). Until the controller learns
  // of offline dirs from broker heartbeats, the node itself reports them in Metadata. Unset: none are.
  std::function<bool(const std::string& topic, int32_t partition)> local_replica_offline;

  // The rest may be null in unit tests of handlers that do not use them.
  const node_config* config = nullptr;  // the node's static configuration
  // authorizer.class.name set: every handler checks its client's ACLs (authorizer.h). Null: no authorization,
  // and the ACL APIs answer SECURITY_DISABLED, as a Kafka broker without an authorizer.
  const authorizer* acl_authorizer = nullptr;
  net::shard_pool* shards = nullptr;
  // The shard of the controller, the raft node and the coordinators: handlers hop there with
  // `co_await shards->invoke_on(home_shard, ...)` before touching them.
  size_t home_shard = 0;
  // Which shard owns each partition replica (shard_of below): a handler hops there before touching it
  // through that shard's replica manager (replicas_on).
  replication::replica_placement placement;
  // The replica manager of each shard, indexed by shard; each used on its own shard only. Empty in unit tests
  // of handlers that host no partition.
  std::vector<replication::replica_manager*> replicas_by_shard;
  controller::quorum_controller* controller = nullptr;  // home shard only; null without the controller role
  // The way to the active controller, local or remote (controller_channel.h); null in handler unit tests,
  // which then call `controller` directly.
  controller_channel* controller_link = nullptr;
  // This node's metadata quorum replica (home shard only); null in handler unit tests.
  raft::raft_node* raft = nullptr;
  producer_id_allocator* producer_ids = nullptr;  // home shard only; InitProducerId's id blocks
  // The group coordinator (consumer groups, committed offsets); home shard only. Null: group requests are
  // answered COORDINATOR_NOT_AVAILABLE.
  coordinator::group_coordinator* groups = nullptr;
  // The transaction coordinator (transactional ids, __transaction_state); home shard only. Null: transaction
  // requests are answered COORDINATOR_NOT_AVAILABLE.
  coordinator::transaction_coordinator* transactions = nullptr;
  // WriteTxnMarkers on a partition of __consumer_offsets (Kafka's GroupCoordinator.completeTransaction): the
  // group coordinator writes the marker through its own runtime and settles the producer's pending
  // transactional offsets, then calls `done` once with the partition's error, its COORDINATOR_NOT_AVAILABLE,
  // NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS turned into NOT_LEADER_OR_FOLLOWER so that the
  // transaction coordinator retries. Home shard only. Unset (until the group coordinator serves transactional
  // offsets): such markers answer NOT_LEADER_OR_FOLLOWER; they never take the plain partition path, which
  // would leave the coordinator's pending offsets unsettled.
  std::function<void(int32_t partition, const storage::txn_marker_request& marker,
                     std::function<void(error_code)> done)>
      group_txn_marker_writer;
  // KIP-890 (home shard only): asks the transaction coordinator of the request's transactional id, a direct
  // call when this node leads its __transaction_state partition, else AddPartitionsToTxn v5 to the leader
  // over the inter-broker listener. Unset: transaction verification is off.
  std::function<void(txn_verification_request, std::function<void(txn_verification_answer)>)>
      transaction_verifier;
  // transaction.partition.verification.enable: v1 transactional writes (Produce <= v11, TxnOffsetCommit <=
  // v4) are verified; the implicit adds of transactions v2 are made whatever it says.
  bool transaction_verification_enabled = false;
  // The SASL listeners' mechanisms and users (security/sasl_settings.h); null: no SASL listener.
  const security::sasl_settings* sasl = nullptr;
  sharded_fetch_session_cache* fetch_sessions = nullptr;  // KIP-227 session caches, one per shard
  std::function<int64_t()> clock_ms;                      // wall clock in ms (tests inject one)
  // Client quotas (client_quota_manager.h): Produce and Fetch record their bytes there when the metadata
  // image holds quotas. Null: nothing is throttled.
  client_quota_manager* quotas = nullptr;
  // leader.replication.throttled.rate (replication_quota.h): what a follower's Fetch of this node's
  // leader-throttled replicas may take. Null: no throttle.
  replication::replication_quota* leader_replication_quota = nullptr;
  // The metrics endpoint's counters (broker_metrics.h), each shard writing its own. Null: nothing counted.
  broker_metrics* metrics = nullptr;
  // KIP-714 client telemetry (client_telemetry.h): set with the metrics endpoint, which shows what clients
  // push. Null: GetTelemetrySubscriptions and PushTelemetry are not advertised.
  client_telemetry* telemetry = nullptr;

  size_t shard_of(const std::string& topic, int32_t partition) const {
    return placement.shard_of(topic, partition);
  }
  // The replica manager of `shard`, or null when there is none.
  replication::replica_manager* replicas_on(size_t shard) const {
    return shard < replicas_by_shard.size() ? replicas_by_shard[shard] : nullptr;
  }
};

// Whether `listener` is one of controller.listener.names (every listener is, without a configuration: handler
// unit tests).
inline bool is_controller_listener(const broker_services& services, const std::string& listener) {
  if (!services.config) return true;
  const auto& names = services.config->controller_listener_names();
  for (const auto& n : names) {
    if (n == listener) return true;
  }
  return false;
}

struct request_context {
  const protocol::request_header& header;
  net::connection_info& connection;
  const broker_services& services;
  // The whole request (header and body), which the decoded request's byte views point into. It is the
  // handler's until it returns (net::request_dispatcher::dispatch lends it): `writable` gives a view a
  // handler may rewrite in place.
  std::span<uint8_t> request;
  // Set by a handler that sends no response but wants the connection closed, with the reason to log (Kafka
  // closes the connection after a failed acks=0 produce so the client refreshes its metadata).
  std::string close_reason = {};
  // The request's ordering point on its connection (net::ordering_point); null outside a connection (unit
  // tests of handlers).
  net::ordering_point* ordering = nullptr;
  // Set by Fetch when a follower sent it: counted as FetchFollower in the request metrics, as Kafka does.
  bool replica_fetch = false;
  // Runs a whole request (header and body) as if it came on `connection`, and returns its framed answer: how
  // Envelope serves the request a broker forwarded for its client. Set by the broker dispatcher; null in unit
  // tests of single handlers.
  std::function<asio::awaitable<net::dispatch_result>(net::connection_info& connection,
                                                      std::span<uint8_t> request)>
      dispatch_inner = {};

  // Lets the connection start its next request: everything of this request whose order matters (appends,
  // reads) is done, what is left is waiting (acks=all replication, a Fetch's min_bytes). Called on the
  // connection's shard, after every shard hop that appends or reads. Without it the next request starts when
  // this one is answered.
  void release_ordering() const {
    if (ordering) ordering->release();
  }

  // The writable bytes of `part`, a view into `request` (a records field of the decoded request); empty when
  // `part` lies outside it.
  std::span<uint8_t> writable(std::span<const uint8_t> part) const {
    if (part.empty() || request.empty() || part.data() < request.data() ||
        part.data() + part.size() > request.data() + request.size()) {
      return {};
    }
    return request.subspan(static_cast<size_t>(part.data() - request.data()), part.size());
  }
};

}  // namespace mala::broker
