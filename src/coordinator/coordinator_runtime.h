// The partitions of __consumer_offsets this node coordinates and the appends to them (Kafka's
// CoordinatorRuntime): each owned partition's status (loading, then active) and epoch, the appends in flight
// and what waits for them, the clock, the timers and the log. The protocol parts of the group coordinator
// (classic_group_manager, consumer_group_manager, offset_manager) each receive the one runtime of their
// group_coordinator and keep their own groups and offsets beside it.
//
// A write whose partition moved away or was reloaded before it completed answers NOT_LEADER_OR_FOLLOWER,
// whatever the append said: what it was for is gone with the partition.
//
// Threads: the group coordinator's (one shard). Internal to src/coordinator.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mala/common/error_code.h"
#include "mala/coordinator/group_coordinator.h"
#include "mala/coordinator/group_records.h"
#include "mala/coordinator/keyed_timer.h"

namespace spdlog {
class logger;
}

namespace mala::coordinator {

class coordinator_runtime {
 public:
  coordinator_runtime(const group_coordinator_config& config, record_writer& writer,
                      std::function<int64_t()> clock_ms);
  coordinator_runtime(const coordinator_runtime&) = delete;
  coordinator_runtime& operator=(const coordinator_runtime&) = delete;

  const group_coordinator_config& config() const { return _config; }
  int64_t now() const { return _clock(); }
  keyed_timer& timers() { return _timers; }
  const keyed_timer& timers() const { return _timers; }
  spdlog::logger& log() const { return *_log; }

  int32_t partition_of(const std::string& group_id) const;
  // NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for a group whose partition does not serve here, else
  // NONE.
  error_code partition_error(const std::string& group_id) const;
  partition_status status_of(int32_t partition) const;
  bool is_active(int32_t partition) const { return status_of(partition) == partition_status::active; }
  bool any_loading() const;
  std::vector<int32_t> owned_partitions() const;

  // The partition starts loading under a new epoch (the caller forgot what it knew of it first).
  void begin_loading(int32_t partition);
  // false when the partition is not owned.
  bool mark_active(int32_t partition);
  // The partition is no longer owned; what waited for its appends runs now (and sees NOT_COORDINATOR).
  void forget(int32_t partition);

  // Appends to an owned partition (NOT_LEADER_OR_FOLLOWER at once otherwise); `done` gets the append's error
  // (and, for the forms that take an append_callback, the log offset of the first record).
  void write(int32_t partition, std::vector<coordinator_record> records,
             std::function<void(error_code)> done);
  void write(int32_t partition, std::vector<coordinator_record> records,
             std::optional<transactional_producer> producer, record_writer::append_callback done);
  void write_marker(int32_t partition, const txn_marker_write& marker, record_writer::append_callback done);
  // Runs `fn` once the partition's appends in flight completed: at once when there are none (or the
  // partition is not owned).
  void after_writes(int32_t partition, std::function<void()> fn);

 private:
  struct partition_entry {
    partition_status status = partition_status::loading;
    uint64_t epoch = 0;
    int32_t writes_in_flight = 0;
    std::vector<std::function<void()>> after_writes;
  };

  // Counts the write in flight on an owned partition and calls `start` with the completion that checks the
  // partition is still owned under the same epoch.
  void track(int32_t partition, record_writer::append_callback done,
             const std::function<void(record_writer::append_callback)>& start);

  const group_coordinator_config& _config;
  record_writer& _writer;
  std::function<int64_t()> _clock;
  keyed_timer _timers;
  std::map<int32_t, partition_entry> _partitions;
  uint64_t _next_epoch = 1;
  std::shared_ptr<spdlog::logger> _log;
};

}  // namespace mala::coordinator
