#include "handlers/describe_log_dirs.h"

#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <system_error>

#include "handlers/admin_common.h"
#include "mala/replication/replica_manager.h"

namespace mala::broker::handlers {

namespace {

// ReplicaManager.adjustForLargeFileSystems: a size that overflowed a long is reported as Long.MAX_VALUE.
int64_t file_system_bytes(uintmax_t bytes) {
  return bytes > static_cast<uintmax_t>(std::numeric_limits<int64_t>::max())
             ? std::numeric_limits<int64_t>::max()
             : static_cast<int64_t>(bytes);
}

describe_log_dirs_handler::response describe(
    const replication::replica_manager& replicas,
    const std::optional<std::set<replication::topic_partition>>& wanted) {
  describe_log_dirs_handler::response resp;
  for (const auto& dir : replicas.describe_log_dirs(wanted)) {
    auto& result = resp.results.emplace_back();
    result.log_dir = dir.path;
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
  }
  return resp;
}

}  // namespace

asio::awaitable<std::optional<describe_log_dirs_handler::response>> describe_log_dirs_handler::handle_async(
    request_context& ctx, request req, int16_t /*version*/) {
  std::optional<std::set<replication::topic_partition>> wanted;
  if (req.topics) {
    wanted.emplace();
    for (const auto& t : *req.topics) {
      for (int32_t p : t.partitions) wanted->insert(replication::topic_partition{t.topic, p});
    }
  }
  const auto* replicas = ctx.services.replicas;
  if (!replicas) co_return response{};
  // Every partition log is on the home shard today (a log dir's partitions will spread over the shards with
  // the partitions themselves).
  co_return co_await on_home_shard(ctx.services, [replicas, &wanted] { return describe(*replicas, wanted); });
}

}  // namespace mala::broker::handlers
