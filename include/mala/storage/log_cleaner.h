// One cleaning round of one log (Kafka's Cleaner.doClean), the part that runs off the partition's shard:
// 1. the owning shard takes a cleaning_snapshot (partition_log::snapshot_for_cleaning): the log's closed
//    segments below its first uncleanable offset, as shared file handles (readable from any thread while the
//    shard goes on appending, and valid even if the segments are deleted meanwhile);
// 2. clean_log() reads the dirty part into the key_offset_map (the latest offset of every key, up to the
//    map's capacity; batches of aborted transactions and markers add no key), then rewrites each group of
//    consecutive segments from the log start to the map's end into one new segment named <base>.log.cleaned
//    (compaction_filter.h decides batch by batch, told by
//    cleaned_transactions.h which batches are aborted and which markers may go), writes its .txnindex (the
//    aborts whose markers stay), fsyncs it and releases its descriptor;
// 3. the owning shard swaps the new segments in, one group per call (partition_log::replace_with_cleaned:
//    .cleaned -> .swap, the old ones -> .deleted, .swap -> final name) unless the log changed under a group
//    meanwhile (truncated, segments deleted by retention), in which case the caller deletes the new files
//    (discard_cleaned) and keeps the old checkpoint. With a file worker the shard only changes the log in
//    memory; the renames are left in cleaned_log::swap_renames for the cleaner thread (and the worker). A
//    crash at any point is rolled back or completed at the next load (cleaning_recovery.h).
//
// Threads: clean_log() on a cleaner thread; the snapshot and the swap on the owning shard; the discarding of
// refused groups, and with a file worker the swap's renames, on the cleaner thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mala/common/result.h"
#include "mala/storage/cleaning_plan.h"
#include "mala/storage/compaction_filter.h"
#include "mala/storage/key_offset_map.h"
#include "mala/storage/log_config.h"
#include "mala/storage/log_segment.h"
#include "mala/storage/segment_files.h"
#include "mala/storage/transaction_index.h"

namespace mala::storage {

// A closed segment as the cleaner reads it.
struct cleaning_segment {
  int64_t base_offset = 0;
  int64_t size_bytes = 0;  // the segment is closed: its size does not change unless it is truncated
  std::shared_ptr<const segment_file> file;  // null until prepare_snapshot_files() when it was closed
  std::string path;                          // the .log's name
};

// A producer whose last entry in the log is a transaction marker (no data batch of its current epoch since):
// its marker of that epoch is its last batch.
struct producer_marker_epoch {
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
};

// What partition_log::snapshot_for_cleaning hands a cleaner thread.
struct cleaning_snapshot {
  topic_partition tp;
  std::string dir;  // the partition's directory
  log_config config;
  int64_t log_start_offset = 0;
  cleanable_range range;
  // Every segment from the one holding the log start offset up to (not including) the first uncleanable
  // offset, ascending, with their summaries (same order) for the grouping.
  std::vector<cleaning_segment> segments;
  std::vector<segment_summary> summaries;
  // The last offset of every idempotent producer's last batch (its sequence and epoch live on in it), sorted.
  std::vector<int64_t> producer_last_offsets;
  // Producers whose last batch is a marker (the caller fills them in), sorted by producer id.
  std::vector<producer_marker_epoch> producers_ending_with_marker;
  // The aborted transactions (.txnindex entries of every segment) overlapping [log start, first uncleanable
  // offset), in marker order: the key map skips their batches, the rewrite removes them
  // (cleaned_transactions.h). Filled by prepare_snapshot_files().
  std::vector<aborted_txn> aborted_txns;
  // What the shard leaves to the cleaner thread (prepare_snapshot_files()): the file work still pending on
  // the segments (a roll's renames or index trims), and the .txnindex of every segment from the one holding
  // the log start on, in order, for Kafka's walk for aborted transactions (collectAbortedTxns).
  std::vector<std::shared_ptr<deferred_file_work>> pending_file_work;
  std::vector<txn_index_source> txn_indexes;
};

// The snapshot's file work, on the cleaner thread (clean_log() runs it first; once is enough): runs the
// segments' pending work, opens the .log of segments whose descriptor was closed, and reads the aborted
// transactions. KAFKA_STORAGE_ERROR when a file cannot be read or a .txnindex is not one (the round is
// skipped and retried after the backoff, as when the shard read them).
status prepare_snapshot_files(cleaning_snapshot& snapshot);

// One new segment and the old ones it replaces.
struct cleaned_group {
  std::unique_ptr<log_segment> segment;  // named *.cleaned, synced, descriptor released
  std::vector<int64_t> replaced_bases;   // ascending; the first one is the new segment's base offset
  std::vector<int64_t> replaced_sizes;   // as the snapshot saw them
};

struct cleaning_stats {
  int64_t bytes_read = 0;  // of the rewritten segments
  int64_t bytes_written = 0;
  int64_t map_bytes_read = 0;  // of the dirty part, building the map
  int64_t records_removed = 0;
  int64_t batches_removed = 0;
  size_t keys = 0;
};

struct cleaned_log {
  std::vector<cleaned_group> groups;
  // The renames of the groups swapped in, left by partition_log::replace_with_cleaned for the caller's
  // thread (a log with a file worker; the worker runs them too, whichever comes first).
  std::vector<std::shared_ptr<deferred_file_work>> swap_renames;
  // Where the next round's dirty part starts (the checkpoint): the offset after the last one the map covered.
  int64_t next_dirty_offset = 0;
  cleaning_stats stats;
};

// Throttle and stop signal for clean_log (log.cleaner.io.max.bytes.per.second, shutdown).
struct cleaning_controls {
  const std::atomic<bool>* stop = nullptr;  // set: give up (the .cleaned files written so far are deleted)
  // Called with the bytes read or written since the last call; may sleep to hold the I/O rate.
  std::function<void(int64_t bytes)> throttle;
  // How much of a segment one read takes (log.cleaner.io.buffer.size over the threads); a larger batch is
  // read whole.
  int64_t read_buffer_bytes = 1 << 20;
};

// Runs the off-shard part of one round (prepare_snapshot_files() first). CORRUPT_MESSAGE when a batch of the
// log is not valid (cleaning this log stops; the log still serves), KAFKA_STORAGE_ERROR on an I/O error (a
// full disk: the old segments stay), REQUEST_TIMED_OUT when stopped. On any error no .cleaned file is left
// behind.
result<cleaned_log> clean_log(cleaning_snapshot& snapshot, int64_t now_ms, key_offset_map& map,
                              filter_buffers& buffers, const cleaning_controls& controls = {});

// Deletes the .cleaned files of a round that will not be swapped in.
void discard_cleaned(cleaned_log& cleaned);

}  // namespace mala::storage
