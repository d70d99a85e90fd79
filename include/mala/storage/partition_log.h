// The log of one partition replica: an ordered list of segments in <log dir>/<topic>-<partition>/, with the
// log start offset (first offset readers may see), the log end offset (next offset to assign), the recovery
// point (everything below it is known flushed), and the leader epoch cache. Appends assign offsets (leader)
// or keep them (follower); reads return file ranges of whole batches. Readers never consume anything: only
// retention, DeleteRecords and truncation remove data.
//
// Threads: every method runs on the partition's owning shard. The only cross-thread objects are the
// segment_file handles inside returned file_slices (read or fsynced elsewhere), the value returned by
// flush_work(), which the blocking pool runs, and what the cleaner gets from snapshot_for_cleaning() and
// replace_with_cleaned() (file handles and paths, deferred renames), which its thread runs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "mala/common/result.h"
#include "mala/common/uuid.h"
#include "mala/storage/file_worker.h"
#include "mala/storage/leader_epoch_cache.h"
#include "mala/storage/log_cleaner.h"
#include "mala/storage/log_config.h"
#include "mala/storage/log_segment.h"
#include "mala/storage/record_validation.h"
#include "mala/storage/segment_files.h"

namespace mala::storage {

struct log_open_options {
  int64_t recovery_point = 0;               // from recovery-point-offset-checkpoint
  std::optional<int64_t> log_start_offset;  // from log-start-offset-checkpoint
  bool clean_shutdown = false;        // the log dir had the clean shutdown marker: skip the recovery scan
  std::optional<uuid> topic_id;       // written to / checked against partition.metadata
  std::function<int64_t()> clock_ms;  // wall clock for segment.ms and LogAppendTime (tests inject one)
  // Where the log's file work off the shard runs (the log manager's): the standby segment a roll adopts, its
  // renames, a rolled segment's index trims. Without one, a roll creates and trims files in place.
  std::shared_ptr<file_worker> worker;
};

// What one append did.
struct append_result {
  int64_t first_offset = -1;
  int64_t last_offset = -1;
  int64_t max_timestamp = -1;
  int64_t offset_of_max_timestamp = -1;
  int64_t log_append_time = -1;  // the timestamp written when message.timestamp.type=LogAppendTime, else -1
  int32_t batches = 0;
  int64_t bytes = 0;
};

struct read_result {
  std::optional<file_slice> data;  // nullopt: nothing to return at this offset (at or past the bound)
  int64_t log_start_offset = 0;
  int64_t log_end_offset = 0;
};

// ListOffsets special timestamps.
inline constexpr int64_t latest_timestamp = -1;
inline constexpr int64_t earliest_timestamp = -2;
inline constexpr int64_t max_timestamp_query = -3;
inline constexpr int64_t earliest_local_timestamp = -4;

struct offset_for_timestamp {
  int64_t timestamp = -1;
  int64_t offset = -1;
  std::optional<int32_t> leader_epoch;
};

// What the recovery on open found and did, for the log line.
struct log_recovery_report {
  bool scanned = false;
  int32_t segments_scanned = 0;
  int64_t truncated_bytes = 0;
  int32_t indexes_rebuilt = 0;
};

class partition_log {
 public:
  // Opens (creating the directory if needed) and recovers the log. Never serves data past a bad batch: after
  // an unclean shutdown every segment from the recovery point on is rescanned, a torn or corrupt tail is cut,
  // missing or corrupt indexes are rebuilt.
  static result<std::unique_ptr<partition_log>> open(const std::filesystem::path& dir, topic_partition tp,
                                                     const log_config& config, log_open_options options);
  ~partition_log();

  const topic_partition& partition() const;
  std::filesystem::path dir() const;
  const log_config& config() const;
  // A topic or broker-default config change (Kafka's UnifiedLog.updateConfig), applied to the open log at
  // once: segment.bytes / segment.ms to the active segment's next roll decision, max.message.bytes, the
  // message.timestamp.* rules and the key check of cleanup.policy=compact to the next append, retention.* and
  // file.delete.delay.ms to the next apply_retention(), flush.* to the next flush_work(),
  // index.interval.bytes to the next index entries. segment.index.bytes sizes the indexes of segments created
  // from now on (Kafka's rule: the active segment's preallocated indexes keep their size until it rolls),
  // except the first update of a log whose active segment was loaded from disk: that one sizes the active
  // indexes too (a log loaded at start-up was opened with the broker defaults; Kafka opens it with the
  // topic's value).
  void update_config(const log_config& config);
  const log_recovery_report& recovery_report() const;
  // Called when an append rolls a new segment, with its base offset, after the roll and before the batches
  // that start it are written (Kafka's UnifiedLog.roll takes the producer-state snapshot there). One
  // listener; an empty function removes it. It runs inside the append, on the owning shard, and must not call
  // back into the log. It returns the file it wrote without syncing, if any: the log syncs it with the flush
  // the roll makes due (before the recovery point passes the roll).
  void set_roll_listener(std::function<std::optional<std::filesystem::path>(int64_t base_offset)> listener);

