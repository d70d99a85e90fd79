#include "mala/replication/replica_rules.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mala::replication {
namespace {

constexpr int64_t now = 1'700'000'000'000;
constexpr int64_t lag_max = 30'000;

follower_state follower(int32_t id, int64_t leo, int64_t caught_up_ago_ms = 3'600'000, bool eligible = true) {
  follower_state f;
  f.replica_id = id;
  f.log_end_offset = leo;
  f.last_caught_up_time_ms = now - caught_up_ago_ms;
  f.isr_eligible = eligible;
  return f;
}

struct hw_case {
  std::string name;
  int64_t current_hw;
  int64_t leader_leo;
  std::vector<int32_t> isr;  // leader is replica 1
  int32_t min_isr;
  std::vector<follower_state> followers;
  int64_t expected;
};

TEST(replica_rules_test, high_watermark_table) {
  const std::vector<hw_case> cases = {
      {"single replica follows the leader", 0, 5, {1}, 1, {}, 5},
      {"single replica, nothing new", 5, 5, {1}, 1, {}, 5},
      {"single replica under min isr stays", 2, 5, {1}, 2, {}, 2},
      {"isr of three: slowest in-sync follower", 0, 10, {1, 2, 3}, 2, {follower(2, 7), follower(3, 4)}, 4},
      {"isr of three: all caught up", 0, 10, {1, 2, 3}, 2, {follower(2, 10), follower(3, 10)}, 10},
      {"out-of-sync lagging follower ignored", 0, 10, {1, 2}, 2, {follower(2, 8), follower(3, 1)}, 8},
      {"out-of-sync but recently caught up follower holds it",
       0,
       10,
       {1, 2},
       2,
       {follower(2, 8), follower(3, 6, 1'000)},
       6},
      {"recently caught up but ineligible (fenced) follower ignored",
       0,
       10,
       {1, 2},
       2,
       {follower(2, 8), follower(3, 6, 1'000, false)},
       8},
      {"out-of-sync follower at the leader's end counts (caught up)",
       0,
       10,
       {1, 2},
       2,
       {follower(2, 8), follower(3, 10)},
       8},
      {"isr below min isr: no advance (strict min isr)",
       3,
       10,
       {1},
       2,
       {follower(2, 10), follower(3, 10)},
       3},
      {"isr of two below min isr three", 3, 10, {1, 2}, 3, {follower(2, 10), follower(3, 10)}, 3},
      {"isr exactly min isr advances", 3, 10, {1, 2}, 2, {follower(2, 9), follower(3, 0)}, 9},
      {"in-sync follower with unknown end (new leader) holds",
       3,
       10,
       {1, 2, 3},
       2,
       {follower(2, 10), follower(3, -1)},
       3},
      {"never decreases", 7, 10, {1, 2}, 1, {follower(2, 5)}, 7},
      {"min isr 1 with a lagging in-sync follower", 0, 10, {1, 2}, 1, {follower(2, 2)}, 2},
      {"leader is the slowest", 0, 4, {1, 2, 3}, 2, {follower(2, 4), follower(3, 4)}, 4},
  };
  for (const auto& c : cases) {
    high_watermark_inputs in;
    in.high_watermark = c.current_hw;
    in.leader_log_end_offset = c.leader_leo;
    in.isr = c.isr;
    in.min_insync_replicas = c.min_isr;
    in.followers = c.followers;
    in.now_ms = now;
    in.replica_lag_time_max_ms = lag_max;
    EXPECT_EQ(next_high_watermark(in), c.expected) << c.name;
  }
}

TEST(replica_rules_test, high_watermark_exhaustive_three_replicas) {
  // Every ISR containing the leader, every min ISR and every pair of follower ends 0..4 (leader at 4): the
  // result is the minimum over the ISR when |ISR| >= min ISR, else the current value; never below the current
  // value.
  const std::vector<std::vector<int32_t>> isrs = {{1}, {1, 2}, {1, 3}, {1, 2, 3}};
  for (const auto& isr : isrs) {
    for (int32_t min_isr = 1; min_isr <= 3; ++min_isr) {
      for (int64_t e2 = 0; e2 <= 4; ++e2) {
        for (int64_t e3 = 0; e3 <= 4; ++e3) {
          for (int64_t current = 0; current <= 4; ++current) {
            std::vector<follower_state> followers = {follower(2, e2), follower(3, e3)};
            high_watermark_inputs in{current, 4, isr, min_isr, followers, now, lag_max};
            int64_t expected = current;
            if (static_cast<int32_t>(isr.size()) >= min_isr) {
              int64_t low = 4;
              for (const auto& f : followers) {
                bool in_isr = std::find(isr.begin(), isr.end(), f.replica_id) != isr.end();
                // Out of the ISR and long not caught up: counts only once at the leader's end.
                if (in_isr || f.log_end_offset == 4) low = std::min(low, f.log_end_offset);
              }
              expected = std::max(low, current);
            }
            EXPECT_EQ(next_high_watermark(in), expected)
                << "isr size " << isr.size() << " min " << min_isr << " e2 " << e2 << " e3 " << e3;
            EXPECT_GE(next_high_watermark(in), current);
          }
        }
      }
    }
  }
}

TEST(replica_rules_test, effective_min_isr_is_capped_by_replication_factor) {
  EXPECT_EQ(effective_min_isr(2, 1), 1);
  EXPECT_EQ(effective_min_isr(2, 3), 2);
  EXPECT_EQ(effective_min_isr(1, 3), 1);
  EXPECT_EQ(effective_min_isr(5, 3), 3);
  EXPECT_EQ(effective_min_isr(2, 0), 1);
}

TEST(replica_rules_test, acks_before_append) {
  struct acks_case {
    int16_t acks;
    size_t isr;
    int32_t min_isr;
    error_code expected;
  };
  const std::vector<acks_case> cases = {
      {-1, 1, 1, error_code::none},
      {-1, 1, 2, error_code::not_enough_replicas},
      {-1, 2, 2, error_code::none},
      {-1, 2, 3, error_code::not_enough_replicas},
      {-1, 3, 2, error_code::none},
      {1, 1, 2, error_code::none},
      {0, 1, 3, error_code::none},
      {2, 3, 1, error_code::invalid_required_acks},
      {-2, 3, 1, error_code::invalid_required_acks},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(check_acks_before_append(c.acks, c.isr, c.min_isr), c.expected)
        << "acks " << c.acks << " isr " << c.isr << " min " << c.min_isr;
  }
}

TEST(replica_rules_test, enough_replicas_reach_offset) {
  EXPECT_EQ(check_enough_replicas_reach_offset(4, 5, 3, 2), (ack_completion{false, error_code::none}));
  EXPECT_EQ(check_enough_replicas_reach_offset(5, 5, 3, 2), (ack_completion{true, error_code::none}));
  EXPECT_EQ(check_enough_replicas_reach_offset(9, 5, 2, 2), (ack_completion{true, error_code::none}));
  EXPECT_EQ(check_enough_replicas_reach_offset(5, 5, 1, 2),
            (ack_completion{true, error_code::not_enough_replicas_after_append}));
  // Not reached: keeps waiting whatever the ISR (it times out).
  EXPECT_EQ(check_enough_replicas_reach_offset(4, 5, 1, 2), (ack_completion{false, error_code::none}));
}

TEST(replica_rules_test, current_leader_epoch) {
  EXPECT_EQ(check_current_leader_epoch(std::nullopt, 5), error_code::none);
  EXPECT_EQ(check_current_leader_epoch(-1, 5), error_code::none);
  EXPECT_EQ(check_current_leader_epoch(5, 5), error_code::none);
  EXPECT_EQ(check_current_leader_epoch(4, 5), error_code::fenced_leader_epoch);
  EXPECT_EQ(check_current_leader_epoch(0, 5), error_code::fenced_leader_epoch);
  EXPECT_EQ(check_current_leader_epoch(6, 5), error_code::unknown_leader_epoch);
}

TEST(replica_rules_test, fetch_bound) {
  EXPECT_EQ(fetch_bound_for(consumer_replica_id, isolation_level::read_uncommitted),
            fetch_bound::high_watermark);
  EXPECT_EQ(fetch_bound_for(consumer_replica_id, isolation_level::read_committed),
            fetch_bound::last_stable_offset);
  EXPECT_EQ(fetch_bound_for(debugging_replica_id, isolation_level::read_uncommitted),
            fetch_bound::high_watermark);
  EXPECT_EQ(fetch_bound_for(0, isolation_level::read_uncommitted), fetch_bound::log_end);
  EXPECT_EQ(fetch_bound_for(3, isolation_level::read_committed), fetch_bound::log_end);
}

TEST(replica_rules_test, follower_fetch_updates_caught_up_time) {
  follower_state f;
  f.replica_id = 2;
  f.last_caught_up_time_ms = 100;
  // Fetch at the leader's end: caught up now.
  auto a = after_follower_fetch(f, 10, 0, 1'000, 10);
  EXPECT_EQ(a.log_end_offset, 10);
  EXPECT_EQ(a.log_start_offset, 0);
  EXPECT_EQ(a.last_caught_up_time_ms, 1'000);
  EXPECT_EQ(a.last_fetch_time_ms, 1'000);
  EXPECT_EQ(a.last_fetch_leader_log_end_offset, 10);
  // Behind the leader's end (15) but at what the leader had at the previous fetch (10): caught up as of then.
  auto b = after_follower_fetch(a, 10, 0, 2'000, 15);
  EXPECT_EQ(b.last_caught_up_time_ms, 1'000);
  auto c = after_follower_fetch(b, 15, 0, 3'000, 20);
  EXPECT_EQ(c.last_caught_up_time_ms, 2'000);
  // Still behind what the leader had last time: no progress.
  auto d = after_follower_fetch(c, 16, 0, 4'000, 25);
  EXPECT_EQ(d.last_caught_up_time_ms, 2'000);
  EXPECT_EQ(d.last_fetch_leader_log_end_offset, 25);
  EXPECT_TRUE(is_caught_up(d, 25, 2'000 + lag_max, lag_max));
  EXPECT_FALSE(is_caught_up(d, 25, 2'001 + lag_max, lag_max));
  EXPECT_TRUE(is_caught_up(after_follower_fetch(d, 25, 0, 5'000, 25), 25, 1'000'000, lag_max));
}

TEST(replica_rules_test, reset_on_leader_change) {
  follower_state f = follower(2, 8, 10);
  f.log_start_offset = 3;
  f.last_fetch_time_ms = now - 5;
  auto fresh_in_isr = reset_on_leader_change(f, 2, true, true, now, 20);
  EXPECT_EQ(fresh_in_isr.log_end_offset, -1);
  EXPECT_EQ(fresh_in_isr.log_start_offset, -1);
  EXPECT_EQ(fresh_in_isr.last_caught_up_time_ms, now);
  EXPECT_EQ(fresh_in_isr.last_fetch_time_ms, 0);
  auto fresh_out = reset_on_leader_change(f, 2, true, false, now, 20);
  EXPECT_EQ(fresh_out.last_caught_up_time_ms, 0);
  auto kept = reset_on_leader_change(f, 2, false, true, now, 20);
  EXPECT_EQ(kept.log_end_offset, 8);
  EXPECT_EQ(kept.log_start_offset, 3);
  EXPECT_EQ(kept.last_fetch_leader_log_end_offset, 20);
  EXPECT_EQ(kept.last_fetch_time_ms, now);
  auto kept_out = reset_on_leader_change(f, 2, false, false, now, 20);
  EXPECT_EQ(kept_out.last_fetch_time_ms, 0);
  EXPECT_EQ(kept_out.last_caught_up_time_ms, 0);
}

TEST(replica_rules_test, low_watermark_over_the_followers_on_live_brokers) {
  std::vector<follower_state> followers = {follower(2, 5), follower(3, 5)};
  followers[0].log_start_offset = 4;
  followers[1].log_start_offset = 7;
  EXPECT_EQ(low_watermark(7, followers), 4);
  followers[0].log_start_offset = 7;
  EXPECT_EQ(low_watermark(7, followers), 7);
  EXPECT_EQ(low_watermark(1, followers), 1);  // the leader's own start counts too
  followers[1].log_start_offset = 2;
  EXPECT_EQ(low_watermark(7, followers), 2);
}

// Kafka's lowWatermarkIfLeader counts every replica on a live broker, even one whose log start is still
// unknown under this leader (-1): a DeleteRecords waits for its first fetch.
TEST(replica_rules_test, low_watermark_waits_for_a_live_follower_that_has_not_fetched) {
  std::vector<follower_state> followers = {follower(2, 5), follower(3, 5)};
  followers[0].log_start_offset = 7;
  EXPECT_EQ(low_watermark(7, followers), -1);
  followers[1].log_start_offset = 7;
  EXPECT_EQ(low_watermark(7, followers), 7);
}

// A follower whose broker is fenced (dead, or partitioned away) no longer holds the low watermark back,
// whatever it reported last.
TEST(replica_rules_test, low_watermark_leaves_out_followers_of_dead_brokers) {
  std::vector<follower_state> followers = {follower(2, 5), follower(3, 5, 0, /*eligible=*/false)};
  followers[0].log_start_offset = 8;
  followers[1].log_start_offset = 0;
  EXPECT_EQ(low_watermark(8, followers), 8);
  followers[1].log_start_offset = -1;
  EXPECT_EQ(low_watermark(8, followers), 8);
  followers[0].isr_eligible = false;
  EXPECT_EQ(low_watermark(8, followers), 8);  // the leader alone
}

}  // namespace
}  // namespace mala::replication
