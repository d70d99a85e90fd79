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
  write(partition, std::move(records), std::nullopt,
        [done = std::move(done)](error_code e, int64_t /*first_offset*/) { done(e); });
}

void coordinator_runtime::write(int32_t partition, std::vector<coordinator_record> records,
                                std::optional<transactional_producer> producer,
                                record_writer::append_callback done) {
  track(partition, std::move(done), [&](record_writer::append_callback completion) {
    _writer.append(partition, std::move(records), producer, std::move(completion));
  });
}

void coordinator_runtime::write_marker(int32_t partition, const txn_marker_write& marker,
                                       record_writer::append_callback done) {
  track(partition, std::move(done), [&](record_writer::append_callback completion) {
    _writer.append_marker(partition, marker, std::move(completion));
  });
}

void coordinator_runtime::track(int32_t partition, record_writer::append_callback done,
                                const std::function<void(record_writer::append_callback)>& start) {
  auto owned = _partitions.find(partition);
  if (owned == _partitions.end()) return done(error_code::not_leader_or_follower, -1);
  const uint64_t epoch = owned->second.epoch;
  ++owned->second.writes_in_flight;
  start([this, partition, epoch, done = std::move(done)](error_code e, int64_t first_offset) {
    auto it = _partitions.find(partition);
    if (it == _partitions.end() || it->second.epoch != epoch) {
      done(error_code::not_leader_or_follower, -1);
      return;
    }
    --it->second.writes_in_flight;
    done(e, first_offset);
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
