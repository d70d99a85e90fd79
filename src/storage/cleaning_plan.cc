#include "mala/storage/cleaning_plan.h"

#include <algorithm>
#include <limits>

namespace mala::storage {
namespace {

// The index of the segment holding `offset` (the last one whose base is <= offset); 0 when it is below them
// all.
size_t segment_holding(const std::vector<segment_summary>& segments, int64_t offset) {
  size_t i = 0;
  while (i + 1 < segments.size() && segments[i + 1].base_offset <= offset) ++i;
  return i;
}

}  // namespace

cleanable_range plan_cleanable_range(const std::vector<segment_summary>& segments, int64_t log_start_offset,
                                     int64_t log_end_offset, std::optional<int64_t> checkpoint,
                                     int64_t last_stable_offset, int64_t now_ms,
                                     const compaction_settings& settings) {
  cleanable_range range;
  if (segments.empty()) return range;
  const segment_summary& active = segments.back();

  // Where the dirty part starts (Kafka's cleanableOffsets): the checkpoint unless it fell out of the log.
  range.first_dirty_offset = log_start_offset;
  if (!checkpoint || *checkpoint < log_start_offset || *checkpoint > log_end_offset) {
    range.checkpoint_reset = checkpoint.has_value();
  } else {
    range.first_dirty_offset = *checkpoint;
  }

  // Where it must stop: the last stable offset, the active segment, and the first segment that may hold
  // records younger than min.compaction.lag.ms.
  int64_t uncleanable = std::min(last_stable_offset, active.base_offset);
  if (settings.min_compaction_lag_ms > 0) {
    for (size_t i = segment_holding(segments, range.first_dirty_offset); i + 1 < segments.size(); ++i) {
      if (segments[i].largest_timestamp > now_ms - settings.min_compaction_lag_ms) {
        uncleanable = std::min(uncleanable, segments[i].base_offset);
        break;
      }
    }
  }
  uncleanable = std::max(uncleanable, range.first_dirty_offset);
  // Rounded down to a segment base: the segment holding it is not cleaned.
  range.first_uncleanable_offset = uncleanable >= active.base_offset
                                       ? active.base_offset
                                       : segments[segment_holding(segments, uncleanable)].base_offset;

  // Clean bytes: segments starting below the first dirty offset; cleanable: from the segment holding the
  // first dirty offset to the uncleanable segment.
  const size_t dirty_from =
      segment_holding(segments, std::min(range.first_dirty_offset, range.first_uncleanable_offset));
  for (size_t i = 0; i < segments.size(); ++i) {
    const segment_summary& s = segments[i];
    if (s.base_offset < range.first_dirty_offset) range.clean_bytes += s.size_bytes;
    if (i >= dirty_from && s.base_offset < range.first_uncleanable_offset)
      range.cleanable_bytes += s.size_bytes;
  }

  // max.compaction.lag.ms: how long the oldest dirty record (by its segment's first batch) has waited past
  // it.
  if (settings.max_compaction_lag_ms < std::numeric_limits<int64_t>::max()) {
    int64_t earliest = std::numeric_limits<int64_t>::max();
    for (size_t i = segment_holding(segments, range.first_dirty_offset); i + 1 < segments.size(); ++i) {
      if (segments[i].first_batch_timestamp >= 0)
        earliest = std::min(earliest, segments[i].first_batch_timestamp);
    }
    const int64_t clean_until = now_ms - std::max<int64_t>(settings.max_compaction_lag_ms, 0);
    if (earliest < clean_until) range.max_compaction_delay_ms = clean_until - earliest;
  }
  return range;
}

std::vector<segment_group> group_segments(const std::vector<segment_summary>& segments,
                                          int64_t max_segment_bytes, int64_t max_index_bytes,
                                          int64_t first_uncleanable_offset) {
  std::vector<segment_group> groups;
  size_t i = 0;
  while (i < segments.size()) {
    segment_group g{i, i + 1};
    const int64_t base = segments[i].base_offset;
    int64_t log_bytes = segments[i].size_bytes;
    int64_t offset_index_bytes = segments[i].offset_index_bytes;
    int64_t time_index_bytes = segments[i].time_index_bytes;
    while (g.end < segments.size()) {
      const segment_summary& next = segments[g.end];
      // The last offset the next segment may hold: below the following segment, or below the round's end.
      const int64_t last_offset =
          (g.end + 1 < segments.size() ? segments[g.end + 1].base_offset : first_uncleanable_offset) - 1;
      const bool fits = log_bytes + next.size_bytes <= max_segment_bytes &&
                        offset_index_bytes + next.offset_index_bytes <= max_index_bytes &&
                        time_index_bytes + next.time_index_bytes <= max_index_bytes &&
                        (next.size_bytes == 0 || last_offset - base <= std::numeric_limits<int32_t>::max());
      if (!fits) break;
      log_bytes += next.size_bytes;
      offset_index_bytes += next.offset_index_bytes;
      time_index_bytes += next.time_index_bytes;
      ++g.end;
    }
    groups.push_back(g);
    i = g.end;
  }
  return groups;
}

}  // namespace mala::storage
