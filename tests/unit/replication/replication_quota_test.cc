#include "mala/replication/replication_quota.h"

#include <gtest/gtest.h>

#include <limits>
#include <thread>
#include <vector>

namespace mala::replication {
namespace {

TEST(replication_quota, without_a_bound_it_is_never_exceeded) {
  replication_quota quota;
  quota.record(int64_t{1} << 40, 1'000);
  EXPECT_FALSE(quota.exceeded(1'000));
  quota.set_bound(std::numeric_limits<int64_t>::max());  // Kafka's default: no throttle
  EXPECT_FALSE(quota.bound());
  EXPECT_FALSE(quota.exceeded(1'000));
}

TEST(replication_quota, the_rate_is_taken_over_at_least_one_window) {
  // Kafka's SimpleRate: the bytes of the last 11 windows of 1 s over the time since the oldest began, at
  // least 1 s.
  replication_quota quota(11, 1000);
  quota.set_bound(10'000);
  const int64_t t0 = 50'000;
  quota.record(9'000, t0);
  EXPECT_NEAR(quota.rate(t0), 9'000.0, 1.0);
  EXPECT_FALSE(quota.exceeded(t0));
  quota.record(2'000, t0 + 10);
  EXPECT_NEAR(quota.rate(t0 + 10), 11'000.0, 1.0);
  EXPECT_TRUE(quota.exceeded(t0 + 10));
  // Nothing more: the same bytes over more time.
  EXPECT_NEAR(quota.rate(t0 + 2'000), 5'500.0, 1.0);
  EXPECT_FALSE(quota.exceeded(t0 + 2'000));
  EXPECT_NEAR(quota.rate(t0 + 10'500), 11'000 / 10.5, 1.0);
  // Samples older than the window (11 s) are forgotten.
  EXPECT_EQ(quota.rate(t0 + 11'000), 0.0);
}

TEST(replication_quota, a_steady_sender_that_waits_while_exceeded_keeps_the_bound) {
  // The way the fetch paths use it: send a chunk only while not exceeded.
  replication_quota quota(11, 1000);
  quota.set_bound(100'000);
  int64_t sent = 0;
  for (int64_t now = 0; now < 60'000; now += 10) {
    if (!quota.exceeded(now)) {
      quota.record(16'384, now);
      sent += 16'384;
    }
  }
  // 60 s at 100 kB/s, give or take a chunk and the rate's steps as windows leave it.
  EXPECT_GT(sent, 5'900'000);
  EXPECT_LT(sent, 7'100'000);
}

TEST(replication_quota, threads_recording_at_once_lose_nothing_within_a_window) {
  replication_quota quota(11, 1000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&quota] {
      for (int i = 0; i < 10'000; ++i) quota.record(10, 2'500);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_NEAR(quota.rate(2'500), 400'000.0, 1.0);  // 400,000 bytes over one window
}

TEST(throttled_replicas, entries_naming_this_broker_or_the_wildcard) {
  const auto mine = parse_throttled_replicas("0:1,1:2,2:1, 3:1 ,2:1", 1);
  EXPECT_FALSE(mine.all);
  EXPECT_EQ(mine.partitions, (std::vector<int32_t>{0, 2, 3}));
  EXPECT_TRUE(mine.contains(2));
  EXPECT_FALSE(mine.contains(1));
  EXPECT_TRUE(parse_throttled_replicas("", 1).empty());
  EXPECT_TRUE(parse_throttled_replicas("0:2,1:3", 1).empty());
  const auto every = parse_throttled_replicas("*", 7);
  EXPECT_TRUE(every.all);
  EXPECT_TRUE(every.contains(12345));
}

}  // namespace
}  // namespace mala::replication
