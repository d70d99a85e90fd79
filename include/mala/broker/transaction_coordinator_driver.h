// Runs the transaction coordinator (coordinator/transaction_coordinator.h) inside the node:
//   - its log writer: a record appended to the __transaction_state replica with acks=-1, its completion
//     posted back once the high watermark passes it (REQUEST_TIMED_OUT after the transaction's timeout);
//   - its marker sender: WriteTxnMarkers to each partition's current leader over the inter-broker listener,
//     one request per leader, sent in parallel; markers for partitions this node leads go through the same
//     handler path in-process (set_local_services); a partition without a leader answers
//     NOT_LEADER_OR_FOLLOWER (retried by the coordinator), one whose topic is gone is reported gone;
//   - its clock: an asio timer on the home shard fires run_expired_timers at the coordinator's next deadline;
//   - its loader: each metadata image makes the coordinator own the __transaction_state partitions this
//     node leads, under their leader epoch as coordinator epoch (their log replayed from the start to the
//     end, COORDINATOR_LOAD_IN_PROGRESS meanwhile), and drop the others;
//   - KIP-890's verification for partition leaders (verify): a direct call when this node leads the
//     transactional id's __transaction_state partition, else AddPartitionsToTxn v5 to that leader over the
//     inter-broker listener, as Kafka's AddPartitionsToTxnManager: one request in flight per coordinator
//     node, carrying every verification queued meanwhile (a transaction each, VerifyOnly or the implicit add
//     of transactions v2; a newer one of the same transactional id replaces a queued one), within
//     request.timeout.ms (NETWORK_EXCEPTION when it fails, COORDINATOR_NOT_AVAILABLE without a leader);
//   - its producer ids: this broker's current block (producer_id_allocator); the handlers fetch a new block
//     from the controller before calling in when it is used up.
//
// Threads: the home shard (the shard of the internal topics' replicas), as the group coordinator's driver.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "mala/broker/request_context.h"
#include "mala/coordinator/transaction_coordinator.h"
#include "mala/metadata/metadata_image.h"

namespace asio {
class io_context;
}
namespace mala::replication {
class replica_manager;
}
namespace mala::net {
class peer_client;
}
namespace mala {
class node_config;
}

namespace mala::broker {

class producer_id_allocator;

struct transaction_coordinator_driver_options {
  int32_t node_id = 0;
  coordinator::transaction_coordinator_config coordinator;
  int32_t load_buffer_bytes = 5 << 20;  // transaction.state.log.load.buffer.size
  std::string listener_name;            // the inter-broker listener markers are sent on
  int32_t request_timeout_ms = 30'000;  // request.timeout.ms: a WriteTxnMarkers round
  std::function<int64_t()> clock_ms;    // wall clock
};

transaction_coordinator_driver_options transaction_coordinator_options_from(const node_config& config);

class transaction_coordinator_driver final : public coordinator::transaction_log_writer,
                                             public coordinator::txn_marker_sender {
 public:
  transaction_coordinator_driver(asio::io_context& home, replication::replica_manager& replicas,
                                 metadata::metadata_cache& metadata, net::peer_client& peers,
                                 producer_id_allocator& producer_ids,
                                 transaction_coordinator_driver_options options);
  ~transaction_coordinator_driver() override;
  transaction_coordinator_driver(const transaction_coordinator_driver&) = delete;
  transaction_coordinator_driver& operator=(const transaction_coordinator_driver&) = delete;

  coordinator::transaction_coordinator& coordinator();

  void on_metadata(const metadata::metadata_image& image);
  void start();
  void stop();

  void append(int32_t partition, coordinator::coordinator_record record, int32_t timeout_ms,
              std::function<void(error_code)> done) override;
  void send(coordinator::txn_marker_request request,
            std::function<void(std::vector<coordinator::txn_marker_result>)> done) override;

  // The node's handler services: with them, markers for partitions this node leads are written through
  // WriteTxnMarkers' path in-process instead of as a request to itself. Null (the default) sends every marker
  // over the inter-broker listener. Call on the home shard, before start() or after stop().
  void set_local_services(const broker_services* services);

  // broker_services::transaction_verifier, on the home shard; `done` is called there, once.
  void verify(txn_verification_request request, std::function<void(txn_verification_answer)> done);

 private:
  struct impl;
  std::unique_ptr<impl> _impl;
};

}  // namespace mala::broker
