#include "mala/replication/replica_manager.h"

#include <gtest/gtest.h>

#include <vector>

#include "replication_test_util.h"

namespace mala::replication {
namespace {

using testing::make_batch;

constexpr int32_t self = 1;

class replica_manager_test : public testing::log_dir_fixture {
 protected:
  replica_manager make_manager() {
    replica_manager_options o;
    o.local_replica_id = self;
    o.clock_ms = [this] { return _now; };
    return replica_manager(*_logs, std::move(o));
  }

  static partition_leadership leadership(const std::string& topic, int32_t partition, int32_t leader,
                                         int32_t leader_epoch = 1, int32_t partition_epoch = 1,
                                         std::vector<int32_t> isr = {self, 2}, int32_t min_isr = 1) {
    partition_leadership l;
    l.topic = topic;
    l.partition = partition;
    l.topic_id = topic_id;
    l.state = partition_state{leader, leader_epoch, partition_epoch, {self, 2}, std::move(isr), min_isr};
    return l;
  }

  static inline const uuid topic_id = uuid::random();
};

TEST_F(replica_manager_test, creates_logs_and_takes_the_role_the_metadata_gives) {
  replica_manager m(*_logs, {self, 30'000, [this] { return _now; }, nullptr});
  auto led = m.apply_leadership(leadership("orders", 0, self));
  ASSERT_TRUE(led.ok()) << led.error().message;
  EXPECT_EQ(*led, state_change::applied);
  auto followed = m.apply_leadership(leadership("orders", 1, 2));
  ASSERT_TRUE(followed.ok()) << followed.error().message;

  ASSERT_NE(_logs->get({"orders", 0}), nullptr);
  ASSERT_NE(_logs->get({"orders", 1}), nullptr);
  auto* p0 = m.get({"orders", 0});
  auto* p1 = m.get({"orders", 1});
  ASSERT_NE(p0, nullptr);
  ASSERT_NE(p1, nullptr);
  EXPECT_TRUE(p0->is_leader());
  EXPECT_FALSE(p1->is_leader());
  EXPECT_EQ(p1->leader_id(), 2);
  EXPECT_EQ(&p0->log(), _logs->get({"orders", 0}));
  EXPECT_EQ(p0->topic_id(), topic_id);
  EXPECT_EQ(m.get({"orders", 2}), nullptr);
  EXPECT_EQ(m.partitions(), (std::vector<storage::topic_partition>{{"orders", 0}, {"orders", 1}}));
  EXPECT_EQ(m.size(), 2u);

  auto bytes = make_batch(2);
  ASSERT_TRUE(p0->append(bytes, 1).ok());
  auto on_follower = p1->append(bytes, 1);
  ASSERT_FALSE(on_follower.ok());
  EXPECT_EQ(on_follower.error().code, error_code::not_leader_or_follower);

  // Leadership moves: the same partition object changes role; a stale update is ignored.
  ASSERT_TRUE(m.apply_leadership(leadership("orders", 0, 2, 2, 2)).ok());
  EXPECT_FALSE(p0->is_leader());
  ASSERT_TRUE(m.apply_leadership(leadership("orders", 1, self, 2, 2)).ok());
  EXPECT_TRUE(p1->is_leader());
  EXPECT_EQ(p1->log().epochs().latest()->epoch, 2);
  auto stale = m.apply_leadership(leadership("orders", 1, 2, 3, 1));
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(*stale, state_change::stale);
  EXPECT_TRUE(p1->is_leader());
}

TEST_F(replica_manager_test, existing_logs_are_reused_with_their_data) {
  {
    auto created = _logs->create({"orders", 0}, topic_id, {});
    ASSERT_TRUE(created.ok());
    auto bytes = make_batch(5);
    ASSERT_TRUE((*created)->append_as_leader(bytes, 0).ok());
  }
  replica_manager_options o;
  o.local_replica_id = self;
  o.checkpointed_high_watermark = [](const storage::topic_partition&) { return std::optional<int64_t>(3); };
  replica_manager m(*_logs, o);
  ASSERT_TRUE(m.apply_leadership(leadership("orders", 0, self, 1, 1, {self, 2})).ok());
  auto* p = m.get({"orders", 0});
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->log_end_offset(), 5);
  // The checkpointed high watermark survives; follower 2 has not fetched yet, so it does not move.
  EXPECT_EQ(p->high_watermark(), 3);
}

TEST_F(replica_manager_test, topic_configs_are_applied_to_existing_logs) {
  auto m = make_manager();
  auto l = leadership("orders", 0, self);
  ASSERT_TRUE(m.apply_leadership(l).ok());
  l.log_config.max_message_bytes = 100;
  l.state.partition_epoch = 2;
  ASSERT_TRUE(m.apply_leadership(l).ok());
  EXPECT_EQ(m.get({"orders", 0})->log().config().max_message_bytes, 100);
}

TEST_F(replica_manager_test, remove_partition_stops_waiters_and_deletes_the_log) {
  auto m = make_manager();
  ASSERT_TRUE(m.apply_leadership(leadership("orders", 0, self)).ok());
  ASSERT_TRUE(m.apply_leadership(leadership("orders", 1, self)).ok());
  auto* p = m.get({"orders", 0});
  auto bytes = make_batch(1);
  auto out = p->append(bytes, -1);
  ASSERT_TRUE(out.ok());
  ASSERT_FALSE(out->done);  // follower 2 is in the ISR and has not fetched
  std::vector<error_code> fired;
  p->add_high_watermark_waiter(out->required_offset, [&](error_code e) { fired.push_back(e); });
  p->add_data_waiter([&](error_code e) { fired.push_back(e); });

  ASSERT_TRUE(m.remove_partition({"orders", 0}).ok());
  EXPECT_EQ(fired, (std::vector<error_code>{error_code::not_leader_or_follower,
                                            error_code::not_leader_or_follower}));
  EXPECT_EQ(m.get({"orders", 0}), nullptr);
  EXPECT_EQ(_logs->get({"orders", 0}), nullptr);

  // Without deleting the log: the replica goes, the data stays.
  ASSERT_TRUE(m.remove_partition({"orders", 1}, false).ok());
  EXPECT_EQ(m.get({"orders", 1}), nullptr);
  EXPECT_NE(_logs->get({"orders", 1}), nullptr);

  auto unknown = m.remove_partition({"orders", 9});
  EXPECT_EQ(unknown.code, error_code::unknown_topic_or_partition);
}

TEST_F(replica_manager_test, a_different_topic_id_is_refused) {
  auto m = make_manager();
  ASSERT_TRUE(m.apply_leadership(leadership("orders", 0, self)).ok());
  auto other = leadership("orders", 0, self, 2, 2);
  other.topic_id = uuid::random();
  auto r = m.apply_leadership(other);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, error_code::inconsistent_topic_id);
}

TEST_F(replica_manager_test, counts_under_replicated_and_under_min_isr_partitions) {
  auto m = make_manager();
  ASSERT_TRUE(m.apply_leadership(leadership("orders", 0, self, 1, 1, {self, 2}, 2)).ok());
  ASSERT_TRUE(m.apply_leadership(leadership("orders", 1, self, 1, 1, {self}, 2)).ok());
  ASSERT_TRUE(m.apply_leadership(leadership("orders", 2, self, 1, 1, {self}, 1)).ok());
  ASSERT_TRUE(
      m.apply_leadership(leadership("orders", 3, 2, 1, 1, {2}, 2)).ok());  // followers are not counted
  EXPECT_EQ(m.under_replicated_count(), 2);
  EXPECT_EQ(m.under_min_isr_count(), 1);
}

}  // namespace
}  // namespace mala::replication
