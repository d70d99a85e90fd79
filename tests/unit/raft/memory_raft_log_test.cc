// memory_raft_log: the in-memory raft_log, in particular end_offset_for_epoch (Kafka's endOffsetForEpoch,
// which divergence detection relies on) across appends and truncations.
#include "mala/raft/log.h"

#include <gtest/gtest.h>

#include <vector>

namespace mala::raft {
namespace {

memory_raft_log log_with_epochs(const std::vector<int32_t>& epochs) {
  memory_raft_log log;
  for (int32_t epoch : epochs) {
    const log_entry e{log.end_offset(), epoch, entry_type::data, {static_cast<uint8_t>(log.end_offset())}};
    log.append(std::span<const log_entry>(&e, 1));
  }
  return log;
}

TEST(memory_raft_log, empty_log) {
  memory_raft_log log;
  EXPECT_EQ(log.start_offset(), 0);
  EXPECT_EQ(log.end_offset(), 0);
  EXPECT_EQ(log.last_fetched_epoch(), 0);
  EXPECT_EQ(log.end_offset_for_epoch(0), (offset_and_epoch{0, 0}));
  EXPECT_EQ(log.end_offset_for_epoch(7), (offset_and_epoch{0, 0}));
  EXPECT_TRUE(log.read(0, 10).empty());
}

TEST(memory_raft_log, end_offset_for_epoch_is_the_end_of_the_largest_epoch_not_above) {
  const memory_raft_log log = log_with_epochs({1, 1, 3, 3, 4});
  EXPECT_EQ(log.last_fetched_epoch(), 4);
  EXPECT_EQ(log.end_offset_for_epoch(0), (offset_and_epoch{0, 0}));
  EXPECT_EQ(log.end_offset_for_epoch(1), (offset_and_epoch{2, 1}));
  EXPECT_EQ(log.end_offset_for_epoch(2), (offset_and_epoch{2, 1}));  // no epoch 2: the end of epoch 1
  EXPECT_EQ(log.end_offset_for_epoch(3), (offset_and_epoch{4, 3}));
  EXPECT_EQ(log.end_offset_for_epoch(4), (offset_and_epoch{5, 4}));
  EXPECT_EQ(log.end_offset_for_epoch(9), (offset_and_epoch{5, 4}));
}

TEST(memory_raft_log, truncation_drops_entries_and_their_epochs) {
  memory_raft_log log = log_with_epochs({1, 1, 3, 3, 4});
  log.truncate_to(3);
  EXPECT_EQ(log.end_offset(), 3);
  EXPECT_EQ(log.last_fetched_epoch(), 3);
  EXPECT_EQ(log.end_offset_for_epoch(4), (offset_and_epoch{3, 3}));
  log.truncate_to(2);
  EXPECT_EQ(log.last_fetched_epoch(), 1);
  EXPECT_EQ(log.end_offset_for_epoch(3), (offset_and_epoch{2, 1}));
  log.truncate_to(5);  // past the end: nothing
  EXPECT_EQ(log.end_offset(), 2);
  const log_entry e{2, 5, entry_type::leader_change, {}};
  log.append(std::span<const log_entry>(&e, 1));
  EXPECT_EQ(log.end_offset_for_epoch(4), (offset_and_epoch{2, 1}));
  EXPECT_EQ(log.end_offset_for_epoch(5), (offset_and_epoch{3, 5}));
}

TEST(memory_raft_log, read_is_bounded) {
  const memory_raft_log log = log_with_epochs({1, 1, 2, 2, 2});
  const auto entries = log.read(1, 3);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries.front().offset, 1);
  EXPECT_EQ(entries.back().offset, 3);
  EXPECT_EQ(log.read(4, 100).size(), 1u);
  EXPECT_TRUE(log.read(5, 100).empty());
}

}  // namespace
}  // namespace mala::raft
