// Pieces shared by the group handlers (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups, DeleteGroups): the hop to the home
// shard where the group coordinator lives and the wait for its answer (JoinGroup and SyncGroup park there
// until the rebalance reaches them), the client's address as Kafka records it, and the metadata checks of
// topics in offset requests.
//
// Threads: call_group_coordinator runs its function on the home shard and resumes the caller on its own
// shard.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "handlers/authorization.h"
#include "handlers/data_path.h"
#include "mala/broker/request_context.h"
#include "mala/coordinator/group_coordinator.h"

namespace mala::broker::handlers {

// The answer's entry for topic `name` (OffsetCommit, OffsetDelete), added at the end when it has none yet:
// Kafka's response builders list topics in the order they are first answered.
template <typename Topic>
Topic& topic_entry(std::vector<Topic>& topics, const std::string& name) {
  for (auto& t : topics) {
    if (t.name == name) return t;
  }
  auto& t = topics.emplace_back();
  t.name = name;
  return t;
}

// Where a coordinator callback leaves its answer for the coroutine that waits for it. The callback may run
// before the wait starts (the answer was ready at once) or later from a timer or another request of the same
// shard; it wakes the waiter by cancelling its timer. Copies of the callback share the state, so one that
// runs after the waiter is gone does no harm. One shard only.
template <typename T>
class answer_slot {
 public:
  explicit answer_slot(const asio::any_io_executor& executor) : _state(std::make_shared<state>(executor)) {}

  std::function<void(T)> callback() {
    return [s = _state](T value) {
      if (s->value) return;
      s->value = std::move(value);
      s->timer.cancel();
    };
  }

  asio::awaitable<T> wait() {
    auto s = _state;
    while (!s->value) {
      s->timer.expires_at(std::chrono::steady_clock::time_point::max());
      std::error_code ec;
      co_await s->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return std::move(*s->value);
  }

 private:
  struct state {
    explicit state(const asio::any_io_executor& executor) : timer(executor) {}
    std::optional<T> value;
    asio::steady_timer timer;
  };
  std::shared_ptr<state> _state;
};

// Runs fn(answer) on the home shard, where fn hands a request to a coordinator with `answer` as its
// callback, and resumes with what the coordinator answers.
template <typename T, typename Fn>
asio::awaitable<T> call_on_home_shard(const broker_services& services, Fn fn) {
  auto run = [fn = std::move(fn)]() mutable -> asio::awaitable<T> {
    auto executor = co_await asio::this_coro::executor;
    answer_slot<T> slot(executor);
    fn(slot.callback());
    co_return co_await slot.wait();
  };
  co_return co_await on_home_shard_async(services, std::move(run));
}

// call_on_home_shard with the group coordinator: fn(coordinator, answer). services.groups must be set.
template <typename T, typename Fn>
asio::awaitable<T> call_group_coordinator(const broker_services& services, Fn fn) {
  auto* groups = services.groups;
  // A named callable (GCC bug 100611: a prvalue argument of a coroutine may be destroyed twice).
  auto call = [groups, fn = std::move(fn)](std::function<void(T)> answer) mutable {
    fn(*groups, std::move(answer));
  };
  co_return co_await call_on_home_shard<T>(services, std::move(call));
}

// Who sent the request, as the coordinator records members: the client id, and the peer address the way
// Java prints an InetAddress ("/127.0.0.1"), which kafka-consumer-groups shows in its HOST column.
coordinator::request_origin request_origin_of(const request_context& ctx, int16_t version);

// AclOperation bits for a GROUP without an authorizer: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS,
// ALTER_CONFIGS (AclEntry.supportedOperations(GROUP)).
inline constexpr int32_t all_group_operations = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11);

// Whether the metadata knows the topic and the partition (Kafka's metadataCache.getPartitionInfo):
// OffsetCommit and OffsetDelete answer UNKNOWN_TOPIC_OR_PARTITION for the others without asking the
// coordinator.
bool partition_exists(const broker_services& services, const std::string& topic, int32_t partition);

// The topics of an OffsetCommit or TxnOffsetCommit request with only the partitions the metadata knows; the
// others are answered UNKNOWN_TOPIC_OR_PARTITION in `answer` (KafkaApis answers them without the
// coordinator).
template <typename Topic, typename AnswerTopic>
std::vector<Topic> known_partitions(const broker_services& services, std::vector<Topic> topics,
                                    std::vector<AnswerTopic>& answer) {
  std::vector<Topic> known;
  for (auto& t : topics) {
    Topic kept;
    kept.name = t.name;
    for (auto& p : t.partitions) {
      if (partition_exists(services, t.name, p.partition_index)) {
        kept.partitions.push_back(std::move(p));
      } else {
        topic_entry(answer, t.name)
            .partitions.push_back({p.partition_index, to_wire(error_code::unknown_topic_or_partition)});
      }
    }
    if (!kept.partitions.empty()) known.push_back(std::move(kept));
  }
  return known;
}

// The topics of an OffsetCommit, TxnOffsetCommit or OffsetDelete request whose topic the client may READ;
// the others' partitions are answered TOPIC_AUTHORIZATION_FAILED in `answer` (KafkaApis checks this before
// the metadata).
template <typename Topic, typename AnswerTopic>
std::vector<Topic> readable_topics(const request_context& ctx, std::vector<Topic> topics,
                                   std::vector<AnswerTopic>& answer) {
  if (!authorization_enabled(ctx)) return topics;
  std::vector<Topic> kept;
  for (auto& t : topics) {
    if (authorized(ctx, acl_operation::read, acl_resource_type::topic, t.name)) {
      kept.push_back(std::move(t));
      continue;
    }
    for (const auto& p : t.partitions) {
      topic_entry(answer, t.name)
          .partitions.push_back({p.partition_index, to_wire(error_code::topic_authorization_failed)});
    }
  }
  return kept;
}

// Whether the client may do `op` on the group.
inline bool group_allowed(const request_context& ctx, acl_operation op, const std::string& group) {
  return authorized(ctx, op, acl_resource_type::group, group);
}

}  // namespace mala::broker::handlers
