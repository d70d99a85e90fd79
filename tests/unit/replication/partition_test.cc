#include "mala/replication/partition.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "replication_test_util.h"

namespace mala::replication {
namespace {

using testing::make_batch;
using testing::start_ms;

constexpr int32_t self = 1;
const std::function<bool(int32_t)> everyone = [](int32_t) { return true; };

class partition_test : public testing::log_dir_fixture {
 protected:
  partition& make(storage::log_config config = {}) {
    auto log = _logs->create({"orders", 0}, uuid::random(), config);
    EXPECT_TRUE(log.ok()) << log.error().message;
    partition_options o;
    o.local_replica_id = self;
    o.clock_ms = [this] { return _now; };
    _partition = std::make_unique<partition>(*log, uuid::random(), o);
    return *_partition;
  }

  static partition_state leader_state(std::vector<int32_t> replicas, std::vector<int32_t> isr,
                                      int32_t min_isr, int32_t epoch = 1, int32_t partition_epoch = 1) {
    return partition_state{self, epoch, partition_epoch, std::move(replicas), std::move(isr), min_isr};
  }

  static append_outcome append_ok(partition& p, int records, int16_t acks, int64_t ts = start_ms) {
    auto bytes = make_batch(records, ts);
    auto r = p.append(bytes, acks);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : append_outcome{};
  }

  static read_outcome read_ok(const partition& p, read_request request) {
    auto r = p.read(request);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : read_outcome{};
  }

  static read_request consumer_read(int64_t offset,
                                    isolation_level isolation = isolation_level::read_uncommitted) {
    read_request r;
    r.fetch_offset = offset;
    r.max_bytes = 1 << 20;
    r.isolation = isolation;
    return r;
  }
  static read_request replica_read(int32_t replica, int64_t offset) {
    read_request r;
    r.fetch_offset = offset;
    r.max_bytes = 1 << 20;
    r.replica_id = replica;
    return r;
  }

  // Serves a follower fetch at `offset` as the broker will: read, then record the fetch.
  void follower_fetches(partition& p, int32_t replica, int64_t offset) {
    auto r = read_ok(p, replica_read(replica, offset));
    auto st = p.update_follower_fetch_state({replica, offset, 0, r.log_end_offset, _now});
    EXPECT_TRUE(st.ok()) << st.message;
  }

  // Another replica of the partition on node `id` (its own log: the fixture has one log dir for all).
  std::unique_ptr<partition> make_replica(int32_t id, const std::string& topic) {
    auto log = _logs->create({topic, 0}, uuid::random(), {});
    EXPECT_TRUE(log.ok()) << log.error().message;
    partition_options o;
    o.local_replica_id = id;
    o.clock_ms = [this] { return _now; };
    return std::make_unique<partition>(*log, uuid::random(), o);
  }

  // One round of the follower fetcher on node `id` against `leader`, as
  // src/replication/driver/follower_fetcher.cc and the Fetch handler do it: the leader reads and records the
  // fetch (log end and log start the follower sent), then the follower appends what came and takes the
  // leader's high watermark and log start offset.
  void replicate(partition& leader, partition& follower, int32_t id) {
    const int64_t offset = follower.log_end_offset();
    auto r = read_ok(leader, replica_read(id, offset));
    auto st =
        leader.update_follower_fetch_state({id, offset, follower.log_start_offset(), r.log_end_offset, _now});
    ASSERT_TRUE(st.ok()) << st.message;
    if (r.data && r.data->size > 0) {
      auto bytes = r.data->file->read(r.data->position, r.data->size);
      ASSERT_TRUE(bytes.ok()) << bytes.error().message;
      auto appended = follower.append_as_follower(*bytes);
      ASSERT_TRUE(appended.ok()) << appended.error().message;
    }
    follower.update_high_watermark_from_leader(r.high_watermark);
    st = follower.update_log_start_offset_from_leader(r.log_start_offset);
    ASSERT_TRUE(st.ok()) << st.message;
  }

  std::unique_ptr<partition> _partition;
};

TEST_F(partition_test, single_replica_high_watermark_follows_each_append) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 1)).ok());
  EXPECT_TRUE(p.is_leader());
  EXPECT_EQ(p.high_watermark(), 0);
  for (int i = 0; i < 3; ++i) {
    auto out = append_ok(p, 2, -1);
    EXPECT_EQ(out.appended.first_offset, 2 * i);
    EXPECT_EQ(out.appended.last_offset, 2 * i + 1);
    EXPECT_EQ(out.required_offset, 2 * i + 2);
    EXPECT_TRUE(out.done);
    EXPECT_EQ(out.error, error_code::none);
    EXPECT_EQ(out.high_watermark, 2 * i + 2);
    EXPECT_EQ(p.high_watermark(), p.log_end_offset());
    EXPECT_EQ(p.last_stable_offset(), p.high_watermark());
  }
  auto one = append_ok(p, 1, 1);
  EXPECT_TRUE(one.done);
  EXPECT_EQ(one.required_offset, -1);
  auto zero = append_ok(p, 1, 0);
  EXPECT_TRUE(zero.done);
  EXPECT_EQ(p.high_watermark(), 8);
}

TEST_F(partition_test, single_replica_with_min_isr_two_is_writable_with_acks_all) {
  // min.insync.replicas above the replication factor is capped to it (Kafka's effectiveMinIsr).
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 2)).ok());
  EXPECT_EQ(p.min_insync_replicas(), 1);
  EXPECT_FALSE(p.under_min_isr());
  auto out = append_ok(p, 1, -1);
  EXPECT_TRUE(out.done);
  EXPECT_EQ(p.high_watermark(), 1);
}

TEST_F(partition_test, acks_all_below_min_isr_is_refused_before_append) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2, 3}, {self}, 2)).ok());
  EXPECT_TRUE(p.under_min_isr());
  EXPECT_TRUE(p.under_replicated());
  auto bytes = make_batch(3);
  auto r = p.append(bytes, -1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, error_code::not_enough_replicas);
  EXPECT_EQ(p.log_end_offset(), 0);
  EXPECT_EQ(p.log().size_bytes(), 0);

  // acks=1 is written but stays invisible: strict min ISR keeps the high watermark where it is.
  auto out = append_ok(p, 3, 1);
  EXPECT_EQ(out.appended.last_offset, 2);
  EXPECT_EQ(p.log_end_offset(), 3);
  EXPECT_EQ(p.high_watermark(), 0);
  EXPECT_FALSE(read_ok(p, consumer_read(0)).data.has_value());
  EXPECT_FALSE(read_ok(p, consumer_read(0, isolation_level::read_committed)).data.has_value());
  auto latest = p.list_offset(storage::latest_timestamp, isolation_level::read_uncommitted, std::nullopt);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->found->offset, 0);

  auto bad = p.append(bytes, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, error_code::invalid_required_acks);
}

