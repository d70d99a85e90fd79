#include "handlers/describe_log_dirs.h"

#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <system_error>

#include "handlers/admin_common.h"
#include "mala/storage/log_manager.h"

namespace mala::broker::handlers {

namespace {

namespace fs = std::filesystem;

// Kafka reports paths as Path.toAbsolutePath.
std::string absolute_path(const fs::path& p) {
  std::error_code ec;
  auto abs = fs::absolute(p, ec);
  return (ec ? p : abs).lexically_normal().string();
}

// ReplicaManager.adjustForLargeFileSystems: a size that overflowed a long is reported as Long.MAX_VALUE.
int64_t file_system_bytes(uintmax_t bytes) {
  return bytes > static_cast<uintmax_t>(std::numeric_limits<int64_t>::max())
             ? std::numeric_limits<int64_t>::max()
             : static_cast<int64_t>(bytes);
}

describe_log_dirs_handler::response describe(
    const storage::log_manager& logs, const std::optional<std::set<storage::topic_partition>>& wanted) {
  describe_log_dirs_handler::response resp;
  // The partitions of each dir, by the dir's absolute path, topics and partitions sorted.
  std::map<std::string, std::map<std::string, std::map<int32_t, int64_t>>> by_dir;
  for (const auto& tp : logs.partitions()) {
    if (wanted && !wanted->count(tp)) continue;
    const auto* log = logs.get(tp);
    if (!log) continue;
    by_dir[absolute_path(log->dir().parent_path())][tp.topic][tp.partition] = log->size_bytes();
  }
  for (const auto& dir : logs.dirs()) {
    auto& result = resp.results.emplace_back();
    result.log_dir = absolute_path(dir.path);
    if (!dir.online) {
      result.error_code = to_wire(error_code::kafka_storage_error);
      continue;
    }
    std::error_code ec;
    const auto space = fs::space(dir.path, ec);
    if (ec) {
      // Kafka: an IOException from the file store is not a KafkaStorageException.
      result.error_code = to_wire(error_code::unknown_server_error);
      continue;
    }
    result.total_bytes = file_system_bytes(space.capacity);
    result.usable_bytes = file_system_bytes(space.available);
    auto it = by_dir.find(result.log_dir);
    if (it == by_dir.end()) continue;
    for (const auto& [topic, partitions] : it->second) {
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
  std::optional<std::set<storage::topic_partition>> wanted;
  if (req.topics) {
    wanted.emplace();
    for (const auto& t : *req.topics) {
      for (int32_t p : t.partitions) wanted->insert(storage::topic_partition{t.topic, p});
    }
  }
  const auto* logs = ctx.services.logs;
  if (!logs) co_return response{};
  co_return co_await on_home_shard(ctx.services, [logs, &wanted] { return describe(*logs, wanted); });
}

}  // namespace mala::broker::handlers
