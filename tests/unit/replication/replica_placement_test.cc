#include "mala/replication/replica_placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace mala::replication {
namespace {

size_t spread(const std::vector<size_t>& counts) {
  const auto [low, high] = std::minmax_element(counts.begin(), counts.end());
  return *high - *low;
}

TEST(replica_placement, one_shard_owns_everything) {
  replica_placement placement;
  EXPECT_EQ(placement.shard_count(), 1u);
  EXPECT_EQ(placement.place({"orders", 3}), 0u);
  EXPECT_EQ(placement.shard_of("orders", 3), 0u);
  EXPECT_EQ(placement.shard_of("anything", 7), 0u);
}

TEST(replica_placement, internal_topics_stay_on_the_home_shard_and_are_not_counted) {
  replica_placement placement(4);
  for (int32_t p = 0; p < 50; ++p) EXPECT_EQ(placement.place({"__consumer_offsets", p}), 0u);
  EXPECT_EQ(placement.shard_of("__transaction_state", 3), 0u);
  EXPECT_EQ(placement.placed_per_shard(), (std::vector<size_t>{0, 0, 0, 0}));
}

// What a node hosts is balanced by count whatever the topics look like: 300 single-partition topics (whose
// hashes would put them unevenly), and the even partitions of a topic (a node holding every other replica
// of a two-node cluster), which a modulo of the partition number puts all on one of two shards.
TEST(replica_placement, what_a_node_hosts_is_balanced_by_count) {
  replica_placement placement(3);
  for (int i = 0; i < 300; ++i) placement.place({"topic-" + std::to_string(i), 0});
  EXPECT_EQ(placement.placed_per_shard(), (std::vector<size_t>{100, 100, 100}));

  replica_placement two(2);
  std::vector<size_t> shards_used(2);
  for (int32_t p = 0; p < 40; p += 2) ++shards_used[two.place({"orders", p})];
  EXPECT_EQ(shards_used, (std::vector<size_t>{10, 10}));
  for (int32_t p = 0; p < 40; p += 2) EXPECT_EQ(two.shard_of("orders", p), two.place({"orders", p}));
  EXPECT_EQ(two.placed_per_shard(), (std::vector<size_t>{10, 10}));  // placing again changes nothing
}

TEST(replica_placement, a_partition_keeps_its_shard_until_released) {
  replica_placement placement(4);
  for (int i = 0; i < 7; ++i) placement.place({"other", i});  // shards 0, 1, 2, 3, 0, 1, 2
  const size_t first = placement.place({"orders", 0});
  EXPECT_EQ(first, 3u);  // the one with the fewest
  for (int i = 7; i < 11; ++i) placement.place({"other", i});
  EXPECT_EQ(placement.shard_of("orders", 0), first);
  EXPECT_EQ(placement.place({"orders", 0}), first);
  EXPECT_EQ(placement.placed_per_shard(), (std::vector<size_t>{3, 3, 3, 3}));

  // Released: the count is given back, but lookups still lead to its shard (tasks in flight for it go
  // there). A partition never placed gets the hash fallback, the same on every call and every copy.
  placement.release({"orders", 0});
  placement.release({"other", 0});
  EXPECT_EQ(placement.placed_per_shard(), (std::vector<size_t>{2, 3, 3, 2}));
  const replica_placement copy = placement;
  EXPECT_EQ(copy.shard_of("orders", 0), first);
  EXPECT_EQ(copy.shard_of("other", 0), 0u);
  EXPECT_EQ(copy.shard_of("unknown", 5), placement.shard_of("unknown", 5));
  EXPECT_LT(copy.shard_of("unknown", 5), 4u);
  placement.release({"never-placed", 0});  // nothing to give back
  EXPECT_EQ(placement.placed_per_shard(), (std::vector<size_t>{2, 3, 3, 2}));

  // Placed again (a topic re-created under its name): back on its shard; a new partition goes to the
  // fewest.
  EXPECT_EQ(placement.place({"orders", 0}), first);
  EXPECT_EQ(placement.place({"new", 0}), 0u);
  EXPECT_EQ(placement.placed_per_shard(), (std::vector<size_t>{3, 3, 3, 3}));
}

// Topics created and deleted over and over: the table is replaced as released keys fill it, and every
// partition still placed keeps its shard.
TEST(replica_placement, churn_keeps_every_placed_partition_where_it_is) {
  replica_placement placement(4);
  std::vector<size_t> kept;
  for (int32_t p = 0; p < 100; ++p) kept.push_back(placement.place({"kept", p}));
  for (int round = 0; round < 50; ++round) {
    const std::string topic = "churn-" + std::to_string(round);
    for (int32_t p = 0; p < 200; ++p) placement.place({topic, p});
    for (int32_t p = 0; p < 200; ++p) placement.release({topic, p});
  }
  for (int32_t p = 0; p < 100; ++p) EXPECT_EQ(placement.shard_of("kept", p), kept[static_cast<size_t>(p)]);
  EXPECT_EQ(placement.placed_per_shard(), (std::vector<size_t>{25, 25, 25, 25}));
}

// Threads looking partitions up while the placing thread adds 60,000 more (the table replaced several
// times) always find every partition placed before they started where it was placed.
TEST(replica_placement, lookups_from_other_threads_see_placed_partitions_while_the_table_grows) {
  replica_placement placement(4);
  constexpr int32_t before = 2'000;
  std::vector<size_t> expected;
  for (int32_t p = 0; p < before; ++p) expected.push_back(placement.place({"early", p}));

  std::atomic<bool> done{false};
  std::atomic<size_t> wrong{0};
  std::atomic<size_t> lookups{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      const replica_placement mine = placement;
      int32_t p = r;
      while (!done.load()) {
        if (mine.shard_of("early", p) != expected[static_cast<size_t>(p)]) ++wrong;
        ++lookups;
        p = (p + 7) % before;
      }
    });
  }
  for (int32_t p = 0; p < 60'000; ++p) placement.place({"late-" + std::to_string(p % 97), p});
  for (int32_t p = 0; p < 30'000; ++p) placement.release({"late-" + std::to_string(p % 97), p});
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(lookups.load(), 0u);
  for (int32_t p = 30'000; p < 60'000; p += 101) {
    const std::string topic = "late-" + std::to_string(p % 97);
    EXPECT_EQ(placement.shard_of(topic, p), placement.place({topic, p}));
  }
  EXPECT_LE(spread(placement.placed_per_shard()), 1u);
}

}  // namespace
}  // namespace mala::replication
