// One segment of a partition log: <base>.log (record batches back to back, exactly as on the wire) with its
// offset and time indexes and its aborted-transaction index <base>.txnindex. Appends go to the end; reads
// return byte ranges of whole batches that the fetch path can sendfile. Touched only by the partition's
// owning shard, except segment_file handles, which may be read (pread/sendfile) or fsynced from other threads
// while the segment lives.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "mala/common/result.h"
#include "mala/storage/checkpoint_file.h"
#include "mala/storage/log_config.h"
#include "mala/storage/offset_index.h"
#include "mala/storage/time_index.h"
#include "mala/storage/transaction_index.h"

namespace mala::storage {

// An open .log file. Shared so that an in-flight read or fsync keeps the descriptor valid after the segment
// is deleted or closed.
class segment_file {
 public:
  ~segment_file();
  int fd() const { return _fd; }
  const std::string& path() const { return _path; }
  // Reads exactly n bytes at position (fewer only at end of file).
  result<std::vector<uint8_t>> read(int64_t position, int32_t n) const;
  // A file or directory named by its path, to be synced only: its sync() opens and fsyncs it (a file gone
  // by then needs none). A log's directory so (a rolled segment's name is durable once it ran), or a file
  // written without syncing (the producer snapshot of a roll). Holds no descriptor.
  static std::shared_ptr<const segment_file> by_path(std::filesystem::path path);
  // A file written by its sync(): `write` writes and fsyncs it (the leader-epoch checkpoint a flush carries
  // off the shard). Holds no descriptor.
  static std::shared_ptr<const segment_file> by_writer(std::filesystem::path path,
                                                       std::function<status()> write);
  // A segment's .log opened for reading by the calling thread (the cleaner's, for a segment whose descriptor
  // was closed), in no thread's list of open files.
  static result<std::shared_ptr<const segment_file>> open_for_reading(const std::string& path);
  // fdatasync (fsync of a directory). Any thread (the flush policy runs it on the blocking pool).
  status sync() const;
  // errno of the first sync() that failed, 0 if none did. Any thread: the partition's shard reads it to take
  // the log offline after a failed background flush.
  int sync_error() const { return _sync_error.load(std::memory_order_relaxed); }

 private:
  friend class log_segment;
  segment_file(int fd, std::string path) : _fd(fd), _path(std::move(path)) {}
  int _fd = -1;                    // -1 for a directory()
  std::function<status()> _write;  // by_writer()'s
  std::string _path;  // a string, not a std::filesystem::path (which keeps every component apart)
  mutable std::atomic<int> _sync_error{0};
};

// A byte range of whole batches in one segment file.
struct file_slice {
  std::shared_ptr<const segment_file> file;
  int64_t position = 0;
  int32_t size = 0;
};

// What a batch appended to a segment contributes to its indexes.
struct appended_batch {
  int64_t base_offset = 0;
  int64_t last_offset = 0;
  int64_t max_timestamp = -1;
  int64_t offset_of_max_timestamp = 0;
};

// Result of a recovery scan.
struct segment_recovery {
  int64_t valid_bytes = 0;      // the .log was cut to this size
  int64_t truncated_bytes = 0;  // how much was cut (torn or corrupt tail)
  int64_t next_offset = 0;      // last offset of the last valid batch + 1 (base offset if empty)
  int32_t valid_batches = 0;
  // (leader epoch, base offset) of each valid batch whose epoch is above every earlier batch's here: what the
  // leader epoch cache must hold for this segment (Kafka's LogSegment.recover assigns them).
  std::vector<epoch_entry> epoch_starts;
};

// File work a segment leaves to a background thread (file_worker.h) instead of doing it on the shard that
// owns it: the renames of a standby segment to its base offset, a rolled segment's index trims, the renames
// of a cleaner's swap. run() does what is left, once, on the first thread that calls it: the background
// thread, or the segment itself when it needs its files by name before that thread got there (it settles its
// deferred work first). A swap's work (swap_in_later) runs the work that was pending on its segments when it
// was made first; the other kinds rely on the worker's order (first posted, first run). A failure is kept for
// the segment's owner, which takes the log offline. Work is also an aborted transaction's .txnindex entry
// (append_aborted_txn_later), which runs the work pending on its segment first.
class deferred_file_work {
 public:
  void run();
  // run(), then its result (waiting for a thread that is running it).
  status finish();
  // The result once run() finished, without waiting; nullopt while it has not run or is running.
  std::optional<status> result_if_done();