TEST_F(partition_test, acks_all_waits_for_every_in_sync_follower) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2, 3}, {self, 2, 3}, 2)).ok());
  auto out = append_ok(p, 4, -1);
  EXPECT_FALSE(out.done);
  EXPECT_EQ(out.required_offset, 4);
  EXPECT_EQ(p.high_watermark(), 0);

  std::vector<error_code> fired;
  auto handle = p.add_high_watermark_waiter(out.required_offset, [&](error_code e) { fired.push_back(e); });
  EXPECT_TRUE(handle.valid());
  EXPECT_EQ(p.waiter_count(), 1u);

  follower_fetches(p, 2, 4);
  EXPECT_EQ(p.high_watermark(), 0);  // replica 3 has not fetched under this leader yet
  EXPECT_TRUE(fired.empty());
  follower_fetches(p, 3, 2);
  EXPECT_EQ(p.high_watermark(), 2);
  EXPECT_TRUE(fired.empty());
  follower_fetches(p, 3, 4);
  EXPECT_EQ(p.high_watermark(), 4);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0], error_code::none);
  EXPECT_EQ(p.waiter_count(), 0u);
  EXPECT_FALSE(p.cancel_waiter(handle));  // already fired

  // Already reached: fires at once, no handle.
  auto again = p.add_high_watermark_waiter(4, [&](error_code e) { fired.push_back(e); });
  EXPECT_FALSE(again.valid());
  EXPECT_EQ(fired.size(), 2u);
}

TEST_F(partition_test, follower_state_is_recorded) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self, 2}, 1)).ok());
  append_ok(p, 5, 1);
  _now += 100;
  auto r = read_ok(p, replica_read(2, 5));
  ASSERT_TRUE(p.update_follower_fetch_state({2, 5, 0, r.log_end_offset, _now}).ok());
  ASSERT_EQ(p.followers().size(), 1u);
  EXPECT_EQ(p.followers()[0].replica_id, 2);
  EXPECT_EQ(p.followers()[0].log_end_offset, 5);
  EXPECT_EQ(p.followers()[0].log_start_offset, 0);
  EXPECT_EQ(p.followers()[0].last_fetch_time_ms, _now);
  EXPECT_EQ(p.followers()[0].last_caught_up_time_ms, _now);
  EXPECT_EQ(p.high_watermark(), 5);

  auto unknown = p.update_follower_fetch_state({9, 5, 0, 5, _now});
  EXPECT_EQ(unknown.code, error_code::not_leader_or_follower);
  auto self_fetch = p.update_follower_fetch_state({self, 5, 0, 5, _now});
  EXPECT_EQ(self_fetch.code, error_code::not_leader_or_follower);
}

TEST_F(partition_test, high_watermark_table_on_a_real_log) {
  struct hw_case {
    const char* name;
    std::vector<int32_t> replicas;
    std::vector<int32_t> isr;
    int32_t min_isr;
    std::vector<std::pair<int32_t, int64_t>> fetches;  // follower, offset (leader at 10)
    int64_t expected;
  };
  const std::vector<hw_case> cases = {
      {"rf1", {self}, {self}, 1, {}, 10},
      {"rf3 isr3 both fetched", {self, 2, 3}, {self, 2, 3}, 2, {{2, 6}, {3, 9}}, 6},
      {"rf3 isr3 one fetched", {self, 2, 3}, {self, 2, 3}, 2, {{2, 10}}, 0},
      {"rf3 isr2 outsider lagging", {self, 2, 3}, {self, 2}, 2, {{2, 8}, {3, 1}}, 8},
      {"rf3 isr2 outsider at the end", {self, 2, 3}, {self, 2}, 2, {{2, 8}, {3, 10}}, 8},
      {"rf3 isr1 min2", {self, 2, 3}, {self}, 2, {{2, 10}, {3, 10}}, 0},
      {"rf3 isr1 min1", {self, 2, 3}, {self}, 1, {{2, 3}, {3, 4}}, 10},
      {"rf2 isr2 min2", {self, 2}, {self, 2}, 2, {{2, 7}}, 7},
      {"rf3 isr2 min3", {self, 2, 3}, {self, 2}, 3, {{2, 10}, {3, 10}}, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    _partition.reset();
    if (_logs->get({"orders", 0})) {
      ASSERT_TRUE(_logs->remove({"orders", 0}).ok());
    }
    auto& p = make();
    ASSERT_TRUE(p.make_leader(leader_state(c.replicas, c.isr, c.min_isr)).ok());
    append_ok(p, 10, 1);
    for (auto [replica, offset] : c.fetches) follower_fetches(p, replica, offset);
    EXPECT_EQ(p.high_watermark(), c.expected);
  }
}

TEST_F(partition_test, not_enough_replicas_after_append_when_isr_shrank) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2, 3}, {self, 2}, 2)).ok());
  auto out = append_ok(p, 2, -1);
  EXPECT_FALSE(out.done);
  follower_fetches(p, 2, 2);
  EXPECT_EQ(p.high_watermark(), 2);
  // The ISR shrinks (metadata update, same leader epoch) before the produce looks again.
  ASSERT_TRUE(p.make_leader(leader_state({self, 2, 3}, {self}, 2, 1, 2)).ok());
  std::vector<error_code> fired;
  p.add_high_watermark_waiter(out.required_offset, [&](error_code e) { fired.push_back(e); });
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0], error_code::not_enough_replicas_after_append);
}

TEST_F(partition_test, waiters_fire_and_cancel) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self, 2}, 1)).ok());
  int data_fired = 0;
  std::vector<error_code> hw_fired;
  auto data = p.add_data_waiter([&](error_code e) {
    EXPECT_EQ(e, error_code::none);
    ++data_fired;
  });
  auto cancelled_data =
      p.add_data_waiter([&](error_code) { ADD_FAILURE() << "cancelled data waiter fired"; });
  EXPECT_TRUE(p.cancel_waiter(cancelled_data));
  EXPECT_FALSE(p.cancel_waiter(cancelled_data));
  append_ok(p, 3, 1);
  EXPECT_EQ(data_fired, 1);
  EXPECT_FALSE(p.cancel_waiter(data));  // one-shot

  // A waiter registered from inside a callback is kept for the next event.
  p.add_data_waiter([&](error_code) {
    ++data_fired;
    p.add_data_waiter([&](error_code) { ++data_fired; });
  });
  auto timed_out =
      p.add_high_watermark_waiter(3, [&](error_code) { ADD_FAILURE() << "timed-out waiter fired"; });
  auto kept = p.add_high_watermark_waiter(2, [&](error_code e) { hw_fired.push_back(e); });
  EXPECT_TRUE(kept.valid());
  EXPECT_TRUE(p.cancel_waiter(timed_out));
  // The follower reaching offset 2 moves the HW: the produce waiter and the parked fetch both wake.
  follower_fetches(p, 2, 2);
  EXPECT_EQ(p.high_watermark(), 2);
  EXPECT_EQ(hw_fired, std::vector<error_code>{error_code::none});
  EXPECT_EQ(data_fired, 2);
  EXPECT_EQ(p.waiter_count(), 1u);
  // A fetch that does not move the follower's end wakes nobody.
  follower_fetches(p, 2, 2);
  EXPECT_EQ(data_fired, 2);
  append_ok(p, 1, 1);
  EXPECT_EQ(data_fired, 3);
  EXPECT_EQ(p.waiter_count(), 0u);
  EXPECT_FALSE(p.cancel_waiter({}));
}