  // Disk failures (Kafka's LogDirFailureChannel). An I/O error while appending (a write, an index page, a
  // roll, the epoch checkpoint), flushing (an fsync, also a failed background one from flush_work()) or
  // truncating takes the log offline for good: a failed append first cuts back what it wrote (the log end
  // offset never moves), then every append, read, flush and truncation answers KAFKA_STORAGE_ERROR and no
  // file is touched again; close() only releases descriptors. The next start recovers the files (a torn tail
  // is cut). The listener (one; the log manager takes the whole dir offline) hears of the failure once, on
  // the owning shard, from inside the failing call; it may close this log. close(), apply_retention() and
  // increment_log_start_offset() return their errors without calling it (the log manager handles those
  // itself: it calls them while iterating its logs).
  void set_failure_listener(std::function<void(const status& error)> listener);
  // An I/O error on a file of this partition written by others (producer snapshots, the epoch cache written
  // through epochs()): takes the log offline as its own errors do. Returns the KAFKA_STORAGE_ERROR to answer.
  status handle_io_error(const status& error);
  // Takes the log offline without an error of its own (its dir failed through another file); no listener.
  void mark_offline(const std::string& reason);
  bool is_offline() const;
  const status& offline_error() const;  // success while online

  int64_t log_start_offset() const;
  int64_t log_end_offset() const;
  int64_t recovery_point() const;
  int64_t size_bytes() const;
  size_t segment_count() const;
  // The file worker given at open (null: file work runs in place).
  const std::shared_ptr<file_worker>& worker() const;
  // Rolls that adopted the standby segment the file worker made, creating no file on the shard.
  int64_t standby_rolls() const;
  leader_epoch_cache& epochs();

  // Leader append: `records` holds one or more v2 batches as a producer sent them (validated here: framing,
  // CRC, magic, size limits -> CORRUPT_MESSAGE / MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE / INVALID_RECORD;
  // record keys and timestamps -> INVALID_RECORD / INVALID_TIMESTAMP, see record_validation.h). Each batch
  // gets its base offset and partition leader epoch stamped in place (the CRC does not cover them); with
  // LogAppendTime the timestamps are rewritten and the CRC recomputed.
  result<append_result> append_as_leader(std::span<uint8_t> records, int32_t leader_epoch);
  // The same for a produced batch whose header was parsed on its way in (validate_produced_records): the
  // header is not parsed again, and the stamping updates it along with the bytes.
  result<append_result> append_as_leader(produced_batch& batch, int32_t leader_epoch);
  // Follower / replay append: offsets are already assigned and must start at log_end_offset().
  result<append_result> append_as_follower(std::span<const uint8_t> records);

  // Whole batches from the batch containing start_offset, up to max_bytes (at least one batch when
  // min_one_batch), none whose base offset is >= max_offset (the high watermark or last stable offset).
  // OFFSET_OUT_OF_RANGE when start_offset is below the log start offset or above the log end offset.
  result<read_result> read(int64_t start_offset, int32_t max_bytes, int64_t max_offset,
                           bool min_one_batch) const;

  // ListOffsets: earliest (-2), latest (-1), max timestamp (-3), earliest local (-4), or the first batch with
  // a timestamp >= the target. nullopt when no batch qualifies.
  std::optional<offset_for_timestamp> find_offset_by_timestamp(int64_t timestamp, int64_t max_offset) const;

  // Transactions: the aborted-transaction index of each segment (transaction_index.h). An entry goes to the
  // segment holding its ABORT marker (txn.last_offset), after the marker was appended; it is synced with the
  // next flush. An I/O error takes the log offline.
  status append_aborted_txn(const aborted_txn& txn);
  // Drops the entries whose marker is at or after `offset` in every segment: a producer-state replay from
  // `offset` (recovery, truncation) then appends them again.
  status truncate_aborted_txns(int64_t offset);
  // read_committed Fetch: the aborted transactions overlapping [fetch_offset, upper_bound), from the segment
  // holding fetch_offset on until complete (Kafka's collectAbortedTransactions).
  result<std::vector<aborted_txn>> collect_aborted_transactions(int64_t fetch_offset,
                                                                int64_t upper_bound) const;

  // Replication: drop everything at or after `offset` (segments, index entries, aborted-transaction entries,
  // epoch cache entries). A cut inside the active segment leaves its file work to the file worker: the log
  // ends at once for every reader, and the next append runs the cut first if the worker has not.
  status truncate_to(int64_t offset);
  // The file worker has not yet cut the files of the last truncation: an append now would cut them itself
  // (a follower's fetcher waits instead).
  bool truncation_pending() const;
  // Delete every segment and restart empty at `offset` (a follower far behind the leader's log start). The
  // new segment is the standby the file worker made if one is ready.
  status truncate_fully_and_start_at(int64_t offset);
  // Asks the file worker for a standby segment now, if the log has none (and a worker): for a caller that
  // knows a truncate_fully_and_start_at() is coming (a Raft follower storing a snapshot it fetched).
  void prepare_standby();
  // DeleteRecords / retention: raise the log start offset (never past the high watermark passed by the
  // caller).
  status increment_log_start_offset(int64_t offset, int64_t high_watermark);