 private:
  friend class log_segment;
  struct rename_step {
    std::string from;
    std::string to;
    bool may_be_missing = false;  // a .txnindex Kafka never wrote
  };
  struct trim_step {  // an index trimmed at a roll, or a .log or .txnindex cut by a truncation
    std::string path;
    int64_t length = 0;
    bool truncation = false;  // a live file's cut: it must exist, after the work before it succeeded
  };
  void run_locked();
  std::mutex _mutex;
  std::vector<std::shared_ptr<deferred_file_work>> _before;  // run first (older work on the same files)
  bool _done = false;
  status _result;
  std::vector<rename_step> _renames;
  std::vector<trim_step> _trims;
  std::vector<std::string> _unlinks;                        // a missing file is no error
  std::vector<transaction_index::entry_write> _txn_writes;  // run before the renames
};

// The name a standby segment's files have until its roll names them after their base offset:
// 00000000000000000000.log.standby and its indexes. Kafka's log loader ignores files so named.
inline constexpr std::string_view standby_suffix = ".standby";

class log_segment {
 public:
  // Opens an existing segment (its .log must exist) or, with create = true, makes empty ones (replacing files
  // of the same name, as Kafka's roll does). New indexes are preallocated to segment.index.bytes; an existing
  // segment's indexes keep their length (call offsets()/times().resize() when it becomes the active segment).
  // A missing index file is created empty and reported by index_files_created(). clock_ms (wall clock; tests
  // inject one) defaults to the system clock.
  // name_suffix is appended to every file name (".cleaned": the log cleaner's output, cleaning_recovery.h).
  static result<std::unique_ptr<log_segment>> open(const std::filesystem::path& dir, int64_t base_offset,
                                                   const log_config& config, bool create,
                                                   std::function<int64_t()> clock_ms = {},
                                                   std::string_view name_suffix = {});
  // Creates an empty standby segment in `dir` (standby_suffix), off the shard: its files, its indexes
  // preallocated with their first blocks reserved, its .log descriptor open and in no thread's list of open
  // files, so that the shard that adopts it at a roll touches no file before appends write to it.
  static result<std::unique_ptr<log_segment>> create_standby(const std::filesystem::path& dir,
                                                             const log_config& config,
                                                             std::function<int64_t()> clock_ms = {});
  // The standby becomes the segment at base_offset (it must be empty): its offsets count from there and its
  // names are the final ones at once; the renames are returned to be run off the shard (until then the
  // segment runs them itself before any use of a file by name).
  std::shared_ptr<deferred_file_work> adopt_as(const std::filesystem::path& dir, int64_t base_offset);
  // on_roll() with the index files cut later: the final time index entry is added and the indexes take
  // their entries' length now; the returned work cuts the files (nullptr if the entry could not be added:
  // the error is returned through `error`).
  std::shared_ptr<deferred_file_work> on_roll_deferred(status& error);
  // rename_for_deletion() and delete_files() with the renames and unlinks returned to be run off the shard:
  // for a segment already out of its log (retention). The descriptor and mappings stay valid meanwhile.
  std::shared_ptr<deferred_file_work> rename_for_deletion_later();
  std::shared_ptr<deferred_file_work> delete_files_later();
  // The log cleaner's swap (Kafka's replaceSegments) with the renames returned to be run off the shard: this
  // segment (the cleaner's output, named *.cleaned) takes its final names and the replaced segments (already
  // out of their log) their .deleted names at once. The work renames the files in Kafka's order, this
  // segment's to .swap, the replaced ones' to .deleted, this segment's to the final names, so that a crash
  // at any point leaves what the load's cleaning recovery completes or rolls back (cleaning_recovery.h).
  std::shared_ptr<deferred_file_work> swap_in_later(std::span<log_segment* const> replaced);
  // An aborted transaction's entry, in the index's memory at once (read_committed fetches and the cleaner
  // see it) and written to the .txnindex by the returned work, off the shard; nullptr when there is nothing
  // to write (already indexed) or on error (returned through `error`). The work runs the work pending on
  // this segment first, so its path is the segment's current one.
  std::shared_ptr<deferred_file_work> append_aborted_txn_later(const aborted_txn& txn, status& error);
  // The index's collect() (transaction_index.h), without settling deferred work: the entries are in memory.
  result<bool> collect_aborted_txns(int64_t fetch_offset, int64_t upper_bound, std::vector<aborted_txn>& out);
  // The first error of deferred work that finished, dropping what finished; never waits.
  status collect_deferred();
  // Releases the descriptor and mappings without trimming (close() trims).
  ~log_segment();