TEST_F(partition_test, losing_leadership_fails_waiters_and_requests) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self, 2}, 1)).ok());
  auto out = append_ok(p, 2, -1);
  ASSERT_FALSE(out.done);
  std::vector<error_code> fired;
  p.add_high_watermark_waiter(out.required_offset, [&](error_code e) { fired.push_back(e); });
  p.add_data_waiter([&](error_code e) { fired.push_back(e); });

  ASSERT_TRUE(p.make_follower(partition_state{2, 2, 2, {self, 2}, {self, 2}, 1}).ok());
  EXPECT_FALSE(p.is_leader());
  EXPECT_EQ(p.leader_id(), 2);
  EXPECT_EQ(fired, (std::vector<error_code>{error_code::not_leader_or_follower,
                                            error_code::not_leader_or_follower}));
  EXPECT_EQ(p.waiter_count(), 0u);

  auto bytes = make_batch(1);
  auto appended = p.append(bytes, 1);
  ASSERT_FALSE(appended.ok());
  EXPECT_EQ(appended.error().code, error_code::not_leader_or_follower);
  auto r = p.read(consumer_read(0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, error_code::not_leader_or_follower);
  auto listed = p.list_offset(storage::earliest_timestamp, isolation_level::read_uncommitted, std::nullopt);
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.error().code, error_code::not_leader_or_follower);
  auto deleted = p.delete_records(0);
  ASSERT_FALSE(deleted.ok());
  EXPECT_EQ(deleted.error().code, error_code::not_leader_or_follower);
  fired.clear();
  p.add_high_watermark_waiter(1, [&](error_code e) { fired.push_back(e); });
  EXPECT_EQ(fired, std::vector<error_code>{error_code::not_leader_or_follower});
}

TEST_F(partition_test, reads_are_bounded_by_high_watermark_for_consumers_and_log_end_for_replicas) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self, 2}, 1)).ok());
  auto first = make_batch(3);
  auto first_size = static_cast<int32_t>(first.size());
  ASSERT_TRUE(p.append(first, 1).ok());
  append_ok(p, 3, 1);
  append_ok(p, 3, 1);
  EXPECT_EQ(p.high_watermark(), 0);

  auto consumer = read_ok(p, consumer_read(0));
  EXPECT_FALSE(consumer.data.has_value());
  EXPECT_EQ(consumer.high_watermark, 0);
  EXPECT_EQ(consumer.log_end_offset, 9);
  EXPECT_EQ(consumer.log_start_offset, 0);

  auto replica = read_ok(p, replica_read(2, 0));
  ASSERT_TRUE(replica.data.has_value());
  EXPECT_EQ(replica.data->size, static_cast<int32_t>(p.log().size_bytes()));

  ASSERT_TRUE(p.update_follower_fetch_state({2, 3, 0, replica.log_end_offset, _now}).ok());
  EXPECT_EQ(p.high_watermark(), 3);
  auto committed = read_ok(p, consumer_read(0));
  ASSERT_TRUE(committed.data.has_value());
  EXPECT_EQ(committed.data->size, first_size);
  EXPECT_EQ(committed.high_watermark, 3);
  EXPECT_EQ(committed.last_stable_offset, 3);
  auto read_committed = read_ok(p, consumer_read(0, isolation_level::read_committed));
  ASSERT_TRUE(read_committed.data.has_value());
  EXPECT_EQ(read_committed.data->size, first_size);
  // At the high watermark: nothing yet, not an error.
  EXPECT_FALSE(read_ok(p, consumer_read(3)).data.has_value());

  auto past_end = p.read(consumer_read(10));
  ASSERT_FALSE(past_end.ok());
  EXPECT_EQ(past_end.error().code, error_code::offset_out_of_range);
  auto stranger = p.read(replica_read(7, 0));
  ASSERT_FALSE(stranger.ok());
  EXPECT_EQ(stranger.error().code, error_code::not_leader_or_follower);
}

TEST_F(partition_test, leader_epoch_fencing) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 1, 5)).ok());
  append_ok(p, 2, 1);
  auto with_epoch = [](std::optional<int32_t> epoch) {
    auto r = consumer_read(0);
    r.current_leader_epoch = epoch;
    return r;
  };
  EXPECT_TRUE(p.read(with_epoch(5)).ok());
  EXPECT_TRUE(p.read(with_epoch(std::nullopt)).ok());
  EXPECT_TRUE(p.read(with_epoch(-1)).ok());
  EXPECT_EQ(p.read(with_epoch(4)).error().code, error_code::fenced_leader_epoch);
  EXPECT_EQ(p.read(with_epoch(6)).error().code, error_code::unknown_leader_epoch);
  EXPECT_EQ(p.list_offset(storage::latest_timestamp, isolation_level::read_uncommitted, 4).error().code,
            error_code::fenced_leader_epoch);
  EXPECT_EQ(p.list_offset(storage::latest_timestamp, isolation_level::read_uncommitted, 6).error().code,
            error_code::unknown_leader_epoch);
  EXPECT_TRUE(p.list_offset(storage::latest_timestamp, isolation_level::read_uncommitted, 5).ok());

  // On a follower the epoch is checked first: a stale client learns about its metadata before the role.
  ASSERT_TRUE(p.make_follower(partition_state{2, 6, 2, {self, 2}, {self, 2}, 1}).ok());
  EXPECT_EQ(p.read(with_epoch(5)).error().code, error_code::fenced_leader_epoch);
  EXPECT_EQ(p.read(with_epoch(6)).error().code, error_code::not_leader_or_follower);
  EXPECT_EQ(p.read(with_epoch(7)).error().code, error_code::unknown_leader_epoch);
}

