#include "coordinator_runtime.h"

#include "mala/common/logging.h"
#include "mala/coordinator/group_placement.h"

namespace mala::coordinator {

coordinator_runtime::coordinator_runtime(const group_coordinator_config& config, record_writer& writer,
                                         std::function<int64_t()> clock_ms)
    : _config(config), _writer(writer), _clock(std::move(clock_ms)), _log(subsystem_logger("coordinator")) {}

int32_t coordinator_runtime::partition_of(const std::string& group_id) const {
  return group_partition(group_id, _config.offsets_topic_num_partitions);
}

error_code coordinator_runtime::partition_error(const std::string& group_id) const {
  auto it = _partitions.find(partition_of(group_id));
  if (it == _partitions.end()) return error_code::not_coordinator;
  if (it->second.status == partition_status::loading) return error_code::coordinator_load_in_progress;
  return error_code::none;
}

partition_status coordinator_runtime::status_of(int32_t partition) const {
  auto it = _partitions.find(partition);
  return it == _partitions.end() ? partition_status::not_owned : it->second.status;
}

bool coordinator_runtime::any_loading() const {
  for (const auto& [p, entry] : _partitions) {
    if (entry.status == partition_status::loading) return true;
  }
  return false;
}

std::vector<int32_t> coordinator_runtime::owned_partitions() const {
  std::vector<int32_t> out;
  for (const auto& [p, e] : _partitions) out.push_back(p);
  return out;
}

void coordinator_runtime::begin_loading(int32_t partition) {
  _partitions[partition] = partition_entry{partition_status::loading, _next_epoch++, 0, {}};
}

bool coordinator_runtime::mark_active(int32_t partition) {
  auto it = _partitions.find(partition);
  if (it == _partitions.end()) return false;
  it->second.status = partition_status::active;
  return true;
}

void coordinator_runtime::forget(int32_t partition) {
  auto it = _partitions.find(partition);
  if (it == _partitions.end()) return;
  auto waiting = std::move(it->second.after_writes);
  _partitions.erase(it);
  for (auto& fn : waiting) fn();
}

void coordinator_runtime::write(int32_t partition, std::vector<coordinator_record> records,
                                std::function<void(error_code)> done) {
  auto owned = _partitions.find(partition);
  if (owned == _partitions.end()) return done(error_code::not_leader_or_follower);
  const uint64_t epoch = owned->second.epoch;
  ++owned->second.writes_in_flight;
  _writer.append(
      partition, std::move(records), [this, partition, epoch, done = std::move(done)](error_code e) {
        auto it = _partitions.find(partition);
        if (it == _partitions.end() || it->second.epoch != epoch) {
          done(error_code::not_leader_or_follower);
          return;
        }
        --it->second.writes_in_flight;
        done(e);
        it = _partitions.find(partition);
        if (it != _partitions.end() && it->second.writes_in_flight == 0 && !it->second.after_writes.empty()) {
          auto waiting = std::move(it->second.after_writes);
          it->second.after_writes.clear();
          for (auto& fn : waiting) fn();
        }
      });
}

void coordinator_runtime::after_writes(int32_t partition, std::function<void()> fn) {
  auto it = _partitions.find(partition);
  if (it != _partitions.end() && it->second.writes_in_flight > 0) {
    it->second.after_writes.push_back(std::move(fn));
    return;
  }
  fn();
}

}  // namespace mala::coordinator
