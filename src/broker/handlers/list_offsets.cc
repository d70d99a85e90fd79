#include "handlers/list_offsets.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "handlers/authorization.h"
#include "handlers/data_path.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

namespace {

using partition_response = protocol::list_offsets_response::list_offsets_partition_response;

// ListOffsetsRequest.LATEST_TIERED_TIMESTAMP (KIP-1005) and EARLIEST_PENDING_UPLOAD_TIMESTAMP (KIP-1023).
constexpr int64_t latest_tiered_timestamp = -5;
constexpr int64_t earliest_pending_upload_timestamp = -6;

// ReplicaManager.isListOffsetsTimestampUnsupported: each special timestamp needs the request version that
// introduced it (max timestamp v7, KIP-734; earliest local v8 and latest tiered v9, KIP-405/KIP-1005;
// earliest pending upload v11, KIP-1023), and no other negative timestamp exists.
bool timestamp_unsupported(int64_t timestamp, int16_t version) {
  if (timestamp >= 0) return false;
  switch (timestamp) {
    case replication::latest_timestamp:
    case replication::earliest_timestamp:
      return version < 1;
    case replication::max_timestamp_query:
      return version < 7;
    case replication::earliest_local_timestamp:
      return version < 8;
    case latest_tiered_timestamp:
      return version < 9;
    case earliest_pending_upload_timestamp:
      return version < 11;
    default:
      return true;
  }
}

partition_response error_response(int32_t index, error_code code) {
  partition_response r;
  r.partition_index = index;
  r.error_code = to_wire(code);
  r.timestamp = -1;
  r.offset = -1;
  r.leader_epoch = -1;
  return r;
}

struct lookup {
  size_t slot = 0;
  std::string topic;
  int32_t partition = 0;
  int64_t timestamp = 0;
  int32_t current_leader_epoch = -1;
};

// The part on the partitions' shard: Kafka's fetchOffsetForTimestamp on each leader.
std::vector<std::pair<size_t, partition_response>> look_up_on_shard(
    const broker_services& services, const std::vector<lookup>& lookups,
    std::optional<replication::isolation_level> isolation, int16_t version) {
  std::vector<std::pair<size_t, partition_response>> out;
  out.reserve(lookups.size());
  for (const auto& l : lookups) {
    auto hosted = hosted_partition(services, l.topic, l.partition);
    if (!hosted) {
      out.emplace_back(l.slot, error_response(l.partition, hosted.error().code));
      continue;
    }
    std::optional<int32_t> epoch;
    if (l.current_leader_epoch >= 0) epoch = l.current_leader_epoch;
    if (l.timestamp == latest_tiered_timestamp || l.timestamp == earliest_pending_upload_timestamp) {
      // Without tiered storage Kafka answers no offset, with leader epoch -1, for both (UnifiedLog's
      // fetchEarliestPendingUploadOffset when remote storage is off); the leader checks still apply.
      auto checked = (*hosted)->list_offset(replication::latest_timestamp, isolation, epoch);
      if (!checked && checked.error().code != error_code::offset_not_available) {
        out.emplace_back(l.slot, error_response(l.partition, checked.error().code));
      } else {
        out.emplace_back(l.slot, error_response(l.partition, error_code::none));
      }
      continue;
    }
    auto found = (*hosted)->list_offset(l.timestamp, isolation, epoch);
    if (!found) {
      error_code code = found.error().code;
      // Only v5+ clients know OFFSET_NOT_AVAILABLE (KIP-320); older ones retry on LEADER_NOT_AVAILABLE.
      if (code == error_code::offset_not_available && version < 5) code = error_code::leader_not_available;
      out.emplace_back(l.slot, error_response(l.partition, code));
      continue;
    }
    partition_response r = error_response(l.partition, error_code::none);
    if (found->found) {
      r.timestamp = found->found->timestamp;
      r.offset = found->found->offset;
      r.leader_epoch = found->found->leader_epoch.value_or(-1);
    }
    out.emplace_back(l.slot, std::move(r));
  }
  return out;
}

}  // namespace

asio::awaitable<std::optional<list_offsets_handler::response>> list_offsets_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  const auto& services = ctx.services;
  const auto image = services.metadata->current();
  // Only a consumer's request is bounded by the high watermark or last stable offset; a replica (or the
  // debugging id -2) sees the log end offset.
  std::optional<replication::isolation_level> isolation;
  if (req.replica_id == replication::consumer_replica_id) {
    isolation = req.isolation_level == 1 ? replication::isolation_level::read_committed
                                         : replication::isolation_level::read_uncommitted;
  }

  // Kafka answers INVALID_REQUEST for every occurrence of a partition named more than once.
  std::map<std::pair<std::string, int32_t>, int> occurrences;
  for (const auto& t : req.topics) {
    for (const auto& p : t.partitions) ++occurrences[{t.name, p.partition_index}];
  }

  response resp;
  std::vector<lookup> lookups;
  answer_slots slots;
  for (const auto& t : req.topics) {
    auto& topic = resp.topics.emplace_back();
    topic.name = t.name;
    // KafkaApis.handleListOffsetRequest: DESCRIBE on the topic, before any other check.
    const bool described = authorized(ctx, acl_operation::describe, acl_resource_type::topic, t.name);
    for (const auto& p : t.partitions) {
      const size_t slot = slots.next(resp);
      if (!described) {
        topic.partitions.push_back(error_response(p.partition_index, error_code::topic_authorization_failed));
      } else if (occurrences[{t.name, p.partition_index}] > 1) {
        topic.partitions.push_back(error_response(p.partition_index, error_code::invalid_request));
      } else if (timestamp_unsupported(p.timestamp, version)) {
        topic.partitions.push_back(error_response(p.partition_index, error_code::unsupported_version));
      } else if (!find_partition(*image, t.name, p.partition_index)) {
        topic.partitions.push_back(error_response(p.partition_index, error_code::unknown_topic_or_partition));
      } else {
        topic.partitions.push_back(error_response(p.partition_index, error_code::none));
        lookups.push_back({slot, t.name, p.partition_index, p.timestamp, p.current_leader_epoch});
      }
    }
  }

  // The shards look up their partitions at once.
  auto groups = group_by_shard(services, std::move(lookups));
  auto look_up = [&services, isolation, version](const std::vector<lookup>& l)
      -> asio::awaitable<std::vector<std::pair<size_t, partition_response>>> {
    co_return look_up_on_shard(services, l, isolation, version);
  };
  auto parts =
      co_await replication::run_on_shards_async(services.shards, std::move(groups), std::move(look_up));
  for (auto& answers : parts) slots.fill(resp, answers);
  co_return resp;
}

}  // namespace mala::broker::handlers