  int64_t base_offset() const;
  int64_t size() const;  // bytes in .log
  // Offset after the last batch (base_offset() when empty); derived from the last batch on open.
  int64_t next_offset() const;
  int64_t max_timestamp() const;            // largest batch max timestamp, -1 if none
  int64_t offset_of_max_timestamp() const;  // its offset
  int64_t created_ms() const;               // for segment.ms rolling: first append time (or file time)
  // Max timestamp of the first batch (Kafka's rollingBasedTimestamp), -1 when empty or without timestamps.
  int64_t first_batch_timestamp() const;
  // open() found an index file missing and created it empty: run recover() to rebuild it (Kafka's LogLoader
  // does).
  bool index_files_created() const;
  std::shared_ptr<const segment_file> file() const;
  // The error of a failed background fsync of the .log (0 if none), without opening a closed descriptor.
  int sync_error() const;
  offset_index& offsets();
  time_index& times();
  // <base>.txnindex: the transactions aborted by markers in this segment. truncate_to() and recover() drop
  // the entries of markers they cut; flush() syncs it; it is renamed and deleted with the segment.
  transaction_index& txns();
  // For a reader on another thread (the cleaner's snapshot), with no file work on the caller's: the .log
  // handle if its descriptor is open (else nullptr: the reader opens log_path()), the .txnindex as a
  // source, and the deferred work the reader runs before it uses the files by name.
  std::shared_ptr<const segment_file> file_if_open() const;
  const std::string& log_path() const;
  txn_index_source txn_source() const;
  const std::string& txn_index_path() const;
  std::vector<std::shared_ptr<deferred_file_work>> pending_file_work() const;
  int32_t offset_index_entries() const;
  int32_t time_index_entries() const;
  // A topic config change reaching an open segment (the owning partition_log passes its new config to every
  // segment). segment.bytes and segment.ms bound the next should_roll(); index.interval.bytes spaces the
  // index entries of the next appends (and of recover()); segment.index.bytes sizes the indexes the next time
  // they are resized (the segment becomes active again after a truncation): preallocated indexes keep their
  // size until the segment rolls, as Kafka's do (a new size takes effect with the next segment).
  void update_config(const log_config& config);

  // Appends one batch whose offsets and CRC are already final. Adds index entries every index.interval.bytes:
  // (batch last offset, batch position) and (max timestamp so far, info.offset_of_max_timestamp) once more
  // than index.interval.bytes were appended since the last entry (Kafka's LogSegment.append). Pass the
  // batch's last offset as offset_of_max_timestamp (Kafka's "shallow" offset) so that recover() rebuilds the
  // same entries. Fails before writing when offsets do not increase or do not fit the 32-bit relative range;
  // a full index only skips the entry (should_roll() said to roll).
  status append(std::span<const uint8_t> batch, const appended_batch& info);

  // Whole batches starting at the batch that contains `start_offset` (the batch's base offset may be lower)
  // up to max_bytes (at least one whole batch when min_one_batch), stopping before any batch whose base
  // offset is >= max_offset or whose position is >= max_position. nullopt when start_offset is past the
  // segment's data; a slice of size 0 (at the batch's position) when the first batch does not fit or is
  // beyond a bound.
  std::optional<file_slice> read(int64_t start_offset, int32_t max_bytes, int64_t max_offset,
                                 int64_t max_position, bool min_one_batch) const;
  // Position of the first batch whose last offset >= offset, with that batch's base offset; nullopt if none.
  std::optional<offset_position> find_batch(int64_t offset) const;
  // First batch whose max timestamp >= timestamp: (offset of that batch's base, its max timestamp).
  std::optional<timestamp_offset> find_offset_by_timestamp(int64_t timestamp) const;

