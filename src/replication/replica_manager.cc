#include "mala/replication/replica_manager.h"

#include <algorithm>
#include <system_error>
#include <utility>

#include "mala/common/assert.h"
#include "mala/common/current_shard.h"
#include "mala/common/logging.h"

namespace mala::replication {

replica_manager::replica_manager(storage::log_manager& logs, replica_manager_options options)
    : _logs(logs), _options(std::move(options)) {}

replica_manager::~replica_manager() {
  // Requests still parked must not wait for a partition that is gone.
  for (auto& [tp, p] : _partitions) p->stop();
}

void replica_manager::check_shard() const {
  const int here = current_shard();
  MALA_ASSERT(here < 0 || here == _options.shard, "replicas of shard {} used on shard {}", _options.shard,
              here);
}

result<state_change> replica_manager::apply_leadership(const partition_leadership& leadership) {
  check_shard();
  storage::topic_partition tp{leadership.topic, leadership.partition};
  if (_logs.is_offline(tp)) {
    return status::error(
        error_code::kafka_storage_error,
        leadership.topic + "-" + std::to_string(leadership.partition) + ": the replica's log dir is offline");
  }
  auto it = _partitions.find(tp);
  if (it != _partitions.end() && !leadership.topic_id.is_zero() && !it->second->topic_id().is_zero() &&
      it->second->topic_id() != leadership.topic_id) {
    return status::error(error_code::inconsistent_topic_id,
                         leadership.topic + "-" + std::to_string(leadership.partition) +
                             ": hosted for topic id " + it->second->topic_id().to_string() + ", asked for " +
                             leadership.topic_id.to_string());
  }
  if (it == _partitions.end()) {
    auto log = _logs.create(tp, leadership.topic_id, leadership.log_config);
    if (!log) {
      auto code = log.error().code == error_code::none ? error_code::kafka_storage_error : log.error().code;
      return status::error(code, log.error().message);
    }
    partition_options options;
    options.local_replica_id = _options.local_replica_id;
    options.replica_lag_time_max_ms = _options.replica_lag_time_max_ms;
    options.clock_ms = _options.clock_ms;
    if (_options.checkpointed_high_watermark)
      options.initial_high_watermark = _options.checkpointed_high_watermark(tp);
    options.producer_state = _options.producer_state;
    options.producer_id_expiration_check_interval_ms = _options.producer_id_expiration_check_interval_ms;
    auto created = std::make_unique<partition>(*log, leadership.topic_id, std::move(options));
    // A replica whose producer state cannot be loaded would accept duplicates or out-of-order batches.
    if (!created->load_status().ok()) return created->load_status();
    it = _partitions.emplace(tp, std::move(created)).first;
    _index[tp] = it->second.get();
    ++_generation;
    subsystem_logger("replication")
        ->info("{}-{}: replica on shard {}, log {} to {}", tp.topic, tp.partition, _options.shard,
               log.value()->log_start_offset(), log.value()->log_end_offset());
    resume_move(tp);
  }
  // Topic configs change without a restart (segment size, retention, max.message.bytes, ...), and a log that
  // the log manager loaded at start-up was opened with the broker defaults, before the metadata named its
  // topic's configs: the log takes the topic's effective config here either way.
  it->second->log().update_config(leadership.log_config);
  if (leadership.state.leader == _options.local_replica_id) return it->second->make_leader(leadership.state);
  return it->second->make_follower(leadership.state);
}

status replica_manager::remove_partition(const storage::topic_partition& tp, bool delete_log) {
  check_shard();
  auto it = _partitions.find(tp);
  if (it == _partitions.end()) {
    return status::error(error_code::unknown_topic_or_partition,
                         tp.topic + "-" + std::to_string(tp.partition) + " is not hosted here");
  }
  _moves.erase(tp);  // its future log goes with the log (or stays for the next load to remove)
  it->second->stop();
  if (!delete_log) {
    if (auto st = it->second->close(); !st.ok()) {
      subsystem_logger("replication")
          ->warn("{}-{}: cannot snapshot the producer state: {}", tp.topic, tp.partition, st.message);
    }
  }
  _index.erase(tp);
  _partitions.erase(it);
  ++_generation;
  subsystem_logger("replication")
      ->info("{}-{}: replica removed{}", tp.topic, tp.partition, delete_log ? ", deleting its log" : "");
  if (delete_log) return _logs.remove(tp);
  return status::success();
}

void replica_manager::mark_offline(const std::vector<storage::topic_partition>& partitions) {
  check_shard();
  for (const auto& tp : partitions) {
    auto it = _partitions.find(tp);
    if (it == _partitions.end()) continue;
    it->second->stop(error_code::kafka_storage_error);
    subsystem_logger("replication")
        ->warn("{}-{}: replica offline (its log dir failed)", tp.topic, tp.partition);
  }
}

partition* replica_manager::get(const storage::topic_partition& tp) const {
  check_shard();
  auto it = _index.find(tp);
  return it == _index.end() ? nullptr : it->second;
}

size_t replica_manager::topic_partition_hash::operator()(const storage::topic_partition& tp) const noexcept {
  return std::hash<std::string>{}(tp.topic) * 31 + std::hash<int32_t>{}(tp.partition);
}

std::vector<storage::topic_partition> replica_manager::partitions() const {
  check_shard();
  std::vector<storage::topic_partition> out;
  out.reserve(_partitions.size());
  for (const auto& [tp, p] : _partitions) out.push_back(tp);
  return out;
}

int32_t replica_manager::under_replicated_count() const {
  int32_t n = 0;
  for (const auto& [tp, p] : _partitions) n += p->under_replicated() ? 1 : 0;
  return n;
}

int32_t replica_manager::under_min_isr_count() const {
  int32_t n = 0;
  for (const auto& [tp, p] : _partitions) n += p->under_min_isr() ? 1 : 0;
  return n;
}

replica_manager::replica_gauges replica_manager::gauges() const {
  replica_gauges g;
  for (const auto& [tp, p] : _partitions) {
    ++g.partitions;
    if (p->log().is_offline()) ++g.offline;
    if (!p->is_leader()) continue;
    ++g.leaders;
    if (p->under_replicated()) ++g.under_replicated;
    if (p->under_min_isr()) ++g.under_min_isr;
    if (static_cast<int32_t>(p->isr().size()) == p->min_insync_replicas()) ++g.at_min_isr;
  }
  return g;
}

namespace {

// Kafka reports paths as Path.toAbsolutePath.
std::string absolute_path(const std::filesystem::path& p) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(p, ec);
  return (ec ? p : abs).lexically_normal().string();
}

}  // namespace

