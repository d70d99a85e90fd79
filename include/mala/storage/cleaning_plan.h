// The arithmetic of log compaction, on summaries of a log's segments (Kafka's
// LogCleanerManager.cleanableOffsets, LogToClean and Cleaner.groupSegmentsBySize):
// - where a log's dirty part starts (the cleaner's checkpoint, or the log start when the checkpoint is
// missing,
//   below the log start or past the log end) and where cleaning must stop: the segment holding the earliest
//   of the last stable offset, the active segment's base and the first segment younger than
//   min.compaction.lag.ms (the active segment is never cleaned);
// - how dirty the log is (cleanable bytes over clean + cleanable bytes, compared with
// min.cleanable.dirty.ratio)
//   and whether max.compaction.lag.ms forces a clean below that ratio;
// - which consecutive segments are rewritten into one: at most segment.bytes of log and segment.index.bytes
// of
//   each index, and offsets that fit the 32-bit relative offsets of one segment's index.
//
// Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace mala::storage {

// One segment as the cleaner plans with it (ascending base offsets; the last one of a log is the active one).
struct segment_summary {
  int64_t base_offset = 0;
  int64_t size_bytes = 0;
  int64_t offset_index_bytes = 0;  // bytes of index entries in use
  int64_t time_index_bytes = 0;
  int64_t largest_timestamp = -1;      // largest batch timestamp (Kafka falls back to the file's mtime)
  int64_t first_batch_timestamp = -1;  // maxTimestamp of the first batch, -1 if unknown
};

struct compaction_settings {
  double min_cleanable_ratio = 0.5;           // min.cleanable.dirty.ratio
  int64_t min_compaction_lag_ms = 0;          // min.compaction.lag.ms
  int64_t max_compaction_lag_ms = INT64_MAX;  // max.compaction.lag.ms
};

// Kafka's LogToClean for one log.
struct cleanable_range {
  int64_t first_dirty_offset = 0;        // where this round's key map starts
  int64_t first_uncleanable_offset = 0;  // a segment base: nothing at or after it is cleaned
  bool checkpoint_reset = false;         // the checkpoint was missing or out of the log: rewrite it
  int64_t clean_bytes = 0;
  int64_t cleanable_bytes = 0;
  int64_t max_compaction_delay_ms = 0;  // > 0: max.compaction.lag.ms has passed for some dirty record
  double cleanable_ratio() const {
    const int64_t total = clean_bytes + cleanable_bytes;
    return total == 0 ? 0.0 : static_cast<double>(cleanable_bytes) / static_cast<double>(total);
  }
  // The cleaner picks this log (the dirtiest eligible one goes first).
  bool eligible(const compaction_settings& settings) const {
    if (clean_bytes + cleanable_bytes == 0) return false;
    return (max_compaction_delay_ms > 0 && cleanable_bytes > 0) ||
           cleanable_ratio() > settings.min_cleanable_ratio;
  }
};

// `segments`: every segment of the log, the active one last (non-empty). `checkpoint`: the cleaner's offset
// for the log, if any. `last_stable_offset`: the high watermark, or the first offset of an open transaction.
cleanable_range plan_cleanable_range(const std::vector<segment_summary>& segments, int64_t log_start_offset,
                                     int64_t log_end_offset, std::optional<int64_t> checkpoint,
                                     int64_t last_stable_offset, int64_t now_ms,
                                     const compaction_settings& settings);

// Splits `segments` (the ones a round rewrites, ascending) into runs of consecutive segments that are cleaned
// into one new segment each: [begin, end) index pairs covering them all in order.
struct segment_group {
  size_t begin = 0;
  size_t end = 0;
};
std::vector<segment_group> group_segments(const std::vector<segment_summary>& segments,
                                          int64_t max_segment_bytes, int64_t max_index_bytes,
                                          int64_t first_uncleanable_offset);

}  // namespace mala::storage