  // Retention: deletes whole non-active segments by retention.ms (segment's largest timestamp),
  // retention.bytes and the log start offset; files are renamed to .deleted and removed after
  // file.delete.delay.ms by delete_expired_files(). Returns the number of segments removed.
  result<int32_t> apply_retention(int64_t now_ms, int64_t high_watermark);
  // Removes .deleted files whose delay has passed.
  void delete_expired_files(int64_t now_ms);

  // Log compaction (log_cleaner.h). The closed segments a cleaning round reads, with how dirty the log is
  // (cleaning_plan.h: `checkpoint` is the cleaner's offset for the log, `last_stable_offset` the high
  // watermark or the first offset of an open transaction, the topic's min.cleanable.dirty.ratio and
  // min/max.compaction.lag.ms apply). nullopt when the log is offline, not compacted, or has nothing to
  // clean. `producer_last_offsets` (sorted) is copied into the snapshot.
  std::optional<cleaning_snapshot> snapshot_for_cleaning(std::optional<int64_t> checkpoint,
                                                         int64_t last_stable_offset, int64_t now_ms,
                                                         std::vector<int64_t> producer_last_offsets);
  // Swaps the round's new segments in place of the ones they replace (Kafka's replaceSegments: the new files
  // go .cleaned -> .swap, the old ones -> .deleted and away after file.delete.delay.ms, then .swap -> final
  // name; readers holding slices of the old files keep reading them). With a file worker the log changes in
  // memory only and the renames are left in cleaned.swap_renames for the caller to run off the shard (the
  // worker runs them too; the segments run them first if they need their files by name); a failed one is
  // the caller's to report (mark_failed). When the log changed since the snapshot (a replaced segment is
  // gone or has another size: retention, truncation) nothing is swapped, the groups stay in `cleaned` for
  // the caller to delete (discard_cleaned), and the answer is UNKNOWN_SERVER_ERROR (the log serves on; the
  // next round starts over).
  // Without a file worker, an I/O error renaming takes the log offline (recovery completes or undoes the
  // swap at the next load).
  status replace_with_cleaned(cleaned_log& cleaned);

  // Flush policy (flush.messages / flush.ms): the segment files to fsync up to the log end offset now, or an
  // empty list. The caller runs the syncs off the shard and reports back with mark_flushed(); a sync that
  // failed is found by the next call, which takes the log offline (see set_failure_listener) and returns
  // nothing.
  std::vector<std::shared_ptr<const segment_file>> flush_work(int64_t now_ms);
  // Everything written and not yet durable, whatever flush.* says (the metadata log makes each Raft step
  // durable before the messages that depend on it leave): the files to sync off the shard (the directory
  // too after a roll) and the log end offset to pass to mark_flushed() once they are. The log's failure
  // when it is offline, or when a sync handed out before failed (it goes offline then).
  struct sync_work {
    std::vector<std::shared_ptr<const segment_file>> files;
    int64_t end_offset = 0;
  };
  result<sync_work> sync_all_work(int64_t now_ms);
  void mark_flushed(int64_t offset);
  // A value no other log of the process has, replaced by every truncation: a flush handed out before it may
  // have synced bytes a truncation cut and missed the ones written since at the same offsets.
  uint64_t flush_token() const;
  // mark_flushed() unless the token changed since the work was handed out (nor the log: tokens are unique).
  void mark_flushed_if_current(int64_t offset, uint64_t token);
  // File work done off the shard failed: the log goes offline. A sync of the work handed out (the data it
  // covered may never be durable; also found by the next flush_work() through the file's error, unless its
  // descriptor was closed since), or a cleaner swap's renames.
  void mark_failed(const status& error);
  // Synchronous flush of everything (tests, clean shutdown).
  status flush();
  // Clean close: flushes, trims indexes. A flush that fails leaves the log offline (no listener) and the
  // indexes untrimmed; an offline log is closed without touching its files. With file_sync::later nothing
  // is fsynced and the recovery point moves to the log end offset: the caller syncs the file system
  // (detail::sync_file_system) before it checkpoints that recovery point.
  status close(file_sync sync = file_sync::now);
  // Closes the .log descriptors this thread holds open for the log's segments (log_segment::
  // release_descriptor): before the log is handed to another thread, and by a thread that opened the log for
  // another (the next use opens them again, in the using thread's list of open files).
  void release_descriptors();
  // Deletes the whole partition directory (topic deletion).
  status delete_all();

 private:
  partition_log() = default;
  struct impl;
  std::unique_ptr<impl> _impl;
};

}  // namespace mala::storage
