#include "handlers/write_txn_markers.h"

#include "handlers/authorization.h"

#include <memory>
#include <utility>

#include <asio/post.hpp>
#include <asio/this_coro.hpp>

#include "handlers/data_path.h"
#include "handlers/group_common.h"
#include "mala/common/logging.h"
#include "mala/coordinator/group_placement.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

namespace {

struct marker_work {
  size_t slot = 0;
  std::string topic;
  int32_t partition = 0;
  storage::txn_marker_request marker;
};

// What one shard's appends gave: errors known at once, and the slots waiting for their high watermark.
struct shard_markers {
  std::vector<std::pair<size_t, error_code>> answered;
  std::vector<size_t> waiting;
};

// On the partitions' shard: append each marker and register the acks=all waiters in `group` in the same
// turn.
shard_markers append_markers(const broker_services& services, const std::vector<marker_work>& work,
                             const std::shared_ptr<replication::spanning_waiter_group>& group) {
  shard_markers out;
  for (const auto& w : work) {
    auto hosted = hosted_partition(services, w.topic, w.partition);
    if (!hosted) {
      out.answered.emplace_back(w.slot, hosted.error().code);
      continue;
    }
    replication::partition* p = *hosted;
    auto appended = p->append_txn_marker(w.marker);
    if (!appended) {
      subsystem_logger("broker")->info("WriteTxnMarkers to {}-{} failed: {} ({})", w.topic, w.partition,
                                       error_name(appended.error().code), appended.error().message);
      out.answered.emplace_back(w.slot, appended.error().code);
      continue;
    }
    if (appended->done) {
      out.answered.emplace_back(w.slot, appended->error);
      continue;
    }
    auto handle = p->add_high_watermark_waiter(appended->required_offset, group->callback(w.slot));
    group->track(w.slot, p, handle);
    out.waiting.push_back(w.slot);
  }
  return out;
}

// A marker for a __consumer_offsets partition, through the group coordinator on the home shard.
asio::awaitable<error_code> write_group_marker(const broker_services& services, int32_t partition,
                                               storage::txn_marker_request marker) {
  if (!services.group_txn_marker_writer) co_return error_code::not_leader_or_follower;
  auto run = [&services, partition, marker]() -> asio::awaitable<error_code> {
    answer_slot<error_code> slot(co_await asio::this_coro::executor);
    services.group_txn_marker_writer(partition, marker, slot.callback());
    co_return co_await slot.wait();
  };
  co_return co_await on_home_shard_async(services, std::move(run));
}

}  // namespace

asio::awaitable<std::vector<error_code>> write_txn_markers_locally(
    const broker_services& services, std::vector<txn_marker_write> writes,
    std::chrono::steady_clock::time_point deadline) {
  std::vector<error_code> errors(writes.size(), error_code::none);
  const auto image = services.metadata->current();
  std::vector<marker_work> plain;
  std::vector<size_t> group_slots;
  for (size_t i = 0; i < writes.size(); ++i) {
    auto& w = writes[i];
    if (!find_partition(*image, w.topic, w.partition)) {
      errors[i] = error_code::unknown_topic_or_partition;
    } else if (w.topic == coordinator::offsets_topic_name) {
      group_slots.push_back(i);
    } else {
      plain.push_back({i, std::move(w.topic), w.partition, w.marker});
    }
  }
  for (size_t slot : group_slots) {
    errors[slot] = co_await write_group_marker(services, writes[slot].partition, writes[slot].marker);
  }

  auto group = std::make_shared<replication::spanning_waiter_group>(co_await asio::this_coro::executor,
                                                                    writes.size(), writes.size() + 1);
  // Each shard appends its markers and registers their waiters at once (run_on_shards_async).
  auto groups = group_by_shard(services, std::move(plain));
  std::vector<size_t> shards;
  for (const auto& g : groups) shards.push_back(g.first);
  auto append = [&services, group](const std::vector<marker_work>& w) -> asio::awaitable<shard_markers> {
    co_return append_markers(services, w, group);
  };
  auto parts =
      co_await replication::run_on_shards_async(services.shards, std::move(groups), std::move(append));
  std::vector<std::pair<size_t, std::vector<size_t>>> waiting_by_shard;
  size_t waiting = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto& part = parts[i];
    for (const auto& [slot, code] : part.answered) errors[slot] = code;
    waiting += part.waiting.size();
    if (!part.waiting.empty()) waiting_by_shard.emplace_back(shards[i], std::move(part.waiting));
  }
  if (waiting == 0) co_return errors;
  group->set_wake_after(waiting);
  co_await group->wait_until(deadline);
  for (auto& [shard, slots] : waiting_by_shard) {
    for (size_t slot : slots)
      errors[slot] = group->fired(slot) ? group->error(slot) : error_code::request_timed_out;
    auto withdraw = [group, slots = std::move(slots)] { group->cancel_unfired(slots); };
    if (services.shards) {
      asio::post(services.shards->context(shard), std::move(withdraw));
    } else {
      withdraw();
    }
  }
  co_return errors;
}

asio::awaitable<std::optional<write_txn_markers_handler::response>> write_txn_markers_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  (void)version;
  // KafkaApis.handleWriteTxnMarkersRequest: CLUSTER_ACTION, else every partition is refused.
  if (!authorized_cluster(ctx, acl_operation::cluster_action)) {
    response refused;
    for (const auto& m : req.markers) {
      auto& marker = refused.markers.emplace_back();
      marker.producer_id = m.producer_id;
      for (const auto& t : m.topics) {
        auto& topic = marker.topics.emplace_back();
        topic.name = t.name;
        for (int32_t p : t.partition_indexes)
          topic.partitions.push_back({p, to_wire(error_code::cluster_authorization_failed)});
      }
    }
    co_return refused;
  }
  const auto deadline = std::chrono::steady_clock::now() + txn_marker_append_timeout;
  std::vector<txn_marker_write> writes;
  for (const auto& m : req.markers) {
    const storage::txn_marker_request marker{.producer_id = m.producer_id,
                                             .producer_epoch = m.producer_epoch,
                                             .commit = m.transaction_result,
                                             .coordinator_epoch = m.coordinator_epoch,
                                             .transaction_version = m.transaction_version};
    for (const auto& t : m.topics) {
      for (int32_t p : t.partition_indexes) writes.push_back({t.name, p, marker});
    }
  }
  // An empty request answers at once (Kafka's handler does).
  std::vector<error_code> errors;
  if (!writes.empty()) {
    errors = co_await write_txn_markers_locally(ctx.services, std::move(writes), deadline);
  }

  response resp;
  size_t next = 0;
  for (const auto& m : req.markers) {
    auto& marker = resp.markers.emplace_back();
    marker.producer_id = m.producer_id;
    for (const auto& t : m.topics) {
      auto& topic = marker.topics.emplace_back();
      topic.name = t.name;
      for (int32_t p : t.partition_indexes) topic.partitions.push_back({p, to_wire(errors[next++])});
    }
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
