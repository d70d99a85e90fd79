// The cleaner's arithmetic: the dirty range of a log (checkpoint resets, the last stable offset, the active
// segment and min.compaction.lag.ms as bounds rounded down to a segment), the dirty ratio and
// max.compaction.lag.ms, and the grouping of segments into cleaned segments (bytes, index bytes, 32-bit
// relative offsets), after Kafka's LogCleanerManagerTest and LogCleanerTest.testSegmentGrouping*.
#include "mala/storage/cleaning_plan.h"

#include <gtest/gtest.h>

#include <limits>

namespace mala::storage {
namespace {

constexpr int64_t now = 1'700'000'000'000;

// Segments of 100 bytes at bases 0, 10, 20, ...; the last one is active. Largest timestamps: an hour ago,
// plus one second per segment.
std::vector<segment_summary> segments(int count) {
  std::vector<segment_summary> out;
  for (int i = 0; i < count; ++i) {
    segment_summary s;
    s.base_offset = 10 * i;
    s.size_bytes = 100;
    s.largest_timestamp = now - 3'600'000 + 1000 * i;
    s.first_batch_timestamp = now - 3'600'000 + 1000 * i - 500;
    out.push_back(s);
  }
  return out;
}

TEST(cleaning_plan, a_log_without_a_checkpoint_is_dirty_from_its_start_to_the_active_segment) {
  auto log = segments(5);  // active segment at 40
  auto r = plan_cleanable_range(log, 0, 45, std::nullopt, 45, now, {});
  EXPECT_EQ(r.first_dirty_offset, 0);
  EXPECT_EQ(r.first_uncleanable_offset, 40);
  EXPECT_FALSE(r.checkpoint_reset);
  EXPECT_EQ(r.clean_bytes, 0);
  EXPECT_EQ(r.cleanable_bytes, 400);
  EXPECT_DOUBLE_EQ(r.cleanable_ratio(), 1.0);
  EXPECT_TRUE(r.eligible({}));
}

TEST(cleaning_plan, the_checkpoint_splits_clean_from_dirty_bytes) {
  auto log = segments(5);
  auto r = plan_cleanable_range(log, 0, 45, 30, 45, now, {});
  EXPECT_EQ(r.first_dirty_offset, 30);
  EXPECT_EQ(r.clean_bytes, 300);
  EXPECT_EQ(r.cleanable_bytes, 100);
  EXPECT_DOUBLE_EQ(r.cleanable_ratio(), 0.25);
  EXPECT_FALSE(r.eligible({}));  // min.cleanable.dirty.ratio 0.5
  EXPECT_TRUE(r.eligible({.min_cleanable_ratio = 0.2}));
  // Mid-segment: the segment holding it counts on both sides, as in Kafka.
  auto mid = plan_cleanable_range(log, 0, 45, 25, 45, now, {});
  EXPECT_EQ(mid.clean_bytes, 300);
  EXPECT_EQ(mid.cleanable_bytes, 200);
}

TEST(cleaning_plan, a_checkpoint_out_of_the_log_is_reset_to_the_log_start) {
  auto log = segments(5);
  auto below = plan_cleanable_range(log, 20, 45, 5, 45, now, {});
  EXPECT_EQ(below.first_dirty_offset, 20);
  EXPECT_TRUE(below.checkpoint_reset);
  auto above = plan_cleanable_range(log, 0, 45, 46, 45, now, {});
  EXPECT_EQ(above.first_dirty_offset, 0);
  EXPECT_TRUE(above.checkpoint_reset);
  auto at_end = plan_cleanable_range(log, 0, 45, 45, 45, now, {});
  EXPECT_EQ(at_end.first_dirty_offset, 45);
  EXPECT_FALSE(at_end.checkpoint_reset);
  EXPECT_EQ(at_end.first_uncleanable_offset, 40);  // never the active segment
  EXPECT_EQ(at_end.cleanable_bytes, 0);
  EXPECT_EQ(at_end.clean_bytes, 500);
}

TEST(cleaning_plan, the_last_stable_offset_stops_cleaning_at_the_segment_holding_it) {
  auto log = segments(5);
  auto r = plan_cleanable_range(log, 0, 45, std::nullopt, 25, now, {});
  EXPECT_EQ(r.first_uncleanable_offset, 20);
  EXPECT_EQ(r.cleanable_bytes, 200);
  auto at_base = plan_cleanable_range(log, 0, 45, std::nullopt, 20, now, {});
  EXPECT_EQ(at_base.first_uncleanable_offset, 20);
}

TEST(cleaning_plan, min_compaction_lag_keeps_young_segments_dirty) {
  auto log = segments(5);  // largest timestamps: now - 1 h + 0, 1, 2, 3 s
  compaction_settings lag{.min_compaction_lag_ms = 3'600'000 - 1500};
  // Segments 0 and 10 are older than the lag; 20 is not.
  auto r = plan_cleanable_range(log, 0, 45, std::nullopt, 45, now, lag);
  EXPECT_EQ(r.first_uncleanable_offset, 20);
  compaction_settings long_lag{.min_compaction_lag_ms = 7'200'000};
  auto none = plan_cleanable_range(log, 0, 45, std::nullopt, 45, now, long_lag);
  EXPECT_EQ(none.first_uncleanable_offset, 0);
  EXPECT_EQ(none.cleanable_bytes, 0);
  EXPECT_FALSE(none.eligible({}));
}

TEST(cleaning_plan, max_compaction_lag_forces_a_clean_below_the_ratio) {
  auto log = segments(5);
  compaction_settings settings{.max_compaction_lag_ms =
                                   1'800'000};  // half an hour: the dirty segment is older
  auto r = plan_cleanable_range(log, 0, 45, 30, 45, now, settings);
  EXPECT_DOUBLE_EQ(r.cleanable_ratio(), 0.25);
  EXPECT_GT(r.max_compaction_delay_ms, 0);
  EXPECT_EQ(r.max_compaction_delay_ms, (now - 1'800'000) - (now - 3'600'000 + 3000 - 500));
  EXPECT_TRUE(r.eligible(settings));
  compaction_settings later{.max_compaction_lag_ms = 7'200'000};
  EXPECT_EQ(plan_cleanable_range(log, 0, 45, 30, 45, now, later).max_compaction_delay_ms, 0);
}

TEST(cleaning_plan, an_empty_log_or_only_an_active_segment_is_not_eligible) {
  auto one = segments(1);
  auto r = plan_cleanable_range(one, 0, 5, std::nullopt, 5, now, {});
  EXPECT_EQ(r.first_uncleanable_offset, 0);
  EXPECT_EQ(r.cleanable_bytes, 0);
  EXPECT_FALSE(r.eligible({}));
  EXPECT_FALSE(plan_cleanable_range({}, 0, 0, std::nullopt, 0, now, {}).eligible({}));
}

TEST(cleaning_plan, groups_respect_segment_and_index_bytes) {
  auto log = segments(6);
  for (auto& s : log) {
    s.offset_index_bytes = 8;
    s.time_index_bytes = 12;
  }
  auto by_bytes = group_segments(log, 250, 1 << 20, 60);
  ASSERT_EQ(by_bytes.size(), 3u);
  EXPECT_EQ(by_bytes[0].begin, 0u);
  EXPECT_EQ(by_bytes[0].end, 2u);
  EXPECT_EQ(by_bytes[2].end, 6u);
  auto by_index = group_segments(log, 1 << 20, 30, 60);  // three time index parts of 12 bytes exceed 30
  ASSERT_EQ(by_index.size(), 3u);
  auto all = group_segments(log, 1 << 20, 1 << 20, 60);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].end, 6u);
  // A segment larger than the limit still forms a group of its own.
  log[2].size_bytes = 1000;
  auto big = group_segments(log, 250, 1 << 20, 60);
  ASSERT_EQ(big.size(), 4u);
  EXPECT_EQ(big[1].begin, 2u);
  EXPECT_EQ(big[1].end, 3u);
}

TEST(cleaning_plan, groups_keep_offsets_within_32_bits_of_their_base) {
  constexpr int64_t max32 = std::numeric_limits<int32_t>::max();
  std::vector<segment_summary> log(4);
  log[0].base_offset = 0;
  log[1].base_offset = max32 - 10;
  log[2].base_offset = max32 + 1;  // its last offset is past 2^31 - 1 from base 0
  log[3].base_offset = max32 + 100;
  for (auto& s : log) s.size_bytes = 10;
  auto groups = group_segments(log, 1 << 20, 1 << 20, max32 + 200);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].end, 2u);  // segment 1 ends at max32: fits
  EXPECT_EQ(groups[1].begin, 2u);
  EXPECT_EQ(groups[1].end, 4u);
  // An empty segment never breaks a group on offsets.
  log[2].size_bytes = 0;
  auto with_empty = group_segments(log, 1 << 20, 1 << 20, max32 + 200);
  EXPECT_EQ(with_empty[0].end, 3u);
}

}  // namespace
}  // namespace mala::storage