TEST_F(partition_test, new_leader_epoch_is_assigned_in_the_epoch_cache) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 1, 3)).ok());
  ASSERT_TRUE(p.log().epochs().latest().has_value());
  EXPECT_EQ(p.log().epochs().latest()->epoch, 3);
  EXPECT_EQ(p.log().epochs().latest()->start_offset, 0);
  append_ok(p, 4, 1);
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 1, 7, 2)).ok());
  EXPECT_EQ(p.log().epochs().latest()->epoch, 7);
  EXPECT_EQ(p.log().epochs().latest()->start_offset, 4);
  EXPECT_EQ(p.leader_epoch(), 7);
  // Same epoch again (an ISR change): no new entry.
  append_ok(p, 1, 1);
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 1, 7, 3)).ok());
  EXPECT_EQ(p.log().epochs().entries().size(), 2u);
  // An older partition epoch is stale and ignored.
  auto stale = p.make_leader(leader_state({self}, {self}, 1, 8, 1));
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(*stale, state_change::stale);
  EXPECT_EQ(p.leader_epoch(), 7);
  auto stale_follower = p.make_follower(partition_state{2, 9, 2, {self, 2}, {self, 2}, 1});
  ASSERT_TRUE(stale_follower.ok());
  EXPECT_EQ(*stale_follower, state_change::stale);
  EXPECT_TRUE(p.is_leader());
}

TEST_F(partition_test, follower_fetch_with_diverging_epoch) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self, 2}, 1, 1)).ok());
  append_ok(p, 3, 1);  // epoch 1: offsets 0..2
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self, 2}, 1, 3, 2)).ok());
  append_ok(p, 3, 1);  // epoch 3: offsets 3..5
  auto request = replica_read(2, 5);
  request.last_fetched_epoch = 2;  // the follower wrote offsets 3..4 under an epoch 2 we never had
  auto diverged = read_ok(p, request);
  ASSERT_TRUE(diverged.diverging.has_value());
  EXPECT_EQ(diverged.diverging->epoch, 1);
  EXPECT_EQ(diverged.diverging->end_offset, 3);
  EXPECT_FALSE(diverged.data.has_value());

  request.last_fetched_epoch = 1;
  request.fetch_offset = 3;
  auto in_line = read_ok(p, request);
  EXPECT_FALSE(in_line.diverging.has_value());
  EXPECT_TRUE(in_line.data.has_value());
  request.fetch_offset = 4;  // claims more of epoch 1 than we have
  auto too_far = read_ok(p, request);
  ASSERT_TRUE(too_far.diverging.has_value());
  EXPECT_EQ(too_far.diverging->epoch, 1);
  EXPECT_EQ(too_far.diverging->end_offset, 3);
  request.last_fetched_epoch = 9;  // beyond every epoch we know
  auto unknown = p.read(request);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, error_code::offset_out_of_range);
}

TEST_F(partition_test, list_offsets_are_bounded_by_the_high_watermark) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self, 2}, 1, 1)).ok());
  append_ok(p, 3, 1, 1'000);  // offsets 0..2, timestamps 1000..1002
  append_ok(p, 3, 1, 2'000);  // offsets 3..5, timestamps 2000..2002
  follower_fetches(p, 2, 3);
  ASSERT_EQ(p.high_watermark(), 3);

  auto list = [&](int64_t ts, std::optional<isolation_level> iso = isolation_level::read_uncommitted) {
    auto r = p.list_offset(ts, iso, std::nullopt);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? r->found : std::nullopt;
  };
  auto earliest = list(storage::earliest_timestamp);
  ASSERT_TRUE(earliest);
  EXPECT_EQ(earliest->offset, 0);
  auto latest = list(storage::latest_timestamp);
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->offset, 3);
  EXPECT_EQ(latest->leader_epoch, 1);
  EXPECT_EQ(list(storage::latest_timestamp, isolation_level::read_committed)->offset, 3);
  EXPECT_EQ(list(storage::latest_timestamp, std::nullopt)->offset, 6);  // a replica asking: log end
  auto by_time = list(1'001);
  ASSERT_TRUE(by_time);
  EXPECT_EQ(by_time->offset, 1);
  EXPECT_EQ(by_time->timestamp, 1'001);
  EXPECT_FALSE(list(2'000).has_value());  // offset 3 is not committed yet
  EXPECT_EQ(list(2'000, std::nullopt)->offset, 3);
  EXPECT_FALSE(list(5'000).has_value());
  auto max_ts = list(storage::max_timestamp_query);
  EXPECT_FALSE(max_ts.has_value());  // the max timestamp (2002, offset 5) is beyond the high watermark
  follower_fetches(p, 2, 6);
  max_ts = list(storage::max_timestamp_query);
  ASSERT_TRUE(max_ts);
  EXPECT_EQ(max_ts->offset, 5);
}

TEST_F(partition_test, list_offsets_while_a_new_leader_high_watermark_lags) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self, 2}, 1, 1)).ok());
  append_ok(p, 3, 1, 1'000);
  EXPECT_EQ(p.high_watermark(), 0);
  // A new epoch starts at offset 3 while the high watermark is still 0.
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self, 2}, 1, 2, 2)).ok());
  auto latest = p.list_offset(storage::latest_timestamp, isolation_level::read_uncommitted, std::nullopt);
  ASSERT_FALSE(latest.ok());
  EXPECT_EQ(latest.error().code, error_code::offset_not_available);
  auto by_time = p.list_offset(1'001, isolation_level::read_uncommitted, std::nullopt);
  ASSERT_FALSE(by_time.ok());
  EXPECT_EQ(by_time.error().code, error_code::offset_not_available);
  EXPECT_TRUE(
      p.list_offset(storage::earliest_timestamp, isolation_level::read_uncommitted, std::nullopt).ok());
  auto replica = p.list_offset(storage::latest_timestamp, std::nullopt, std::nullopt);
  ASSERT_TRUE(replica.ok());
  EXPECT_EQ(replica->found->offset, 3);
  follower_fetches(p, 2, 3);
  auto after = p.list_offset(storage::latest_timestamp, isolation_level::read_uncommitted, std::nullopt);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->found->offset, 3);
  EXPECT_EQ(after->found->leader_epoch, 2);
}

TEST_F(partition_test, delete_records_bounds) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self, 2}, 1)).ok());
  append_ok(p, 5, 1);
  append_ok(p, 5, 1);
  follower_fetches(p, 2, 6);
  ASSERT_EQ(p.high_watermark(), 6);

  auto beyond = p.delete_records(7);
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.error().code, error_code::offset_out_of_range);
  EXPECT_EQ(p.log_start_offset(), 0);
  auto negative = p.delete_records(-5);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.error().code, error_code::offset_out_of_range);

  int woken = 0;
  p.add_data_waiter([&](error_code) { ++woken; });
  auto deleted = p.delete_records(2);
  ASSERT_TRUE(deleted.ok()) << deleted.error().message;
  EXPECT_EQ(deleted->requested_offset, 2);
  EXPECT_EQ(deleted->low_watermark, 0);  // the follower still reports log start 0
  EXPECT_EQ(p.log_start_offset(), 2);
  EXPECT_EQ(woken, 1);
  auto old = p.read(consumer_read(1));
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.error().code, error_code::offset_out_of_range);

  auto to_hw = p.delete_records(-1);
  ASSERT_TRUE(to_hw.ok());
  EXPECT_EQ(to_hw->requested_offset, 6);
  EXPECT_EQ(p.log_start_offset(), 6);
  // Lower than the current start: nothing to do, not an error.
  ASSERT_TRUE(p.delete_records(3).ok());
  EXPECT_EQ(p.log_start_offset(), 6);
  auto r = read_ok(p, replica_read(2, 10));
  ASSERT_TRUE(p.update_follower_fetch_state({2, 10, 6, r.log_end_offset, _now}).ok());
  EXPECT_EQ(p.delete_records(6)->low_watermark, 6);
}