  // Both indexes' sanity checks (Kafka's) plus what only the segment knows: the last offset-index entry
  // points inside the .log at an offset below next_offset(), and the last time-index entry's offset is below
  // next_offset(). An index failing this is rebuilt by recover(); appends after it would otherwise fail
  // forever.
  status check_indexes() const;
  // Drops every batch at or after `offset` (the batch containing it included); returns the bytes removed.
  result<int64_t> truncate_to(int64_t offset);
  // truncate_to() of the active segment with its file work left to the file worker (the returned job, to
  // post there): the batches go now for every reader, the .log and .txnindex are cut by the job. The next
  // append runs the job first if the worker has not (a byte written at the cut must not be cut after).
  // Null when there is nothing to cut, or when the cut needs the files by name now (indexes to regrow, a
  // .txnindex not read yet with renames pending): truncate_to() then does it.
  result<std::shared_ptr<deferred_file_work>> truncate_to_later(int64_t offset);
  // A cut of truncate_to_later() the worker has not finished.
  bool cut_pending() const;
  // Rescans the .log from the start: validates framing and CRC batch by batch, cuts at the first invalid
  // batch, and rebuilds both indexes. A batch is invalid when it is cut short, fails validate_batch() (CRC
  // included), or its offsets go backwards or leave the segment's 32-bit relative range (the base offset is
  // not CRC-covered). Indexes are left preallocated (ready for appends) with the final time index entry
  // added, as Kafka's recover().
  result<segment_recovery> recover();
  // Called when the segment stops being the active one: final time index entry, indexes trimmed to their
  // entries.
  status on_roll();
  // Whether appending `batch_bytes` at `now_ms` should first roll to a new segment (segment.bytes, segment.ms
  // with jitter, a full index, or a relative offset that would not fit in 32 bits). segment.ms counts from
  // the first batch's max timestamp to batch_max_timestamp (Kafka compares message timestamps, so replicated
  // or mirrored old data does not roll on every batch); without either timestamp it counts from now_ms back
  // to created_ms(), and with only the first it uses now_ms.
  bool should_roll(int32_t batch_bytes, int64_t now_ms, int64_t next_batch_last_offset,
                   int64_t rolling_jitter_ms, int64_t batch_max_timestamp = -1) const;
  // Whether the segment is past half of a roll bound of size (segment.bytes, either index, the relative
  // offset range): when its log prepares the standby segment it will roll to. For segment.ms see
  // time_roll_within(): only a log appended to shortly before its roll by age asks then.
  bool past_half_of_size_bounds() const;
  // The jobs that reserve disk blocks for the next index slots ahead of the appends (index_file::
  // reservation_ahead), for the file worker to run: an active segment's appends then open no index file.
  std::vector<std::function<void()>> index_reservations_ahead();
  // Whether should_roll() would roll this segment for its age (segment.ms) within lead_ms: a log appended to
  // often prepares its standby for a time roll too.
  bool time_roll_within(int64_t lead_ms, int64_t now_ms, int64_t rolling_jitter_ms,
                        int64_t batch_max_timestamp = -1) const;
  status flush();
  // Renames every file to <name>.deleted (asynchronous deletion); the handles stay valid (file() then returns
  // a new handle with the new path; earlier handles keep theirs).
  status rename_for_deletion();
  // Renames every file from <name><from> to <name><to> (the cleaner's .cleaned -> .swap -> no suffix), with
  // the handles as rename_for_deletion().
  status change_suffix(std::string_view from, std::string_view to);
  // Closes the .log descriptor this thread opened (the next use opens it again, on the thread that uses the
  // segment then): a segment written on one thread and handed to another (the cleaner's output) leaves no
  // entry in the first thread's list of open files.
  status release_descriptor();
  // Unlinks the files under their current names; file_slices already handed out keep reading.
  status delete_files();
  // Adds the final time index entry and trims indexes, like Kafka's close; leaves files in place. The segment
  // is not used afterwards.
  status close();

 private:
  log_segment() = default;
  struct impl;
  // Adds the renames of this segment's four files to `work` (to(path, kind suffix) names each file's
  // target) and takes the new names at once. A .txnindex Kafka never wrote may be missing, as may every
  // file when all_may_be_missing (a segment whose directory may be gone).
  void rename_later(deferred_file_work& work,
                    const std::function<std::string(const std::string&, std::string_view)>& to,
                    bool all_may_be_missing);
  std::unique_ptr<impl> _impl;
};

}  // namespace mala::storage
