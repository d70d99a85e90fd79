// The state of a partition_log (partition_log.h), shared by the files that implement it: partition_log.cc
// (opening and recovery, appends, reads, flushing and closing) and partition_log_trimming.cc (truncation,
// retention, deletion, and the log cleaner's snapshot and swap: what removes or replaces segments). Private
// to the storage library.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "file_io.h"
#include "mala/common/logging.h"
#include "mala/protocol/record_batch.h"
#include "mala/storage/partition_log.h"

namespace mala::storage {

namespace partition_log_parts {

using segment_map = std::map<int64_t, std::unique_ptr<log_segment>>;

inline int64_t system_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline std::string describe(const topic_partition& tp) {
  return tp.topic + "-" + std::to_string(tp.partition);
}

inline status storage_error(const topic_partition& tp, const std::string& what) {
  return status::error(error_code::kafka_storage_error, describe(tp) + ": " + what);
}

// Kafka's LogSegment.largestTimestamp: the largest batch timestamp, or the file's modification time for a
// segment without timestamps, so that retention.ms still applies to it.
int64_t largest_timestamp(const log_segment& segment);

}  // namespace partition_log_parts

// Only the files implementing partition_log include this header.
using namespace partition_log_parts;  // NOLINT(google-build-using-namespace)

struct partition_log::impl {
  using segment_map = partition_log_parts::segment_map;
  std::string dir;  // a string: a std::filesystem::path allocates each component apart
  topic_partition tp;
  log_config config;
  std::function<int64_t()> clock;
  segment_map segments;
  leader_epoch_cache epochs;
  // Written on the owning shard only; atomic because the log manager reads both for its checkpoints from
  // another thread.
  std::atomic<int64_t> log_start_offset = 0;
  int64_t log_end_offset = 0;
  std::atomic<int64_t> recovery_point = 0;
  // See flush_token(): new at every truncation.
  uint64_t flush_token = new_flush_token();
  static uint64_t new_flush_token() {
    static std::atomic<uint64_t> last{0};
    return last.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  log_recovery_report report;
  // The active segment came from disk, its indexes sized by the config given to open(): the log manager opens
  // the logs it finds at start-up with the broker defaults, before the metadata names their topics' configs.
  // The first update_config() then sizes them to the topic's segment.index.bytes, as Kafka opens them with
  // the topic's value; later changes reach only the segments created after them (Kafka's rule).
  bool active_indexes_sized_by_open = false;

  // Flush policy bookkeeping: the offset a handed-out flush_work() will reach once the caller marks it
  // flushed, and when work was last handed out (flush.ms counts from there).
  int64_t flush_pending_offset = 0;
  int64_t last_flush_ms = 0;
  bool flush_work_handed_out = false;  // flush_work() returned files at least once
  // A segment was created since the directory was last synced (a roll): the next flush syncs the directory
  // too, so that the new file's name survives a power loss before the data it holds counts as flushed
  // (Kafka's roll defers that to its asynchronous flush as well, LocalLog's flushParentDir).
  bool dir_sync_pending = false;
  std::vector<std::filesystem::path>
      files_to_sync;  // written unsynced since the last flush (the roll listener's)
  std::shared_ptr<const segment_file> dir_sync_handed_out;  // the last directory sync flush_work() gave out
  // .txnindex entries of abort markers since the last flush, written by the file worker (or by whoever
  // needs the segment's files first): the next flush finishes each write, then syncs its file.
  struct txn_index_write {
    std::string path;
    std::shared_ptr<deferred_file_work> work;
  };
  std::vector<txn_index_write> txn_index_writes;

  // segment.jitter.ms: a random part subtracted from segment.ms for the active segment, so that partitions
  // created together do not all roll at the same moment (Kafka's rollJitterMs).
  // The generator is shared by the thread's logs: a std::mt19937_64 per log would cost 2.5 KiB of every idle
  // partition.
  int64_t rolling_jitter_ms = 0;

  struct pending_delete {
    int64_t due_ms = 0;
    std::unique_ptr<log_segment> segment;
  };
  std::vector<pending_delete> pending_deletes;
  bool closed = false;
  std::function<std::optional<std::filesystem::path>(int64_t)> roll_listener;

  // The file worker (log_open_options::worker) and the standby segment the next roll adopts: asked of the
  // worker once the active segment is past half of a size bound, so that a roll creates no file on the
  // shard. A roll that finds none ready creates its segment in place.
  std::shared_ptr<file_worker> worker;
  struct standby_slot {
    std::mutex mutex;  // held by the worker while it creates the segment
    bool ready = false;
    bool discarded = false;
    std::unique_ptr<log_segment> segment;
    status error;
  };
  std::shared_ptr<standby_slot> standby;  // asked for and not adopted or discarded yet
  int64_t standby_asked_ms = 0;
  int64_t last_append_ms = 0;
  int64_t standbys_adopted = 0;  // rolls that created no file on the shard (tests)

  // A log whose segment filled within this long after it was created asks for the next standby at once at
  // its roll: its appends may be large enough to take a segment from under half to full in one or two
  // requests, faster than the worker makes one.
  static constexpr int64_t busy_segment_ms = 10 * 60 * 1000;
  // A roll by age (segment.ms) due within this long (at most half of segment.ms) asks for the standby too:
  // at an append, and at a retention pass for a log idle since (ask_for_standby_if_roll_by_age_near), which
  // keeps it until its next append. A log that went idle after asking near a roll by size gives its standby
  // back at a retention pass once it had no append for longer than busy_segment_ms (discard_standby_if_idle).
  static constexpr int64_t time_roll_lead_ms = 60 * 1000;

  void ask_for_standby_if_near(bool busy = false, int64_t batch_max_timestamp = -1) {
    if (!worker || standby || offline() || closed) return;
    if (!busy && !active().past_half_of_size_bounds() && !roll_by_age_near(clock(), batch_max_timestamp))
      return;
    ask_for_standby();
  }

  // Whether the active segment's roll by age (segment.ms) is due within the lead: its next append rolls it.
  bool roll_by_age_near(int64_t now_ms, int64_t batch_max_timestamp = -1) const {
    const int64_t lead = std::min(time_roll_lead_ms, config.segment_ms / 2);
    return active().time_roll_within(lead, now_ms, rolling_jitter_ms, batch_max_timestamp);
  }

  // At a retention pass: a log whose roll by age is near asks for its standby then, however long ago it was
  // appended to, and keeps it until its next append rolls (discard_standby_if_idle spares it), so that a log
  // appended to rarely rolls by age without creating a file on the shard too. The roll itself stays at the
  // append, as Kafka's.
  void ask_for_standby_if_roll_by_age_near(int64_t now_ms) {
    if (!worker || standby || offline() || closed || !roll_by_age_near(now_ms)) return;
    ask_for_standby();
  }

  void ask_for_standby() {
    if (!worker->take_standby_place()) return;
    standby = std::make_shared<standby_slot>();
    standby_asked_ms = clock();
    worker->post([slot = standby, dir = dir, config = config, clock = clock] {
      std::lock_guard lock(slot->mutex);
      if (slot->discarded) return;
      auto created = log_segment::create_standby(dir, config, clock);
      // Not synced here: the roll that adopts it makes a directory sync due (dir_sync_pending), which the
      // flush runs before the recovery point passes the data; it makes the standby's name durable, or its
      // new name if the renames ran first (the next start finds the data under either, load()).
      if (created) {
        slot->segment = std::move(*created);
      } else {
        slot->error = created.error();
      }
      slot->ready = true;
    });
  }

  // The standby the worker made, as the segment at `base_offset` (its renames left to the worker), or
  // nullptr when none is ready.
  std::unique_ptr<log_segment> adopt_standby_at(int64_t base_offset) {
    auto next = take_standby();
    if (!next) return nullptr;
    next->update_config(config);
    auto renames = next->adopt_as(dir, base_offset);
    worker->post([renames] { renames->run(); });
    ++standbys_adopted;
    return next;
  }

  // The standby if the worker made it (never waits for it), else nullptr.
  std::unique_ptr<log_segment> take_standby() {
    if (!standby) return nullptr;
    std::unique_lock lock(standby->mutex, std::try_to_lock);
    if (!lock.owns_lock() || !standby->ready) return nullptr;
    auto segment = std::move(standby->segment);
    if (!standby->error.ok()) {
      subsystem_logger("storage")->warn(
          "{}: cannot prepare the next segment off the shard ({}); rolling in place", describe(tp),
          standby->error.message);
    }
    lock.unlock();
    standby.reset();
    worker->return_standby_place();
    return segment;
  }

  // A standby of a log with no append for longer than a busy segment lasts (one appended to just before its
  // roll by age, or past half of segment.bytes, then idle): its files go on the worker and its place is freed
  // for another log. Called by the periodic retention pass; the log asks again when appends resume.
  void discard_standby_if_idle() {
    const int64_t now = clock();
    if (!standby || now - standby_asked_ms <= busy_segment_ms || now - last_append_ms <= busy_segment_ms ||
        roll_by_age_near(now))
      return;
    worker->post([slot = standby, places = worker.get()] {
      {
        std::lock_guard lock(slot->mutex);
        slot->discarded = true;
        if (slot->segment) (void)slot->segment->delete_files();
        slot->segment.reset();
      }
      places->return_standby_place();
    });
    standby.reset();
  }

  // A standby nobody will adopt (the log closes or goes): its files go.
  void discard_standby() {
    if (!standby) return;
    {
      std::lock_guard lock(standby->mutex);  // a creation under way ends first
      standby->discarded = true;
      if (standby->segment) (void)standby->segment->delete_files();
      standby->segment.reset();
    }
    standby.reset();
    worker->return_standby_place();
  }
  // The I/O error that took the log offline (Kafka's LogDirFailureChannel); success while it serves. Sticky:
  // after a failed write or sync nobody knows what the files hold, so nothing is appended, read or flushed
  // again in this process, and the next start recovers the files (the dir gets no clean-shutdown marker).
  status failure;
  std::function<void(const status&)> failure_listener;

  status recover_standby();

  // Posts deferred work of a segment that left the log: a failure is only logged (nothing reads the files).
  void post_logging_failure(std::shared_ptr<deferred_file_work> work, const char* what) {
    worker->post([work = std::move(work), what, name = describe(tp)] {
      work->run();
      if (auto result = work->result_if_done(); result && !result->ok())
        subsystem_logger("storage")->error("{}: cannot {}: {}", name, what, result->message);
    });
  }

  log_segment& active() { return *segments.rbegin()->second; }
  const log_segment& active() const { return *segments.rbegin()->second; }

  void new_jitter() {
    int64_t bound = std::min(config.segment_jitter_ms, config.segment_ms);
    static thread_local std::mt19937_64 random{std::random_device{}()};
    rolling_jitter_ms = bound > 0 ? static_cast<int64_t>(random() % static_cast<uint64_t>(bound)) : 0;
  }

  segment_map::const_iterator floor_segment(int64_t offset) const {
    auto it = segments.upper_bound(offset);
    if (it == segments.begin()) return segments.end();
    return std::prev(it);
  }

  int64_t size_bytes() const {
    int64_t total = 0;
    for (const auto& [base, segment] : segments) total += segment->size();
    return total;
  }

  // Removes files a previous segment with this base offset left behind, then creates the new segment.
  result<std::unique_ptr<log_segment>> create_segment(int64_t base_offset) {
    for (auto suffix : {log_suffix, offset_index_suffix, time_index_suffix, txn_index_suffix}) {
      std::error_code ec;
      std::filesystem::remove(segment_file_path(dir, base_offset, suffix), ec);
    }
    auto segment = log_segment::open(dir, base_offset, config, true, clock);
    if (!segment)
      return storage_error(
          tp, "cannot create segment " + offset_file_stem(base_offset) + ": " + segment.error().message);
    return std::move(*segment);
  }

  // Kafka's roll(): the active segment stops taking appends (its indexes are trimmed) and a new one starts at
  // the log end offset. No fsync here (this runs on the partition's shard): the directory is synced by the
  // next flush, before the recovery point passes the new segment. With a file worker no file is created,
  // renamed or cut here either: the new segment is the standby the worker made, the worker renames it and
  // trims the old segment's indexes (both segments do that work themselves first if they need a file by
  // name before the worker got to it).
  status roll(int64_t base_offset) {
    auto& old = active();
    const bool busy = clock() - old.created_ms() < busy_segment_ms;
    auto rolled = roll_to(base_offset);
    if (rolled.ok() && busy) ask_for_standby_if_near(true);
    return rolled;
  }

  status roll_to(int64_t base_offset) {
    auto& old = active();
    if (worker) {
      status error;
      auto trim = old.on_roll_deferred(error);
      if (!error.ok()) return storage_error(tp, "cannot roll segment: " + error.message);
      worker->post([trim] { trim->run(); });
    } else if (auto st = old.on_roll(); !st.ok()) {
      return storage_error(tp, "cannot roll segment: " + st.message);
    }
    if (auto next = adopt_standby_at(base_offset)) {
      segments.emplace(base_offset, std::move(next));
      new_jitter();
      dir_sync_pending = true;
      subsystem_logger("storage")->debug("{}: rolled to the standby segment at offset {}", describe(tp),
                                         base_offset);
      return status::success();
    }
    auto segment = create_segment(base_offset);
    if (!segment) return segment.error();
    segments.emplace(base_offset, std::move(*segment));
    new_jitter();
    dir_sync_pending = true;
    subsystem_logger("storage")->debug("{}: rolled new segment at offset {}", describe(tp), base_offset);
    return status::success();
  }

  // Unlinks a segment from the log and renames its files to .deleted; the files go after file.delete.delay.ms
  // (readers holding a file_slice keep their descriptor meanwhile).
  // `later` (retention: the segments below the log start offset) leaves the renames to the file worker; a
  // crash before they ran leaves segments under the log start offset, which the next retention pass removes.
  // A truncation's segments (above the new log end) are renamed here: after a crash they must not come back.
  status schedule_delete(std::unique_ptr<log_segment> segment, int64_t now_ms, bool later = false) {
    if (later && worker) {
      post_logging_failure(segment->rename_for_deletion_later(), "rename segment files for deletion");
      pending_deletes.push_back({now_ms + config.file_delete_delay_ms, std::move(segment)});
      return status::success();
    }
    auto st = segment->rename_for_deletion();
    pending_deletes.push_back({now_ms + config.file_delete_delay_ms, std::move(segment)});
    if (!st.ok()) return storage_error(tp, "cannot rename segment for deletion: " + st.message);
    return status::success();
  }

  // Kafka's deletableSegments: oldest first while `predicate` holds, never the active segment, and never a
  // segment with offsets at or above the high watermark (the log start offset must not pass it).
  template <typename Pred>
  std::vector<int64_t> deletable(int64_t high_watermark, Pred predicate) {
    std::vector<int64_t> out;
    for (auto it = segments.begin(); it != segments.end(); ++it) {
      auto next = std::next(it);
      if (next == segments.end()) break;
      if (high_watermark < next->first || !predicate(*it->second, *next->second)) break;
      out.push_back(it->first);
    }
    return out;
  }

  result<int32_t> delete_segments(const std::vector<int64_t>& bases, int64_t now_ms, const char* reason) {
    if (bases.empty()) return 0;
    // The log start offset moves first so that no reader is sent into a segment about to go.
    auto next = segments.upper_bound(bases.back());
    if (next->first > log_start_offset) {
      log_start_offset = next->first;
      if (auto st = epochs.truncate_from_start(log_start_offset); !st.ok())
        return storage_error(tp, st.message);
    }
    status first_error;
    for (auto base : bases) {
      auto node = segments.extract(base);
      auto st = schedule_delete(std::move(node.mapped()), now_ms, /*later=*/true);
      if (!st.ok() && first_error.ok()) first_error = st;
    }
    subsystem_logger("storage")->info("{}: deleted {} segment(s) ({}), log start offset now {}", describe(tp),
                                      bases.size(), reason, log_start_offset);
    if (!first_error.ok()) return first_error;
    return static_cast<int32_t>(bases.size());
  }

  bool offline() const { return !failure.ok(); }

  // Takes the log offline for an I/O error (the first one wins) and tells the listener once. Returns the
  // KAFKA_STORAGE_ERROR every later call answers with.
  status fail(const status& error) {
    if (offline()) return failure;
    failure = storage_error(tp, "log is offline after an I/O error: " + error.message);
    subsystem_logger("storage")->error("{}", failure.message);
    const status answer = failure;
    // A copy: the listener may close this log (its dir goes offline) while it runs.
    if (auto listener = failure_listener) listener(answer);
    return answer;
  }
  // fail() for the I/O errors among `st` (those the storage library reports as KAFKA_STORAGE_ERROR).
  status fail_on_io_error(status st) {
    if (st.code == error_code::kafka_storage_error) return fail(st);
    return st;
  }

  // The failed background fsyncs handed out by flush_work() (segment_file::sync_error); only segments at or
  // after the recovery point can have had one since the last successful flush.
  std::optional<status> failed_sync() const {
    auto it = floor_segment(recovery_point);
    if (it == segments.end()) it = segments.begin();
    for (; it != segments.end(); ++it) {
      if (int err = it->second->sync_error(); err != 0)
        return detail::io_error("cannot fsync", it->second->file()->path(), err);
    }
    if (dir_sync_handed_out) {
      if (int err = dir_sync_handed_out->sync_error(); err != 0)
        return detail::io_error("cannot fsync directory", dir_sync_handed_out->path(), err);
    }
    return std::nullopt;
  }

  status flush_segments(file_sync sync = file_sync::now);
  // Takes the log offline when a sync handed out before failed; true then.
  bool fail_on_failed_sync();
  // The files to sync so that everything written is durable, handed out (see flush_work()).
  std::vector<std::shared_ptr<const segment_file>> hand_out_unflushed(int64_t now_ms);
  status truncate_to(int64_t offset);
  status truncate_fully_and_start_at(int64_t offset);
  status load(const log_open_options& options);
  // Rolls back or completes a clean that a crash interrupted (.cleaned / .swap files), removes .deleted ones;
  // `names` (the directory's files) is updated to what remains.
  status recover_interrupted_clean(std::vector<std::string>& names);
  // `parsed`: the header of leader_records' only batch, parsed by the caller; updated by the stamping.
  result<append_result> append(std::span<uint8_t> leader_records, std::span<const uint8_t> follower_records,
                               std::optional<int32_t> leader_epoch,
                               protocol::record_batch_header* parsed = nullptr);
};

}  // namespace mala::storage
