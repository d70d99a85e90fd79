#include "handlers/describe_log_dirs.h"

#include "handlers/authorization.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <system_error>

#include "handlers/admin_common.h"
#include "mala/broker/cordoned_log_dirs.h"
#include "mala/net/coroutine_frame_warning.h"
#include "mala/replication/replica_manager.h"

namespace mala::broker::handlers {

namespace {

// ReplicaManager.adjustForLargeFileSystems: a size that overflowed a long is reported as Long.MAX_VALUE.
int64_t file_system_bytes(uintmax_t bytes) {
  return bytes > static_cast<uintmax_t>(std::numeric_limits<int64_t>::max())
             ? std::numeric_limits<int64_t>::max()
             : static_cast<int64_t>(bytes);
}

describe_log_dirs_handler::response describe(const std::vector<replication::log_dir_description>& dirs,
                                             const std::vector<std::string>& cordoned) {
  describe_log_dirs_handler::response resp;
  for (const auto& dir : dirs) {
    auto& result = resp.results.emplace_back();
    result.log_dir = dir.path;
    result.is_cordoned = std::find(cordoned.begin(), cordoned.end(), dir.path) != cordoned.end();  // v5
    if (!dir.online) {
      result.error_code = to_wire(error_code::kafka_storage_error);
      continue;
    }
    std::error_code ec;
    const auto space = std::filesystem::space(dir.path, ec);
    if (ec) {
      // Kafka: an IOException from the file store is not a KafkaStorageException.
      result.error_code = to_wire(error_code::unknown_server_error);
      continue;
    }
    result.total_bytes = file_system_bytes(space.capacity);
    result.usable_bytes = file_system_bytes(space.available);
    for (const auto& [topic, partitions] : dir.log_sizes) {
      auto& t = result.topics.emplace_back();
      t.name = topic;
      for (const auto& [partition, size] : partitions) {
        auto& p = t.partitions.emplace_back();
        p.partition_index = partition;
        p.partition_size = size;
        p.offset_lag = 0;
        p.is_future_key = false;
      }
    }
    // KIP-113: a replica moving into this dir (AlterReplicaLogDirs), listed under its topic.
    for (const auto& [topic_name, logs] : dir.future_logs) {
      const std::string& topic = topic_name;  // a structured binding cannot be captured (C++20, clang)
      auto at = std::find_if(result.topics.begin(), result.topics.end(),
                             [&topic](const auto& t) { return t.name == topic; });
      auto& t = at != result.topics.end() ? *at : result.topics.emplace_back();
      t.name = topic;
      for (const auto& [partition, future] : logs) {
        auto& p = t.partitions.emplace_back();
        p.partition_index = partition;
        p.partition_size = future.size;
        p.offset_lag = future.offset_lag;
        p.is_future_key = true;
      }
    }
  }
  return resp;
}

}  // namespace

asio::awaitable<std::optional<describe_log_dirs_handler::response>> describe_log_dirs_handler::handle_async(
    request_context& ctx, request req, int16_t /*version*/) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::describe)) co_return std::move(*refused);
  std::optional<std::set<replication::topic_partition>> wanted;
  if (req.topics) {
    wanted.emplace();
    for (const auto& t : *req.topics) {
      for (int32_t p : t.partitions) wanted->insert(replication::topic_partition{t.topic, p});
    }
  }
  const auto& services = ctx.services;
  if (services.replicas_by_shard.empty()) co_return response{};
  // Each shard measures the logs it owns; the answers are merged dir by dir.
  std::vector<std::vector<replication::log_dir_description>> per_shard;
  for (size_t shard = 0; shard < services.replicas_by_shard.size(); ++shard) {
    const auto* replicas = services.replicas_by_shard[shard];
    auto measure = [replicas, shard, &services, &wanted] {
      return replicas->describe_log_dirs(wanted, [shard, &services](const replication::topic_partition& tp) {
        return services.placement.shard_of(tp) == shard;
      });
    };
    if (!services.shards) {
      per_shard.push_back(measure());
    } else {
      per_shard.push_back(co_await services.shards->invoke_on(shard, std::move(measure)));
    }
  }
  std::vector<std::string> cordoned;
  if (services.config && services.metadata)
    cordoned = cordoned_log_dirs(*services.config, *services.metadata->current(), services.node_id);
  co_return describe(replication::merge_log_dirs(std::move(per_shard)), cordoned);
}

}  // namespace mala::broker::handlers