// Followers take the leader's log start offset: otherwise a DeleteRecords on a replicated topic never
// completes and the deleted records come back on a new leader.
TEST_F(partition_test, delete_records_completes_once_the_followers_took_the_new_log_start) {
  auto& leader = make();
  auto follower = make_replica(2, "orders-on-2");
  ASSERT_TRUE(leader.make_leader(leader_state({self, 2}, {self, 2}, 1)).ok());
  ASSERT_TRUE(follower->make_follower(partition_state{self, 1, 1, {self, 2}, {self, 2}, 1}).ok());
  append_ok(leader, 5, 1);
  append_ok(leader, 5, 1);
  for (int i = 0; i < 3; ++i) replicate(leader, *follower, 2);
  ASSERT_EQ(follower->log_end_offset(), 10);
  ASSERT_EQ(leader.high_watermark(), 10);
  ASSERT_EQ(follower->high_watermark(), 10);

  auto deleted = leader.delete_records(8);
  ASSERT_TRUE(deleted.ok()) << deleted.error().message;
  EXPECT_EQ(deleted->low_watermark, 0);  // the follower still has offset 0: the request waits
  int woken = 0;
  leader.add_data_waiter([&](error_code) { ++woken; });
  replicate(leader, *follower, 2);  // the answer carries log start 8; the follower takes it
  EXPECT_EQ(follower->log_start_offset(), 8);
  EXPECT_EQ(woken, 0);
  replicate(leader, *follower, 2);  // its next fetch reports it: the low watermark reaches 8
  EXPECT_EQ(woken, 1);
  EXPECT_EQ(leader.delete_records(8)->low_watermark, 8);

  // The follower becomes leader: the deleted records stay deleted.
  ASSERT_TRUE(follower->make_leader(partition_state{2, 2, 2, {self, 2}, {2}, 1}).ok());
  auto earliest =
      follower->list_offset(storage::earliest_timestamp, isolation_level::read_uncommitted, std::nullopt);
  ASSERT_TRUE(earliest.ok()) << earliest.error().message;
  EXPECT_EQ(earliest->found->offset, 8);
  auto old = follower->read(consumer_read(7));
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.error().code, error_code::offset_out_of_range);
}

TEST_F(partition_test, a_follower_raises_its_log_start_up_to_its_high_watermark_only) {
  auto& p = make();
  ASSERT_TRUE(p.make_follower(partition_state{2, 1, 1, {self, 2}, {self, 2}, 1}).ok());
  auto batch = make_batch(10);
  ASSERT_TRUE(p.append_as_follower(batch).ok());
  p.update_high_watermark_from_leader(6);
  ASSERT_TRUE(p.update_log_start_offset_from_leader(8).ok());
  EXPECT_EQ(p.log_start_offset(), 6);  // bounded by the high watermark; the rest at a later fetch
  p.update_high_watermark_from_leader(10);
  ASSERT_TRUE(p.update_log_start_offset_from_leader(8).ok());
  EXPECT_EQ(p.log_start_offset(), 8);
  ASSERT_TRUE(p.update_log_start_offset_from_leader(3).ok());  // never lowered
  EXPECT_EQ(p.log_start_offset(), 8);
  // Kept by the log-start-offset checkpoint: a restart (even a crash after the checkpoint) starts at 8.
  ASSERT_TRUE(_logs->checkpoint_log_start_offsets().ok());
  _partition.reset();
  _logs.reset();
  storage::log_manager_options o;
  o.dirs = {_root / "data"};
  o.clock_ms = [this] { return _now; };
  auto reopened = storage::log_manager::open(std::move(o));
  ASSERT_TRUE(reopened.ok()) << reopened.error().message;
  _logs = std::move(*reopened);
  ASSERT_NE(_logs->get({"orders", 0}), nullptr);
  EXPECT_EQ(_logs->get({"orders", 0})->log_start_offset(), 8);
}

TEST_F(partition_test, a_leader_ignores_a_log_start_from_a_leader) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 1)).ok());
  append_ok(p, 4, 1);
  ASSERT_TRUE(p.update_log_start_offset_from_leader(3).ok());
  EXPECT_EQ(p.log_start_offset(), 0);
}

// Kafka's lowWatermarkIfLeader counts the replicas on live brokers: a follower that died stops holding the
// DeleteRecords back once the controller fences it (seen by the leader's next ISR check), not never.
TEST_F(partition_test, delete_records_stops_waiting_for_a_fenced_follower) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2, 3}, {self, 2, 3}, 2)).ok());
  append_ok(p, 10, 1);
  follower_fetches(p, 2, 10);
  follower_fetches(p, 3, 10);
  ASSERT_EQ(p.high_watermark(), 10);
  auto deleted = p.delete_records(8);
  ASSERT_TRUE(deleted.ok()) << deleted.error().message;
  EXPECT_EQ(deleted->low_watermark, 0);
  int woken = 0;
  p.add_data_waiter([&](error_code) { ++woken; });
  auto r = read_ok(p, replica_read(2, 10));
  ASSERT_TRUE(p.update_follower_fetch_state({2, 10, 8, r.log_end_offset, _now}).ok());
  EXPECT_EQ(woken, 0);  // replica 3 (dead, not fenced yet) still reported 0
  EXPECT_EQ(p.delete_records(8)->low_watermark, 0);
  EXPECT_FALSE(p.propose_isr_change(_now, everyone));
  EXPECT_EQ(woken, 0);
  EXPECT_FALSE(p.propose_isr_change(_now, [](int32_t id) { return id != 3; }));  // 3 is fenced
  EXPECT_EQ(woken, 1);  // the parked DeleteRecords re-checks
  EXPECT_EQ(p.delete_records(8)->low_watermark, 8);
}

// After a leader change the new leader knows no follower's log start until each fetches (Kafka resets the
// replica state): a live follower holds the low watermark until then.
TEST_F(partition_test, a_new_leader_waits_for_each_live_follower_to_report_its_log_start) {
  auto& p = make();
  // Replica 2 is out of the ISR (the high watermark moves without it) but its broker is alive.
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self}, 1)).ok());
  append_ok(p, 10, 1);
  ASSERT_EQ(p.high_watermark(), 10);
  EXPECT_EQ(p.delete_records(4)->low_watermark, -1);
  auto r = read_ok(p, replica_read(2, 10));
  ASSERT_TRUE(p.update_follower_fetch_state({2, 10, 4, r.log_end_offset, _now}).ok());
  EXPECT_EQ(p.delete_records(4)->low_watermark, 4);
}

