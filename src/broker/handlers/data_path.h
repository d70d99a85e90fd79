// Pieces shared by the data-path handlers (Produce, Fetch, ListOffsets, DeleteRecords): finding a partition
// of the metadata image and its replica, the error Kafka's ReplicaManager gives for a partition this node
// does not host, the current leader that KIP-951 responses carry, and waiter_group, which parks a request on
// partition waiters until they fire or a deadline passes (Kafka's delayed-operation purgatories).
//
// Threads: waiter_group and everything taking a replica_manager run on the home shard (the shard that owns
// the replicas); the image lookups are pure and run anywhere.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>

#include "mala/broker/request_context.h"
#include "mala/common/error_code.h"
#include "mala/metadata/metadata_image.h"
#include "mala/net/shard_pool.h"
#include "mala/replication/partition.h"
#include "mala/replication/replica_manager.h"
#include "mala/storage/log_segment.h"

// GCC 12 takes the frames of asio's coroutines (allocated and freed by awaitable_frame_base's own operator
// new/delete) for mismatched allocations once it inlines enough of them into one function: a false positive
// (GCC bug 109224; seen with asio by others too, e.g. erigontech/silkworm#2046). Every file that includes
// this header runs such coroutines (on_home_shard_async, waiter_group), so the warning is silenced here for
// all of them; the pragma holds to the end of the including file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace mala::broker::handlers {

// Runs the coroutine fn() returns on the home shard and resumes the caller on its own shard with its result
// (net::shard_pool::invoke_on_async); without a shard pool (single-threaded tests) it runs in place. fn owns
// what the coroutine needs (captures or by-value parameters of the coroutine it calls). Pass it as a named
// variable (std::move(fn)), never as a lambda expression: GCC 12 destroys a prvalue argument of a coroutine
// twice (GCC bug 100611).
template <typename Fn>
auto on_home_shard_async(const broker_services& services, Fn fn) -> decltype(fn()) {
  if (!services.shards) co_return co_await fn();
  co_return co_await services.shards->invoke_on_async(services.home_shard, std::move(fn));
}

// The wall clock of the services (tests inject one), else the system clock.
int64_t now_ms(const broker_services& services);

// The image's partition `partition` of `topic`, or nullptr (Kafka's metadataCache.contains(tp) is false:
// UNKNOWN_TOPIC_OR_PARTITION).
const metadata::partition_state* find_partition(const metadata::metadata_image& image,
                                                const std::string& topic, int32_t partition);

// Kafka's ReplicaManager.getPartitionOrException for a partition the image knows: the hosted replica, or
// KAFKA_STORAGE_ERROR when its log dir is offline, NOT_LEADER_OR_FOLLOWER when this node does not host it.
// Home shard only.
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
// entries worked out on the home shard come back as (slot, answer) pairs and replace their placeholders.
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

// A request parked on waiters of one or more partitions. callback(i) is what waiter i registers; once
// `wake_after` of them have fired, wait_until() returns (Produce acks=all waits for all of its partitions,
// Fetch for any one). The group lives in the waiting coroutine's frame; the callbacks share its state, so one
// that fires after the wait ended (or after the frame is gone) does no harm. Home shard only.
class waiter_group {
 public:
  waiter_group(size_t count, size_t wake_after);
  waiter_group(const waiter_group&) = delete;
  waiter_group& operator=(const waiter_group&) = delete;

  replication::waiter_callback callback(size_t i);
  // Remembers where waiter i was registered, for cancel_unfired.
  void track(size_t i, replication::partition* p, replication::waiter_handle handle);
  bool fired(size_t i) const { return _state->fired[i]; }
  error_code error(size_t i) const { return _state->errors[i]; }
  bool woken() const { return _state->fired_count >= _state->wake_after; }

  // Sleeps until enough waiters fired or `deadline`; returns at once if they already have.
  asio::awaitable<void> wait_until(std::chrono::steady_clock::time_point deadline);
  // Withdraws the waiters that did not fire. Their partitions still exist: a partition that stops serving
  // (removal, role change) fires all of its waiters first.
  void cancel_unfired();

 private:
  struct state {
    std::vector<bool> fired;
    std::vector<error_code> errors;
    size_t fired_count = 0;
    size_t wake_after = 1;
    asio::steady_timer* timer = nullptr;  // the sleeping coroutine's timer, null while nobody sleeps
  };
  std::shared_ptr<state> _state;
  std::vector<std::pair<replication::partition*, replication::waiter_handle>> _handles;
};

// Copies the bytes of a read out of the segment file (the handlers send copies for now; sending them with
// sendfile(2) straight from the segment is a later step). Any shard: segment files are read with pread.
result<std::vector<uint8_t>> read_slice(const storage::file_slice& slice);

}  // namespace mala::broker::handlers
