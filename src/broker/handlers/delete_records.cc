#include "handlers/delete_records.h"

#include "handlers/authorization.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "handlers/data_path.h"
#include "mala/common/logging.h"

namespace mala::broker::handlers {

namespace {

using partition_result = protocol::delete_records_response::delete_records_partition_result;
using steady_clock = std::chrono::steady_clock;

partition_result error_result(int32_t index, error_code code) {
  partition_result r;
  r.partition_index = index;
  r.error_code = to_wire(code);
  r.low_watermark = -1;  // DeleteRecordsResponse.INVALID_LOW_WATERMARK
  return r;
}

struct deletion {
  size_t slot = 0;
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
};

// The part on the partitions' shard: delete on each leader, then (Kafka's DelayedDeleteRecords) wait until
// every low watermark reached its requested offset, re-checking whenever one of the partitions changes (an
// append, a follower's fetch reporting a new log start, a follower fenced).
asio::awaitable<std::vector<std::pair<size_t, partition_result>>> delete_on_shard(
    const broker_services& services, std::vector<deletion> deletions, steady_clock::time_point deadline) {
  std::vector<std::pair<size_t, partition_result>> out;
  struct pending {
    size_t answer;
    std::string topic;
    int32_t partition;
    int64_t requested_offset;
  };
  std::vector<pending> waits;
  for (const auto& d : deletions) {
    auto hosted = hosted_partition(services, d.topic, d.partition);
    if (!hosted) {
      out.emplace_back(d.slot, error_result(d.partition, hosted.error().code));
      continue;
    }
    auto deleted = (*hosted)->delete_records(d.offset);
    if (!deleted) {
      subsystem_logger("broker")->debug("DeleteRecords on {}-{}: {}", d.topic, d.partition,
                                        deleted.error().message);
      out.emplace_back(d.slot, error_result(d.partition, deleted.error().code));
      continue;
    }
    partition_result r = error_result(d.partition, error_code::none);
    r.low_watermark = deleted->low_watermark;
    if (deleted->low_watermark < deleted->requested_offset) {
      waits.push_back({out.size(), d.topic, d.partition, deleted->requested_offset});
    }
    out.emplace_back(d.slot, std::move(r));
  }

  while (!waits.empty()) {
    // Re-check: a partition that stopped being led answers NOT_LEADER_OR_FOLLOWER, one whose followers caught
    // up its low watermark.
    std::vector<pending> still;
    for (auto& w : waits) {
      auto& r = out[w.answer].second;
      auto hosted = hosted_partition(services, w.topic, w.partition);
      if (!hosted || !(*hosted)->is_leader()) {
        r = error_result(w.partition, error_code::not_leader_or_follower);
        continue;
      }
      r.low_watermark = (*hosted)->low_watermark();
      if (r.low_watermark < w.requested_offset) still.push_back(std::move(w));
    }
    waits = std::move(still);
    if (waits.empty()) break;
    if (steady_clock::now() >= deadline) {
      for (auto& w : waits) out[w.answer].second.error_code = to_wire(error_code::request_timed_out);
      break;
    }
    replication::waiter_group group(waits.size(), 1);
    for (size_t i = 0; i < waits.size(); ++i) {
      auto hosted = hosted_partition(services, waits[i].topic, waits[i].partition);
      if (!hosted) continue;
      group.track(i, *hosted, (*hosted)->add_data_waiter(group.callback(i)));
    }
    co_await group.wait_until(deadline);
    group.cancel_unfired();
  }
  co_return out;
}

}  // namespace

asio::awaitable<std::optional<delete_records_handler::response>> delete_records_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  (void)version;
  const auto& services = ctx.services;
  const auto deadline = steady_clock::now() + std::chrono::milliseconds(std::max(req.timeout_ms, 0));
  const auto image = services.metadata->current();

  response resp;
  std::vector<deletion> deletions;
  answer_slots slots;
  for (const auto& t : req.topics) {
    auto& topic = resp.topics.emplace_back();
    topic.name = t.name;
    const auto* known = image->find_topic(t.name);
    // KafkaApis.handleDeleteRecordsRequest: DELETE on the topic.
    const bool allowed = authorized(ctx, acl_operation::remove, acl_resource_type::topic, t.name);
    for (const auto& p : t.partitions) {
      const size_t slot = slots.next(resp);
      if (!allowed) {
        topic.partitions.push_back(error_result(p.partition_index, error_code::topic_authorization_failed));
      } else if (!find_partition(*image, t.name, p.partition_index)) {
        topic.partitions.push_back(error_result(p.partition_index, error_code::unknown_topic_or_partition));
      } else if (known && known->internal) {
        // Kafka refuses to delete records of internal topics for clients (allowInternalTopicDeletion=false).
        topic.partitions.push_back(error_result(p.partition_index, error_code::invalid_topic_exception));
      } else {
        topic.partitions.push_back(error_result(p.partition_index, error_code::none));
        deletions.push_back({slot, t.name, p.partition_index, p.offset});
      }
    }
  }

  // Every shard deletes and waits for its low watermarks at once (Kafka deletes on every partition, then
  // waits for all in one DelayedDeleteRecords).
  auto groups = group_by_shard(services, std::move(deletions));
  auto remove = [&services, deadline](std::vector<deletion>& d) {
    return delete_on_shard(services, std::move(d), deadline);
  };
  auto parts =
      co_await replication::run_on_shards_async(services.shards, std::move(groups), std::move(remove));
  for (auto& answers : parts) slots.fill(resp, answers);
  co_return resp;
}

}  // namespace mala::broker::handlers