TEST_F(partition_test, delete_records_refused_on_compacted_topic) {
  storage::log_config config;
  config.cleanup = storage::cleanup_policy::compact;
  auto& p = make(config);
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 1)).ok());
  // A compacted topic takes keyed records only (Kafka's LogValidator).
  const std::string key = "key";
  const std::span<const uint8_t> key_bytes(reinterpret_cast<const uint8_t*>(key.data()), key.size());
  protocol::record_batch_builder keyed;
  keyed.add(start_ms, key_bytes, key_bytes).add(start_ms, key_bytes, key_bytes);
  auto bytes = keyed.build();
  ASSERT_TRUE(p.append(bytes, 1).ok());
  auto r = p.delete_records(1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, error_code::policy_violation);
}

TEST_F(partition_test, follower_appends_and_takes_the_leader_high_watermark) {
  auto& p = make();
  ASSERT_TRUE(p.make_follower(partition_state{2, 1, 1, {self, 2}, {self, 2}, 1}).ok());
  auto batch = make_batch(4);
  // A leader stamps base offset 0 in place; the builder's batch already starts at 0.
  auto appended = p.append_as_follower(batch);
  ASSERT_TRUE(appended.ok()) << appended.error().message;
  EXPECT_EQ(p.log_end_offset(), 4);
  p.update_high_watermark_from_leader(2);
  EXPECT_EQ(p.high_watermark(), 2);
  p.update_high_watermark_from_leader(100);  // never past our own end
  EXPECT_EQ(p.high_watermark(), 4);
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self, 2}, 1, 2, 2)).ok());
  EXPECT_FALSE(p.append_as_follower(batch).ok());
}

TEST_F(partition_test, stop_fails_every_waiter) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self, 2}, 1)).ok());
  auto out = append_ok(p, 1, -1);
  std::vector<error_code> fired;
  p.add_high_watermark_waiter(out.required_offset, [&](error_code e) { fired.push_back(e); });
  p.add_data_waiter([&](error_code e) { fired.push_back(e); });
  p.stop();
  EXPECT_EQ(fired, (std::vector<error_code>{error_code::not_leader_or_follower,
                                            error_code::not_leader_or_follower}));
  EXPECT_FALSE(p.is_leader());
}

// ---------------------------------------------------------------------------------------------------------------
// ISR changes proposed by the leader (Partition.maybeShrinkIsr / maybeExpandIsr).

TEST_F(partition_test, a_follower_behind_for_the_lag_time_is_proposed_out_of_the_isr) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2, 3}, {self, 2, 3}, 2)).ok());
  append_ok(p, 4, 1);
  follower_fetches(p, 2, 4);
  follower_fetches(p, 3, 0);
  EXPECT_FALSE(p.propose_isr_change(_now, everyone));  // within replica.lag.time.max.ms: nothing
  _now += 30'001;
  follower_fetches(p, 2, 4);
  auto proposal = p.propose_isr_change(_now, everyone);
  ASSERT_TRUE(proposal);
  EXPECT_EQ(proposal->new_isr, (std::vector<int32_t>{self, 2}));
  EXPECT_EQ(proposal->leader_epoch, 1);
  EXPECT_EQ(proposal->partition_epoch, 1);
  // One change in flight at a time; the ISR the high watermark uses is the committed one until the answer.
  EXPECT_TRUE(p.isr_change_in_flight());
  EXPECT_FALSE(p.propose_isr_change(_now, everyone));
  EXPECT_EQ(p.high_watermark(), 0);
  p.isr_change_answered({error_code::none, 1, 2, {self, 2}, 0}, _now);
  EXPECT_EQ(p.isr(), (std::vector<int32_t>{self, 2}));
  EXPECT_EQ(p.partition_epoch(), 2);
  EXPECT_EQ(p.high_watermark(), 4);  // replica 3 no longer holds it back
}

TEST_F(partition_test, a_caught_up_follower_outside_the_isr_is_proposed_in_when_eligible) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2, 3}, {self, 2}, 2)).ok());
  append_ok(p, 3, 1);
  follower_fetches(p, 2, 3);
  EXPECT_EQ(p.high_watermark(), 3);
  follower_fetches(p, 3, 1);  // below the high watermark: not in sync yet
  EXPECT_FALSE(p.propose_isr_change(_now, everyone));
  follower_fetches(p, 3, 3);
  EXPECT_FALSE(p.propose_isr_change(_now, [](int32_t id) { return id != 3; }));  // fenced: not eligible
  auto proposal = p.propose_isr_change(_now, everyone);
  ASSERT_TRUE(proposal);
  EXPECT_EQ(proposal->new_isr, (std::vector<int32_t>{self, 2, 3}));
  // A refusal that needs new metadata: no new proposal until the metadata moves.
  p.isr_change_answered({error_code::invalid_update_version, 0, 0, {}, 0}, _now);
  EXPECT_FALSE(p.isr_change_in_flight());
  EXPECT_FALSE(p.propose_isr_change(_now, everyone));
  ASSERT_TRUE(p.make_leader(leader_state({self, 2, 3}, {self, 2}, 2, 1, 3)).ok());
  EXPECT_TRUE(p.propose_isr_change(_now, everyone));
}

TEST_F(partition_test, an_ineligible_follower_outside_the_isr_stops_holding_the_high_watermark_back) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self, 2, 3}, {self, 2}, 2)).ok());
  append_ok(p, 2, 1);
  follower_fetches(p, 3, 2);  // caught up outside the ISR: counted (it is about to join)
  follower_fetches(p, 2, 2);
  append_ok(p, 2, 1);
  follower_fetches(p, 2, 4);
  EXPECT_EQ(p.high_watermark(), 2);  // 3 is caught up within the lag time and still at 2
  // 3 shuts down (in controlled shutdown in the metadata): no longer eligible, no longer counted.
  EXPECT_FALSE(p.propose_isr_change(_now, [](int32_t id) { return id != 3; }));
  EXPECT_EQ(p.high_watermark(), 4);
}

TEST_F(partition_test, a_recovering_leader_asks_to_be_recovered) {
  auto& p = make();
  auto state = leader_state({self, 2, 3}, {self}, 1);
  state.leader_recovery_state = 1;
  ASSERT_TRUE(p.make_leader(state).ok());
  follower_fetches(p, 2, 0);
  auto proposal = p.propose_isr_change(_now, everyone);
  ASSERT_TRUE(proposal);
  EXPECT_EQ(proposal->new_isr, (std::vector<int32_t>{self}));  // not expanded while recovering
  EXPECT_EQ(proposal->leader_recovery_state, 0);
  p.isr_change_answered({error_code::none, 1, 2, {self}, 0}, _now);
  EXPECT_EQ(p.leader_recovery_state(), 0);
  auto next = p.propose_isr_change(_now, everyone);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->new_isr, (std::vector<int32_t>{self, 2}));
}

