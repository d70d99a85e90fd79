// Topic config changes reaching hosted replicas through replica_manager::apply_leadership (the metadata
// publisher calls it with the new effective config, with or without a partition state change): the log takes
// the new config at once, also a log the log manager loaded at start-up with the broker defaults, and
// min.insync.replicas applies to the next acks=all produce.
#include <gtest/gtest.h>

#include <vector>

#include "mala/replication/replica_manager.h"
#include "replication_test_util.h"

namespace mala::replication {
namespace {

using testing::make_batch;

constexpr int32_t self = 1;

class live_config_test : public testing::log_dir_fixture {
 protected:
  replica_manager make_manager() {
    replica_manager_options o;
    o.local_replica_id = self;
    o.clock_ms = [this] { return _now; };
    return replica_manager(*_logs, std::move(o));
  }

  static partition_leadership leadership(int32_t leader, std::vector<int32_t> replicas,
                                         std::vector<int32_t> isr) {
    partition_leadership l;
    l.topic = "orders";
    l.partition = 0;
    l.topic_id = topic_id;
    l.state = partition_state{leader, 1, 1, std::move(replicas), std::move(isr), 1};
    return l;
  }

  // segment.bytes of one batch: every append rolls first (a smaller value refuses the batch).
  static int32_t batch_size() { return static_cast<int32_t>(make_batch(1).size()); }

  static inline const uuid topic_id = uuid::random();
  static inline const storage::topic_partition tp{"orders", 0};
};

TEST_F(live_config_test, a_log_loaded_at_start_up_takes_the_topic_config) {
  {
    // As log_manager::open loads it: the broker defaults, the topic's configs not known yet.
    auto created = _logs->create(tp, topic_id, storage::log_config{});
    ASSERT_TRUE(created.ok());
    auto bytes = make_batch(5);
    ASSERT_TRUE((*created)->append_as_leader(bytes, 0).ok());
  }
  auto m = make_manager();
  auto l = leadership(self, {self}, {self});
  l.log_config.segment_bytes = batch_size();  // one batch per segment
  l.log_config.retention_ms = 1000;
  ASSERT_TRUE(m.apply_leadership(l).ok());
  auto* p = m.get(tp);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->log().config().segment_bytes, batch_size());
  EXPECT_EQ(p->log().config().retention_ms, 1000);
  auto bytes = make_batch(1);
  ASSERT_TRUE(p->append(bytes, 1).ok());
  EXPECT_EQ(p->log().segment_count(), 2u);
}

TEST_F(live_config_test, segment_bytes_reaches_the_active_segment_of_leader_and_follower) {
  auto m = make_manager();
  auto l = leadership(self, {self}, {self});
  ASSERT_TRUE(m.apply_leadership(l).ok());
  auto* p = m.get(tp);
  for (int i = 0; i < 3; ++i) {
    auto bytes = make_batch(1);
    ASSERT_TRUE(p->append(bytes, 1).ok());
  }
  ASSERT_EQ(p->log().segment_count(), 1u);

  // Only the config changes: same partition epoch, same state (the publisher calls in both cases).
  l.log_config.segment_bytes = batch_size();
  ASSERT_TRUE(m.apply_leadership(l).ok());
  auto bytes = make_batch(1);
  ASSERT_TRUE(p->append(bytes, 1).ok());
  EXPECT_EQ(p->log().segment_count(), 2u);

  // A follower gets it too.
  auto f = leadership(2, {self, 2}, {self, 2});
  f.topic = "payments";
  ASSERT_TRUE(m.apply_leadership(f).ok());
  auto* follower = m.get({"payments", 0});
  ASSERT_NE(follower, nullptr);
  auto replicated = make_batch(1);
  ASSERT_TRUE(follower->append_as_follower(replicated).ok());
  f.log_config.segment_bytes = batch_size();
  ASSERT_TRUE(m.apply_leadership(f).ok());
  auto next = make_batch(1);
  protocol::stamp_base_offset(next, 1);
  ASSERT_TRUE(follower->append_as_follower(next).ok());
  EXPECT_EQ(follower->log().segment_count(), 2u);
}

TEST_F(live_config_test, min_insync_replicas_applies_to_the_next_acks_all_produce) {
  auto m = make_manager();
  auto l = leadership(self, {self, 2, 3}, {self, 2});
  l.state.min_insync_replicas = 2;
  ASSERT_TRUE(m.apply_leadership(l).ok());
  auto* p = m.get(tp);
  auto bytes = make_batch(1);
  ASSERT_TRUE(p->append(bytes, -1).ok());

  // Raised above the ISR (2 of 3): acks=all is refused before anything is written; acks=1 still appends.
  l.state.min_insync_replicas = 3;
  ASSERT_TRUE(m.apply_leadership(l).ok());
  EXPECT_EQ(p->min_insync_replicas(), 3);
  EXPECT_TRUE(p->under_min_isr());
  const int64_t end = p->log_end_offset();
  bytes = make_batch(1);
  auto refused = p->append(bytes, -1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, error_code::not_enough_replicas);
  EXPECT_EQ(p->log_end_offset(), end);
  bytes = make_batch(1);
  ASSERT_TRUE(p->append(bytes, 1).ok());

  // Lowered again.
  l.state.min_insync_replicas = 1;
  ASSERT_TRUE(m.apply_leadership(l).ok());
  EXPECT_FALSE(p->under_min_isr());
  bytes = make_batch(1);
  ASSERT_TRUE(p->append(bytes, -1).ok());
}

}  // namespace
}  // namespace mala::replication