std::vector<log_dir_description> replica_manager::describe_log_dirs(
    const std::optional<std::set<topic_partition>>& wanted,
    const std::function<bool(const topic_partition&)>& owned) const {
  check_shard();
  std::map<std::string, std::map<std::string, std::map<int32_t, int64_t>>> by_dir;
  for (const auto& tp : _logs.partitions()) {
    if (wanted && !wanted->count(tp)) continue;
    if (owned && !owned(tp)) continue;
    const auto* log = _logs.get(tp);
    if (!log) continue;
    by_dir[absolute_path(log->dir().parent_path())][tp.topic][tp.partition] = log->size_bytes();
  }
  std::map<std::string, std::map<std::string, std::map<int32_t, log_dir_description::future_log>>> futures;
  for (const auto& [tp, move] : _moves) {
    if (wanted && !wanted->count(tp)) continue;
    if (owned && !owned(tp)) continue;
    const auto future = _logs.describe_future(tp);
    const auto* log = _logs.get(tp);
    if (!future || !log) continue;
    futures[absolute_path(future->dir.parent_path())][tp.topic][tp.partition] = {
        future->size_bytes, std::max<int64_t>(0, log->log_end_offset() - future->log_end_offset)};
  }
  std::vector<log_dir_description> out;
  for (const auto& dir : _logs.dirs()) {
    auto& d = out.emplace_back();
    d.path = absolute_path(dir.path);
    d.online = dir.online;
    if (auto it = by_dir.find(d.path); it != by_dir.end()) d.log_sizes = it->second;
    if (auto it = futures.find(d.path); it != futures.end()) d.future_logs = it->second;
  }
  return out;
}

std::vector<log_dir_description> merge_log_dirs(std::vector<std::vector<log_dir_description>> per_shard) {
  std::vector<log_dir_description> out;
  for (auto& shard : per_shard) {
    for (auto& dir : shard) {
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& d) { return d.path == dir.path; });
      if (it == out.end()) {
        out.push_back(std::move(dir));
        continue;
      }
      it->online = it->online && dir.online;
      for (auto& [topic, sizes] : dir.log_sizes) it->log_sizes[topic].merge(sizes);
      for (auto& [topic, logs] : dir.future_logs) it->future_logs[topic].merge(logs);
    }
  }
  return out;
}

}  // namespace mala::replication