TEST_F(partition_test, a_produced_batch_is_appended_as_checked) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 1)).ok());
  append_ok(p, 2, 1);
  auto bytes = make_batch(3);
  auto produced = validate_produced_records(bytes);
  ASSERT_TRUE(produced.ok()) << produced.error().message;
  auto out = p.append(*produced, -1);
  ASSERT_TRUE(out.appended.ok()) << out.appended.error().message;
  EXPECT_FALSE(out.record_errors);
  EXPECT_EQ(out.appended->appended.first_offset, 2);
  EXPECT_EQ(out.appended->appended.last_offset, 4);
  EXPECT_TRUE(out.appended->done);
  EXPECT_EQ(produced->header.base_offset, 2);
  EXPECT_EQ(p.log_end_offset(), 5);
  EXPECT_EQ(p.high_watermark(), 5);
}

TEST_F(partition_test, a_refused_produced_batch_lists_its_records_at_fault) {
  storage::log_config config;
  config.message_timestamp_after_max_ms = 1000;
  auto& p = make(config);
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 1)).ok());
  _now = start_ms;
  auto bytes = make_batch(3, start_ms);  // timestamps start_ms, +1, +2: all within the bounds
  auto late = make_batch(2, start_ms + 10'000);
  auto produced = validate_produced_records(late);
  ASSERT_TRUE(produced.ok());
  auto out = p.append(*produced, 1);
  ASSERT_FALSE(out.appended.ok());
  EXPECT_EQ(out.appended.error().code, error_code::invalid_timestamp);
  ASSERT_TRUE(out.record_errors);
  ASSERT_EQ(out.record_errors->record_errors.size(), 2u);
  EXPECT_EQ(out.record_errors->record_errors[1].batch_index, 1);
  EXPECT_EQ(p.log_end_offset(), 0);
  auto good = validate_produced_records(bytes);
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(p.append(*good, 1).appended.ok());
}

// ---------------------------------------------------------------------------------------------------------------
// Transactions: last stable offset, markers from the coordinator, read_committed reads.

std::vector<uint8_t> txn_batch(int64_t producer_id, int16_t epoch, int32_t sequence, int records = 1) {
  protocol::record_batch_builder b;
  b.producer(producer_id, epoch, sequence).transactional();
  const std::string value = "value";
  for (int r = 0; r < records; ++r) {
    b.add(start_ms + r, std::nullopt,
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
  }
  return b.build();
}

storage::txn_marker_request marker(int64_t producer_id, bool commit, int32_t coordinator_epoch = 0,
                                   int16_t epoch = 0) {
  return {.producer_id = producer_id,
          .producer_epoch = epoch,
          .commit = commit,
          .coordinator_epoch = coordinator_epoch,
          .transaction_version = 0};
}

TEST_F(partition_test, last_stable_offset_waits_for_open_transactions_and_replicated_markers) {
  auto& p = make();
  auto follower = make_replica(2, "orders-follower");
  ASSERT_TRUE(p.make_leader(leader_state({self, 2}, {self, 2}, 1)).ok());
  ASSERT_TRUE(follower->make_follower({self, 1, 1, {self, 2}, {self, 2}, 1}).ok());
  auto a = txn_batch(1, 0, 0, 2);
  auto b = txn_batch(2, 0, 0);
  ASSERT_TRUE(p.append(a, 1).ok());  // 0-1: producer 1 opens a transaction
  ASSERT_TRUE(p.append(b, 1).ok());  // 2: producer 2 opens one
  append_ok(p, 1, 1);                // 3: outside any transaction
  replicate(p, *follower, 2);
  replicate(p, *follower, 2);
  EXPECT_EQ(p.high_watermark(), 4);
  EXPECT_EQ(p.last_stable_offset(), 0);
  EXPECT_EQ(follower->last_stable_offset(), 0);

  // Producer 1 commits at 4 (acks=all: done once the follower has it).
  auto committed = p.append_txn_marker(marker(1, true));
  ASSERT_TRUE(committed.ok()) << committed.error().message;
  EXPECT_FALSE(committed->done);
  EXPECT_EQ(committed->required_offset, 5);
  bool marker_acked = false;
  p.add_high_watermark_waiter(committed->required_offset, [&](error_code e) {
    EXPECT_EQ(e, error_code::none);
    marker_acked = true;
  });
  // The marker is above the high watermark: the LSO stays at producer 1's first offset until it is not.
  EXPECT_EQ(p.last_stable_offset(), 0);
  int fetch_woken = 0;
  p.add_data_waiter([&](error_code) { ++fetch_woken; });
  replicate(p, *follower, 2);  // the follower fetches the marker
  replicate(p, *follower, 2);  // and reports it: the high watermark passes it
  EXPECT_TRUE(marker_acked);
  EXPECT_EQ(fetch_woken, 1);
  EXPECT_EQ(p.high_watermark(), 5);
  // Producer 2's transaction (first offset 2) is still open.
  EXPECT_EQ(p.last_stable_offset(), 2);
  EXPECT_EQ(follower->last_stable_offset(), 0);  // its high watermark comes with the next fetch
  replicate(p, *follower, 2);
  EXPECT_EQ(follower->last_stable_offset(), 2);
  auto latest = p.list_offset(storage::latest_timestamp, isolation_level::read_committed, std::nullopt);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->found->offset, 2);

  // Producer 2 aborts at 5; once replicated nothing is unstable.
  auto aborted = p.append_txn_marker(marker(2, false));
  ASSERT_TRUE(aborted.ok());
  replicate(p, *follower, 2);
  replicate(p, *follower, 2);
  replicate(p, *follower, 2);
  EXPECT_EQ(p.last_stable_offset(), 6);
  EXPECT_EQ(follower->last_stable_offset(), 6);
  // The follower indexed the abort as the leader did, LSO included.
  const std::vector<storage::aborted_txn> expected{{2, 2, 5, 6}};
  EXPECT_EQ(*p.log().collect_aborted_transactions(0, 6), expected);
  EXPECT_EQ(*follower->log().collect_aborted_transactions(0, 6), expected);
}

