// Pieces shared by the data-path handlers (Produce, Fetch, ListOffsets, DeleteRecords): finding a partition
// of the metadata image and its replica, the error Kafka's ReplicaManager gives for a partition this node
// does not host, the current leader that KIP-951 responses carry, and the grouping of a request's partitions
// by the shard that owns them (replica_placement::shard_of). Parking a request on partition waiters is
// replication's (delayed_operation.h).
//
// Threads: everything taking a replica_manager runs on the shard owning the partition; the image lookups are
// pure and run anywhere.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>

#include "mala/broker/client_quota_manager.h"
#include "mala/broker/request_context.h"
#include "mala/common/error_code.h"
#include "mala/metadata/metadata_image.h"
#include "mala/net/shard_pool.h"
#include "mala/replication/delayed_operation.h"
#include "mala/replication/partition.h"
#include "mala/replication/replica_manager.h"

namespace mala::broker::handlers {

// Runs the coroutine fn() returns on the home shard (the coordinators' and the controller's) and resumes the
// caller on its own shard with its result (replication::run_on_shard_async, whose rules fn follows).
template <typename Fn>
auto on_home_shard_async(const broker_services& services, Fn fn) -> decltype(fn()) {
  co_return co_await replication::run_on_shard_async(services.shards, services.home_shard, std::move(fn));
}

// The entries of a request's partitions (its work items, each with `topic` and `partition` members) grouped
// by the shard that owns the partition, in request order within a shard.
template <typename Work>
std::vector<std::pair<size_t, std::vector<Work>>> group_by_shard(const broker_services& services,
                                                                 std::vector<Work> work) {
  std::vector<std::pair<size_t, std::vector<Work>>> groups;
  for (auto& w : work) {
    const size_t shard = services.shard_of(w.topic, w.partition);
    auto it = std::find_if(groups.begin(), groups.end(), [shard](const auto& g) { return g.first == shard; });
    if (it == groups.end()) it = groups.insert(groups.end(), {shard, {}});
    it->second.push_back(std::move(w));
  }
  return groups;
}

// The wall clock of the services (tests inject one), else the system clock.
int64_t now_ms(const broker_services& services);

// Client quotas on the data path (client_quota_manager.h): records `value` for the connection's quota group
// of `type` (the principal's name and the request's client id) under the current image's quotas and returns
// what was recorded with its throttle time (0: within the quota, or no quota). Without quotas it costs one
// pointer test. The caller mutes the connection with mute_for_quota once it keeps the charge.
client_quota_manager::charge charge_client_quota(const request_context& ctx, client_quota_type type,
                                                 double value);
// KIP-219: mutes the connection for the throttle time (nothing more is read or started meanwhile).
void mute_for_quota(request_context& ctx, int32_t throttle_ms);
// Both: the throttle time to answer with.
int32_t record_client_quota(request_context& ctx, client_quota_type type, double value);
// Kafka's request quota (request_percentage): the thread time the request's work took so far
// (net::request_meter), as a percentage of one thread, recorded for the connection's quota group; the
// connection is muted for the throttle (at most one quota window), which is returned. 0 without a meter (not
// on a connection), on a controller listener, or without a request quota.
int32_t record_request_quota(request_context& ctx);
// What sending the response costs goes to the same quota group without throttling this request (Kafka's
// network-thread time, ClientRequestQuotaManager.recordNoThrottle): the recorder to put in the response's
// dispatch_result::record_send_time, or an empty function where record_request_quota records nothing.
std::function<void(int64_t send_ns)> request_quota_send_recorder(const request_context& ctx);
// Kafka's getMaxValueInQuotaWindow for the connection's quota group: the most a response may carry without a
// certain throttle; nullopt without a quota.
std::optional<double> client_quota_max_in_window(const request_context& ctx, client_quota_type type);

// The image's partition `partition` of `topic`, or nullptr (Kafka's metadataCache.contains(tp) is false:
// UNKNOWN_TOPIC_OR_PARTITION).
const metadata::partition_state* find_partition(const metadata::metadata_image& image,
                                                const std::string& topic, int32_t partition);

// Kafka's ReplicaManager.getPartitionOrException for a partition the image knows: the hosted replica, or
// KAFKA_STORAGE_ERROR when its log dir is offline, NOT_LEADER_OR_FOLLOWER when this node does not host it.
// On the partition's shard only.
result<replication::partition*> hosted_partition(const broker_services& services, const std::string& topic,
                                                 int32_t partition);

// What KIP-951 adds to NOT_LEADER_OR_FOLLOWER (and, in Fetch, FENCED_LEADER_EPOCH) answers: the leader and
// epoch the image knows, and that leader's endpoint on the listener the request came in on.
struct current_leader {
  int32_t leader_id = -1;
  int32_t leader_epoch = -1;
  std::optional<metadata::broker_endpoint> endpoint;
  std::optional<std::string> rack;
};
current_leader find_current_leader(const metadata::metadata_image& image, const std::string& topic,
                                   int32_t partition, const std::string& listener_name);

// Where each partition entry of a topics-of-partitions answer (ListOffsets, DeleteRecords) stands. The answer
// is built in request order, every partition getting its entry at once (its error, or a placeholder); the
// entries worked out on the partitions' shards come back as (slot, answer) pairs and replace their
// placeholders.
class answer_slots {
 public:
  // The slot of the entry about to be added to the answer's last topic.
  template <typename Response>
  size_t next(const Response& resp) {
    _at.emplace_back(resp.topics.size() - 1, resp.topics.back().partitions.size());
    return _at.size() - 1;
  }
  // Moves each answer into the entry its slot names.
  template <typename Response, typename Answer>
  void fill(Response& resp, std::vector<std::pair<size_t, Answer>>& answers) const {
    for (auto& [slot, answer] : answers) {
      const auto [t, p] = _at[slot];
      resp.topics[t].partitions[p] = std::move(answer);
    }
  }

 private:
  std::vector<std::pair<size_t, size_t>> _at;  // by slot: (topic, partition) index in the answer
};

}  // namespace mala::broker::handlers