TEST_F(partition_test, verification_guard_waits_for_the_previous_transaction_of_a_v2_producer) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 1)).ok());
  auto a = txn_batch(1, 0, 0);
  ASSERT_TRUE(p.append(a, 1).ok());  // producer 1 opens a transaction at epoch 0
  // Its next transaction (transactions v2: bumped epoch 1) arrives before the marker of the first: no guard,
  // CONCURRENT_TRANSACTIONS, since the marker would clear a guard taken now after the coordinator verified
  // it.
  auto early = p.create_verification_guard(1, 0, 1, true);
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.error().code, error_code::concurrent_transactions);
  // Without the epoch bump (transactions v1 verification) the guard is handed out as before.
  auto v1 = p.create_verification_guard(1, 0, 1, false);
  ASSERT_TRUE(v1.ok());
  EXPECT_NE(*v1, 0u);
  // An epoch below the producer's: INVALID_PRODUCER_EPOCH at once.
  auto b = txn_batch(2, 3, 0);
  ASSERT_TRUE(p.append(b, 1).ok());
  auto stale = p.create_verification_guard(2, 1, 2, true);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, error_code::invalid_producer_epoch);
  // Once the marker is written (v2 markers carry the bumped epoch), the next transaction gets its guard.
  storage::txn_marker_request done = marker(1, true, 0, 1);
  done.transaction_version = 2;
  ASSERT_TRUE(p.append_txn_marker(done).ok());
  auto later = p.create_verification_guard(1, 0, 1, true);
  ASSERT_TRUE(later.ok());
  EXPECT_NE(*later, 0u);
  // Its own open transaction at the same epoch needs no guard.
  EXPECT_EQ(*p.create_verification_guard(2, 1, 3, true), 0u);
}

TEST_F(partition_test, a_verified_coordinator_write_opens_a_transaction_only_with_its_guard) {
  // A TxnOffsetCommit's write to __consumer_offsets (append_origin::coordinator) with the guard its handler
  // took before the transaction coordinator vouched for the partition.
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 1)).ok());
  const auto coordinator = storage::append_origin::coordinator;
  auto guard = p.create_verification_guard(1, protocol::no_sequence, 0, false);
  ASSERT_TRUE(guard.ok());
  ASSERT_NE(*guard, 0u);
  // The transaction ends between the answer and the append (an abort marker clears the guard): refused.
  ASSERT_TRUE(p.append_txn_marker(marker(1, false)).ok());
  auto late = txn_batch(1, 0, 0);
  auto refused = p.append(late, -1, coordinator, *guard);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, error_code::invalid_txn_state);
  // A fresh guard: written, and the producer's transaction is open (the next write needs guard 0 only).
  auto fresh = p.create_verification_guard(1, protocol::no_sequence, 0, false);
  ASSERT_TRUE(fresh.ok());
  auto first = txn_batch(1, 0, 0);
  ASSERT_TRUE(p.append(first, -1, coordinator, *fresh).ok());
  EXPECT_EQ(*p.create_verification_guard(1, protocol::no_sequence, 0, false), 0u);
  auto second = txn_batch(1, 0, 0);
  EXPECT_TRUE(p.append(second, -1, coordinator, uint64_t{0}).ok());
  // Unverified writes (verification off) are not checked.
  auto other = txn_batch(2, 0, 0);
  EXPECT_TRUE(p.append(other, -1, coordinator).ok());
}

TEST_F(partition_test, read_committed_reads_stop_at_the_lso_and_list_aborted_transactions) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 1)).ok());
  auto a = txn_batch(1, 0, 0, 2);
  ASSERT_TRUE(p.append(a, 1).ok());                         // 0-1
  ASSERT_TRUE(p.append_txn_marker(marker(1, false)).ok());  // 2: abort
  auto b = txn_batch(2, 0, 0);
  ASSERT_TRUE(p.append(b, 1).ok());  // 3: open
  append_ok(p, 1, 1);                // 4
  EXPECT_EQ(p.high_watermark(), 5);
  EXPECT_EQ(p.last_stable_offset(), 3);

  auto committed = read_ok(p, consumer_read(0, isolation_level::read_committed));
  EXPECT_EQ(committed.last_stable_offset, 3);
  ASSERT_TRUE(committed.data);
  auto bytes = committed.data->file->read(committed.data->position, committed.data->size);
  ASSERT_TRUE(bytes.ok());
  int64_t last = -1;
  protocol::batch_splitter splitter(*bytes);
  while (auto batch = splitter.next()) last = protocol::parse_batch_header(*batch)->last_offset();
  EXPECT_EQ(last, 2);  // nothing at or past the LSO
  ASSERT_TRUE(committed.aborted_transactions);
  EXPECT_EQ(*committed.aborted_transactions, (std::vector<storage::aborted_txn>{{1, 0, 2, 3}}));

  auto uncommitted = read_ok(p, consumer_read(0));
  EXPECT_FALSE(uncommitted.aborted_transactions);
  // Past the aborted transaction: nothing to list.
  auto after = read_ok(p, consumer_read(3, isolation_level::read_committed));
  EXPECT_FALSE(after.data);
  ASSERT_TRUE(after.aborted_transactions);
  EXPECT_TRUE(after.aborted_transactions->empty());

  // DescribeProducers: producer 2's open transaction, producer 1's coordinator epoch.
  auto producers = p.describe_producers();
  ASSERT_TRUE(producers.ok());
  ASSERT_EQ(producers->size(), 2u);
  EXPECT_EQ((*producers)[0].producer_id, 1);
  EXPECT_EQ((*producers)[0].current_txn_start_offset, -1);
  EXPECT_EQ((*producers)[1].producer_id, 2);
  EXPECT_EQ((*producers)[1].current_txn_start_offset, 3);
  EXPECT_EQ((*producers)[1].last_sequence, 0);
}

TEST_F(partition_test, refused_markers_write_nothing) {
  auto& p = make();
  ASSERT_TRUE(p.make_leader(leader_state({self}, {self}, 1)).ok());
  auto a = txn_batch(1, 3, 0);
  ASSERT_TRUE(p.append(a, 1).ok());
  ASSERT_TRUE(p.append_txn_marker(marker(1, true, /*coordinator_epoch=*/4, /*epoch=*/3)).ok());
  const int64_t end = p.log_end_offset();
  auto stale = p.append_txn_marker(marker(1, false, 3, 3));
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, error_code::transaction_coordinator_fenced);
  auto old_epoch = p.append_txn_marker(marker(1, false, 4, 2));
  ASSERT_FALSE(old_epoch.ok());
  EXPECT_EQ(old_epoch.error().code, error_code::invalid_producer_epoch);
  EXPECT_EQ(p.log_end_offset(), end);
  // A producer with an open transaction may not write outside it.
  auto open_again = txn_batch(1, 3, 1);
  ASSERT_TRUE(p.append(open_again, 1).ok());
  auto plain =
      protocol::record_batch_builder().producer(1, 3, 2).add(start_ms, std::nullopt, std::nullopt).build();
  auto refused = p.append(plain, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, error_code::invalid_txn_state);
  // Only the leader writes markers.
  ASSERT_TRUE(p.make_follower({2, 2, 2, {self, 2}, {self, 2}, 1}).ok());
  auto not_leader = p.append_txn_marker(marker(1, false, 4, 3));
  ASSERT_FALSE(not_leader.ok());
  EXPECT_EQ(not_leader.error().code, error_code::not_leader_or_follower);
}

}  // namespace
}  // namespace mala::replication
