// Broker lifecycle on the active controller, as Kafka 4.x's ClusterControlManager / BrokerHeartbeatManager /
// ReplicationControlManager run it: registration fenced until caught up, heartbeats
// (stale epochs, unfencing, WantFence, controlled shutdown with ShouldShutDown), session expiry moving
// leadership and shrinking ISRs, the last ISR member kept with no leader, leaders restored on unfencing, the
// grace after a controller failover; and the pure state machine of broker_heartbeat_manager.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "mala/controller/broker_heartbeat_manager.h"
#include "mala/controller/quorum_controller.h"
#include "mala/metadata/metadata_delta.h"
#include "support/active_controller.h"
#include "support/local_metadata_log.h"

namespace mala::controller {
namespace {

namespace fs = std::filesystem;

// --- The pure state machine (BrokerHeartbeatManager.calculateNextBrokerState)

TEST(next_broker_state, follows_kafkas_transitions) {
  using enum broker_control_state;
  auto next = [](broker_control_state s, heartbeat_facts f) { return next_broker_state(s, f); };
  EXPECT_EQ(next(fenced, {.caught_up = false}), fenced);
  EXPECT_EQ(next(fenced, {.caught_up = true}), unfenced);
  EXPECT_EQ(next(fenced, {.want_fence = true, .caught_up = true}), fenced);
  EXPECT_EQ(next(fenced, {.want_shut_down = true, .has_leaderships = true}), shutdown_now);
  EXPECT_EQ(next(unfenced, {}), unfenced);
  EXPECT_EQ(next(unfenced, {.want_fence = true}), fenced);
  EXPECT_EQ(next(unfenced, {.want_fence = true, .want_shut_down = true}), shutdown_now);
  EXPECT_EQ(next(unfenced, {.want_shut_down = true, .has_leaderships = true}), controlled_shutdown);
  EXPECT_EQ(next(unfenced, {.want_shut_down = true, .has_leaderships = false}), shutdown_now);
  EXPECT_EQ(next(controlled_shutdown, {.has_leaderships = true, .shutdown_offset_reached = true}),
            controlled_shutdown);
  EXPECT_EQ(next(controlled_shutdown, {.shutdown_offset_reached = false}), controlled_shutdown);
  EXPECT_EQ(next(controlled_shutdown, {.shutdown_offset_reached = true}), shutdown_now);
  EXPECT_TRUE(is_fenced(shutdown_now));
  EXPECT_TRUE(should_shut_down(shutdown_now));
  EXPECT_FALSE(is_fenced(controlled_shutdown));
}

TEST(broker_heartbeat_manager, sessions_expire_oldest_first_and_unknown_brokers_get_a_grace) {
  broker_heartbeat_manager m(1000);
  m.touch(1, 100, 5, false);
  m.touch(2, 50, 5, false);
  EXPECT_TRUE(m.stale_brokers({1, 2}, 1050).empty());  // valid while last contact + timeout >= now
  EXPECT_EQ(m.stale_brokers({1, 2}, 1051), (std::vector<int32_t>{2}));
  EXPECT_EQ(m.stale_brokers({1, 2}, 1101), (std::vector<int32_t>{2, 1}));
  // Broker 3 was never seen: its session starts at this check.
  EXPECT_TRUE(m.stale_brokers({3}, 5000).empty());
  EXPECT_EQ(m.stale_brokers({3}, 6001), (std::vector<int32_t>{3}));
  m.reset({1, 2, 3}, 10000);
  EXPECT_TRUE(m.stale_brokers({1, 2, 3}, 11000).empty());
  EXPECT_EQ(m.lowest_offset({1, 2}), -1);  // nothing reported since the reset
  EXPECT_EQ(m.lowest_offset({}), std::numeric_limits<int64_t>::max());
}

TEST(broker_heartbeat_manager, controlled_shutdown_offset_is_set_once_and_cleared_by_fencing) {
  broker_heartbeat_manager m(1000);
  m.touch(1, 0, 3, false);
  EXPECT_FALSE(m.in_controlled_shutdown(1));
  m.maybe_set_controlled_shutdown_offset(1, 10);
  m.maybe_set_controlled_shutdown_offset(1, 12);
  EXPECT_EQ(m.controlled_shutdown_offset(1), 10);
  m.touch(1, 5, 11, false);
  EXPECT_EQ(m.controlled_shutdown_offset(1), 10);
  m.touch(1, 6, 11, true);
  EXPECT_FALSE(m.in_controlled_shutdown(1));
  m.maybe_set_controlled_shutdown_offset(1, 20);
  m.fenced(1);
  EXPECT_FALSE(m.in_controlled_shutdown(1));
}

// --- On the controller

class broker_lifecycle_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _dir =
        fs::temp_directory_path() / ("mala-broker-lifecycle-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_dir);
  }
  void TearDown() override {
    _controller.reset();
    fs::remove_all(_dir);
  }

  void open() {
    auto log = local_metadata_log::open(_dir);
    ASSERT_TRUE(log.ok()) << log.error().message;
    controller_options o;
    o.node_id = 1;
    o.cluster_id = "mala-test-cluster-id0";
    o.placement_seed = 42;
    o.broker_session_timeout_ms = 9000;
    o.leader_imbalance_check_interval_ms = 300'000;
    auto c = open_active_controller(std::move(*log), std::move(o));
    ASSERT_TRUE(c.ok()) << c.error().message;
    _controller = std::move(*c);
  }

  const metadata::metadata_image& image() { return *_controller->image(); }
  int64_t end_offset() { return image().metadata_offset + 1; }
  const metadata::broker_registration& broker(int32_t id) { return image().brokers.at(id); }
  const metadata::partition_state& partition(const std::string& topic, int32_t p) {
    return image().find_topic(topic)->partitions.at(static_cast<size_t>(p));
  }

  int64_t register_broker(int32_t id) {
    metadata::broker_registration b;
    b.id = id;
    b.incarnation_id = uuid::random();
    b.endpoints.push_back({"PLAINTEXT", "localhost", static_cast<uint16_t>(9092 + id), "PLAINTEXT"});
    b.supported_features["metadata.version"] = {7, 33};
    b.supported_features["transaction.version"] = {0, 2};
    auto r = _controller->register_broker(b);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    if (r.ok()) _epochs[id] = *r;
    return r.ok() ? *r : -1;
  }

  protocol::broker_heartbeat_response heartbeat(int32_t id, int64_t now_ms,
                                                std::optional<int64_t> offset = {}, bool want_fence = false,
                                                bool want_shut_down = false) {
    protocol::broker_heartbeat_request r;
    r.broker_id = id;
    r.broker_epoch = _epochs.at(id);
    r.current_metadata_offset = offset.value_or(end_offset() - 1);  // caught up by default
    r.want_fence = want_fence;
    r.want_shut_down = want_shut_down;
    return _controller->broker_heartbeat(r, now_ms);
  }

  // Registers and unfences brokers 1..n (heartbeats at now_ms).
  void start_brokers(int32_t n, int64_t now_ms = 0) {
    for (int32_t id = 1; id <= n; ++id) register_broker(id);
    for (int32_t id = 1; id <= n; ++id) ASSERT_FALSE(heartbeat(id, now_ms).is_fenced);
  }

  void create(const std::string& name, const std::vector<std::vector<int32_t>>& assignment,
              std::optional<int32_t> min_isr = {}) {
    protocol::create_topics_request request;
    protocol::create_topics_request::creatable_topic t;
    t.name = name;
    t.num_partitions = -1;
    t.replication_factor = -1;
    if (min_isr) {
      protocol::create_topics_request::creatable_topic_config c;
      c.name = "min.insync.replicas";
      c.value = std::to_string(*min_isr);
      t.configs.push_back(c);
    }
    for (size_t p = 0; p < assignment.size(); ++p) {
      protocol::create_topics_request::creatable_replica_assignment a;
      a.partition_index = static_cast<int32_t>(p);
      a.broker_ids = assignment[p];
      t.assignments.push_back(a);
    }
    request.topics.push_back(t);
    auto response = _controller->create_topics(request, 7);
    ASSERT_EQ(response.topics.size(), 1u);
    ASSERT_EQ(response.topics[0].error_code, 0) << response.topics[0].error_message.value_or("");
  }

  // The partition's leader shrinks (or expands) its ISR with AlterPartition v3.
  void alter_isr(const std::string& topic, int32_t index, const std::vector<int32_t>& isr) {
    const metadata::partition_state p = partition(topic, index);  // a copy: the write publishes a new image
    protocol::alter_partition_request req;
    req.broker_id = p.leader;
    req.broker_epoch = _epochs.at(p.leader);
    auto& t = req.topics.emplace_back();
    t.topic_id = image().find_topic(topic)->id;
    auto& data = t.partitions.emplace_back();
    data.partition_index = index;
    data.leader_epoch = p.leader_epoch;
    data.partition_epoch = p.partition_epoch;
    for (int32_t id : isr) data.new_isr_with_epochs.push_back({id, _epochs.at(id)});
    auto resp = _controller->alter_partition(req, 3);
    ASSERT_EQ(resp.error_code, 0);
    ASSERT_EQ(resp.topics.at(0).partitions.at(0).error_code, 0);
    ASSERT_EQ(partition(topic, index).isr, isr);
  }

  // A broker killed with SIGKILL starts again: a new incarnation without clean-shutdown markers (previous
  // broker epoch -1), registered once the controller has fenced its old session, then a caught-up heartbeat.
  void restart_after_crash(int32_t id, int64_t now_ms) {
    metadata::broker_registration b = broker(id);
    b.incarnation_id = uuid::random();
    auto r = _controller->register_broker(b, /*previous_broker_epoch=*/-1, now_ms);
    ASSERT_TRUE(r.ok()) << r.error().message;
    _epochs[id] = *r;
    ASSERT_FALSE(heartbeat(id, now_ms).is_fenced);
  }

  fs::path _dir;
  std::unique_ptr<quorum_controller> _controller;
  std::map<int32_t, int64_t> _epochs;
};

TEST_F(broker_lifecycle_test, registration_stays_fenced_until_a_caught_up_heartbeat) {
  open();
  const int64_t before = end_offset();
  const int64_t epoch = register_broker(1);
  EXPECT_EQ(epoch, before);
  EXPECT_EQ(end_offset(), before + 1);  // the RegisterBrokerRecord only
  EXPECT_TRUE(broker(1).fenced);

  // Behind its own registration: still fenced, nothing written.
  auto r = heartbeat(1, 0, epoch - 1);
  EXPECT_EQ(r.error_code, 0);
  EXPECT_FALSE(r.is_caught_up);
  EXPECT_TRUE(r.is_fenced);
  EXPECT_FALSE(r.should_shut_down);
  EXPECT_EQ(end_offset(), before + 1);
  EXPECT_TRUE(broker(1).fenced);

  // WantFence keeps it fenced even when caught up.
  r = heartbeat(1, 0, epoch, /*want_fence=*/true);
  EXPECT_TRUE(r.is_caught_up);
  EXPECT_TRUE(r.is_fenced);
  EXPECT_TRUE(broker(1).fenced);

  // Caught up: unfenced by one BrokerRegistrationChangeRecord.
  r = heartbeat(1, 0, epoch);
  EXPECT_EQ(r.error_code, 0);
  EXPECT_TRUE(r.is_caught_up);
  EXPECT_FALSE(r.is_fenced);
  EXPECT_EQ(end_offset(), before + 2);
  EXPECT_FALSE(broker(1).fenced);

  // A further heartbeat changes nothing; WantFence then fences it again.
  r = heartbeat(1, 1000);
  EXPECT_FALSE(r.is_fenced);
  EXPECT_EQ(end_offset(), before + 2);
  r = heartbeat(1, 2000, std::nullopt, /*want_fence=*/true);
  EXPECT_TRUE(r.is_fenced);
  EXPECT_TRUE(broker(1).fenced);
}

TEST_F(broker_lifecycle_test, stale_broker_epoch) {
  open();
  const int64_t epoch = register_broker(1);
  protocol::broker_heartbeat_request r;
  r.broker_id = 7;
  r.broker_epoch = epoch;
  auto response = _controller->broker_heartbeat(r, 0);
  EXPECT_EQ(response.error_code, to_wire(error_code::stale_broker_epoch));
  EXPECT_TRUE(response.is_fenced);
  r.broker_id = 1;
  r.broker_epoch = epoch + 1;
  r.current_metadata_offset = 1000;
  const int64_t before = end_offset();
  response = _controller->broker_heartbeat(r, 0);
  EXPECT_EQ(response.error_code, to_wire(error_code::stale_broker_epoch));
  EXPECT_EQ(end_offset(), before);
  EXPECT_TRUE(broker(1).fenced);
}

// ClusterControlManager.registerBroker: a new incarnation of a broker whose session is still valid may be a
// second process with the same node id; it is refused until that session expires and the broker is fenced.
TEST_F(broker_lifecycle_test, a_new_incarnation_during_a_valid_session_is_a_duplicate_registration) {
  open();
  start_brokers(1, /*now_ms=*/1000);
  const int64_t first_epoch = _epochs.at(1);
  metadata::broker_registration again = broker(1);
  auto same = _controller->register_broker(again, -1, 2000);  // the same incarnation: an amendment
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, first_epoch);
  metadata::broker_registration other = broker(1);
  other.incarnation_id = uuid::random();
  auto refused = _controller->register_broker(other, -1, 1000 + 9000);  // last contact + timeout >= now
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, error_code::duplicate_broker_registration);
  EXPECT_EQ(refused.error().message, "Another broker is registered with that broker id.");
  EXPECT_FALSE(broker(1).fenced);
  EXPECT_EQ(broker(1).epoch, first_epoch);
  // The session expires, the controller fences the broker, and the new incarnation registers.
  _controller->fence_stale_brokers(1000 + 9001);
  ASSERT_TRUE(broker(1).fenced);
  auto registered = _controller->register_broker(other, -1, 1000 + 9002);
  ASSERT_TRUE(registered.ok()) << registered.error().message;
  EXPECT_GT(*registered, first_epoch);
}

TEST_F(broker_lifecycle_test, a_fenced_broker_registers_again_at_once) {
  open();
  start_brokers(1, /*now_ms=*/1000);
  auto fenced = heartbeat(1, 2000, std::nullopt, /*want_fence=*/true);
  ASSERT_TRUE(fenced.is_fenced);
  metadata::broker_registration restarted = broker(1);
  restarted.incarnation_id = uuid::random();
  auto registered = _controller->register_broker(restarted, -1, 2001);
  ASSERT_TRUE(registered.ok()) << registered.error().message;
}

TEST_F(broker_lifecycle_test, fenced_brokers_lead_nothing_new) {
  open();
  start_brokers(1);
  register_broker(2);  // fenced: not caught up yet
  protocol::create_topics_request request;
  protocol::create_topics_request::creatable_topic t;
  t.name = "spread";
  t.num_partitions = 6;
  t.replication_factor = 1;
  request.topics.push_back(t);
  ASSERT_EQ(_controller->create_topics(request, 7).topics.at(0).error_code, 0);
  for (const auto& p : image().find_topic("spread")->partitions) EXPECT_EQ(p.leader, 1);
}

TEST_F(broker_lifecycle_test, session_timeout_fences_moves_leadership_and_shrinks_isr) {
  open();
  start_brokers(3, /*now_ms=*/0);
  create("t", {{1, 2, 3}, {2, 1, 3}});
  create("solo", {{1}});
  ASSERT_EQ(partition("t", 0).leader, 1);
  ASSERT_EQ(partition("solo", 0).isr, (std::vector<int32_t>{1}));

  heartbeat(2, 5000);
  heartbeat(3, 5000);
  _controller->fence_stale_brokers(9000);  // 0 + 9000 is still within the session
  EXPECT_FALSE(broker(1).fenced);

  const int64_t before = end_offset();
  _controller->fence_stale_brokers(9001);
  EXPECT_TRUE(broker(1).fenced);
  EXPECT_FALSE(broker(2).fenced);
  EXPECT_FALSE(broker(3).fenced);
  EXPECT_EQ(end_offset(), before + 4);  // three PartitionChangeRecords and the fencing

  // Led by 1: the next ISR member in replica order leads, with a new leader epoch.
  EXPECT_EQ(partition("t", 0).leader, 2);
  EXPECT_EQ(partition("t", 0).leader_epoch, 1);
  EXPECT_EQ(partition("t", 0).partition_epoch, 1);
  EXPECT_EQ(partition("t", 0).isr, (std::vector<int32_t>{2, 3}));
  // 1 a follower: only the ISR shrinks; the leader epoch stays (metadata.version 3.6+).
  EXPECT_EQ(partition("t", 1).leader, 2);
  EXPECT_EQ(partition("t", 1).leader_epoch, 0);
  EXPECT_EQ(partition("t", 1).partition_epoch, 1);
  EXPECT_EQ(partition("t", 1).isr, (std::vector<int32_t>{2, 3}));
  // 1 the last ISR member: no leader; it waits in the ELR (KIP-966) and is the last known leader.
  EXPECT_EQ(partition("solo", 0).leader, metadata::no_leader);
  EXPECT_EQ(partition("solo", 0).leader_epoch, 1);
  EXPECT_EQ(partition("solo", 0).isr, (std::vector<int32_t>{}));
  EXPECT_EQ(partition("solo", 0).eligible_leader_replicas, (std::vector<int32_t>{1}));
  EXPECT_EQ(partition("solo", 0).last_known_elr, (std::vector<int32_t>{1}));

  // Nothing more is stale; a second check writes nothing.
  const int64_t after = end_offset();
  _controller->fence_stale_brokers(9500);
  EXPECT_EQ(end_offset(), after);

  // Broker 1 comes back: unfenced, and leads the leaderless partition as its ELR member, which is the ISR
  // again.
  auto r = heartbeat(1, 10000);
  EXPECT_FALSE(r.is_fenced);
  EXPECT_FALSE(broker(1).fenced);
  EXPECT_EQ(partition("solo", 0).leader, 1);
  EXPECT_EQ(partition("solo", 0).leader_epoch, 2);
  EXPECT_EQ(partition("solo", 0).isr, (std::vector<int32_t>{1}));
  EXPECT_EQ(partition("solo", 0).eligible_leader_replicas, (std::vector<int32_t>{}));
  EXPECT_EQ(partition("solo", 0).last_known_elr, (std::vector<int32_t>{}));
  EXPECT_EQ(partition("solo", 0).leader_recovery_state, metadata::leader_recovered);
  // Partitions with a leader are left alone (the ISR grows back through AlterPartition).
  EXPECT_EQ(partition("t", 0).leader, 2);
  EXPECT_EQ(partition("t", 0).isr, (std::vector<int32_t>{2, 3}));

  // The records replay to the same partitions.
  const auto expected = _controller->image();
  _controller.reset();
  open();
  for (const std::string topic : {"t", "solo"}) {
    const auto& replayed = image().find_topic(topic)->partitions;
    const auto& written = expected->find_topic(topic)->partitions;
    ASSERT_EQ(replayed.size(), written.size());
    for (size_t p = 0; p < written.size(); ++p) {
      EXPECT_EQ(replayed[p].leader, written[p].leader);
      EXPECT_EQ(replayed[p].leader_epoch, written[p].leader_epoch);
      EXPECT_EQ(replayed[p].partition_epoch, written[p].partition_epoch);
      EXPECT_EQ(replayed[p].isr, written[p].isr);
    }
  }
  EXPECT_FALSE(broker(1).fenced);
}

TEST_F(broker_lifecycle_test, sessions_restart_when_the_controller_becomes_active) {
  open();
  start_brokers(2, /*now_ms=*/0);
  // A new active controller at 100000: neither broker has heartbeated it yet.
  _controller->reset_heartbeat_deadlines(100000);
  _controller->fence_stale_brokers(109000);
  EXPECT_FALSE(broker(1).fenced);
  EXPECT_FALSE(broker(2).fenced);
  heartbeat(2, 105000);
  _controller->fence_stale_brokers(109001);
  EXPECT_TRUE(broker(1).fenced);
  EXPECT_FALSE(broker(2).fenced);
}

TEST_F(broker_lifecycle_test, controlled_shutdown_moves_leadership_then_answers_should_shut_down) {
  open();
  start_brokers(4);
  create("t", {{1, 2, 3}, {2, 1, 3}, {3, 2, 4}});

  const int64_t before = end_offset();
  auto r = heartbeat(1, 1000, std::nullopt, false, /*want_shut_down=*/true);
  EXPECT_EQ(r.error_code, 0);
  EXPECT_FALSE(r.is_fenced);
  EXPECT_FALSE(r.should_shut_down);
  EXPECT_TRUE(broker(1).in_controlled_shutdown);
  EXPECT_FALSE(broker(1).fenced);
  EXPECT_EQ(end_offset(), before + 3);  // InControlledShutdown, then partitions 0 and 1
  EXPECT_EQ(partition("t", 0).leader, 2);
  EXPECT_EQ(partition("t", 0).leader_epoch, 1);
  EXPECT_EQ(partition("t", 0).partition_epoch, 1);
  EXPECT_EQ(partition("t", 0).isr, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(partition("t", 1).leader, 2);
  EXPECT_EQ(partition("t", 1).leader_epoch, 0);
  EXPECT_EQ(partition("t", 1).isr, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(partition("t", 2).partition_epoch, 0);
  // New partitions avoid it.
  protocol::create_topics_request request;
  protocol::create_topics_request::creatable_topic t;
  t.name = "later";
  t.num_partitions = 8;
  t.replication_factor = 3;
  request.topics.push_back(t);
  ASSERT_EQ(_controller->create_topics(request, 7).topics.at(0).error_code, 0);
  for (const auto& p : image().find_topic("later")->partitions)
    EXPECT_EQ(std::count(p.replicas.begin(), p.replicas.end(), 1), 0);

  // It leads nothing now, but brokers 2, 3 and 4 have not yet reported the offset of those changes.
  r = heartbeat(1, 1500, std::nullopt, false, true);
  EXPECT_FALSE(r.should_shut_down);
  EXPECT_FALSE(r.is_fenced);
  heartbeat(2, 1600);
  heartbeat(3, 1600);
  r = heartbeat(1, 1700, std::nullopt, false, true);
  EXPECT_FALSE(r.should_shut_down);
  heartbeat(4, 1800);
  r = heartbeat(1, 1900, std::nullopt, false, true);
  EXPECT_TRUE(r.should_shut_down);
  EXPECT_TRUE(r.is_fenced);
  EXPECT_TRUE(broker(1).fenced);

  // The InControlledShutdown change (BrokerRegistrationChangeRecord v1) replays.
  _controller.reset();
  open();
  EXPECT_TRUE(broker(1).in_controlled_shutdown);
  EXPECT_TRUE(broker(1).fenced);
  EXPECT_EQ(partition("t", 0).leader, 2);
}

TEST_F(broker_lifecycle_test, controlled_shutdown_of_the_only_isr_member_leaves_the_partition_leaderless) {
  open();
  start_brokers(2);
  create("t", {{1}, {2}});
  auto r = heartbeat(1, 1000, std::nullopt, false, true);
  EXPECT_FALSE(r.should_shut_down);
  EXPECT_EQ(partition("t", 0).leader, metadata::no_leader);
  EXPECT_EQ(partition("t", 0).isr, (std::vector<int32_t>{}));
  EXPECT_EQ(partition("t", 0).eligible_leader_replicas, (std::vector<int32_t>{1}));
  heartbeat(2, 1100);
  r = heartbeat(1, 1200, std::nullopt, false, true);
  EXPECT_TRUE(r.should_shut_down);
}

TEST_F(broker_lifecycle_test, shutdown_without_leaderships_or_when_fenced_is_immediate) {
  open();
  start_brokers(2);
  create("t", {{2, 1}});
  // Broker 1 leads nothing: fenced and told to stop at once, off the ISR.
  auto r = heartbeat(1, 1000, std::nullopt, false, true);
  EXPECT_TRUE(r.should_shut_down);
  EXPECT_TRUE(r.is_fenced);
  EXPECT_TRUE(broker(1).fenced);
  EXPECT_EQ(partition("t", 0).isr, (std::vector<int32_t>{2}));

  // A broker still fenced after registration may stop without a write.
  register_broker(3);
  const int64_t before = end_offset();
  r = heartbeat(3, 1000, 0, false, true);
  EXPECT_TRUE(r.should_shut_down);
  EXPECT_EQ(end_offset(), before);
}

// AlterPartition from the leader and auto.leader.rebalance.enable: a returning preferred replica rejoins the
// ISR through the leader's AlterPartition, and the periodic rebalance makes it the leader again.
TEST_F(broker_lifecycle_test, alter_partition_and_the_periodic_preferred_election) {
  open();
  start_brokers(3, /*now_ms=*/0);
  create("t", {{1, 2, 3}});
  heartbeat(2, 5000);
  heartbeat(3, 5000);
  _controller->fence_stale_brokers(9001);  // 1 is fenced: 2 leads, ISR [2,3]
  ASSERT_EQ(partition("t", 0).leader, 2);
  heartbeat(1, 9500);  // back, unfenced
  ASSERT_FALSE(broker(1).fenced);

  const metadata::partition_state p = partition("t", 0);  // a copy: every write publishes a new image
  protocol::alter_partition_request req;
  req.broker_id = 2;
  req.broker_epoch = _epochs.at(2);
  protocol::alter_partition_request::topic_data topic;
  topic.topic_id = image().find_topic("t")->id;
  protocol::alter_partition_request::partition_data data;
  data.partition_index = 0;
  data.leader_epoch = p.leader_epoch;
  data.partition_epoch = p.partition_epoch;
  data.new_isr_with_epochs = {{2, _epochs.at(2)}, {3, _epochs.at(3)}, {1, _epochs.at(1)}};
  topic.partitions.push_back(data);
  req.topics.push_back(topic);
  // A stale broker epoch refuses the whole request; a stale partition epoch the partition.
  auto stale = req;
  stale.broker_epoch = 12345;
  EXPECT_EQ(_controller->alter_partition(stale, 3).error_code, to_wire(error_code::stale_broker_epoch));
  auto old_epoch = req;
  old_epoch.topics[0].partitions[0].partition_epoch -= 1;
  EXPECT_EQ(_controller->alter_partition(old_epoch, 3).topics.at(0).partitions.at(0).error_code,
            to_wire(error_code::invalid_update_version));
  auto not_leader = req;
  not_leader.broker_id = 3;
  not_leader.broker_epoch = _epochs.at(3);
  EXPECT_EQ(_controller->alter_partition(not_leader, 3).topics.at(0).partitions.at(0).error_code,
            to_wire(error_code::invalid_request));
  auto resp = _controller->alter_partition(req, 3);
  ASSERT_EQ(resp.error_code, 0);
  const auto& answer = resp.topics.at(0).partitions.at(0);
  EXPECT_EQ(answer.error_code, 0);
  EXPECT_EQ(answer.isr, (std::vector<int32_t>{2, 3, 1}));
  EXPECT_EQ(answer.partition_epoch, p.partition_epoch + 1);
  EXPECT_EQ(answer.partition_epoch, partition("t", 0).partition_epoch);
  EXPECT_EQ(partition("t", 0).isr, (std::vector<int32_t>{2, 3, 1}));
  EXPECT_EQ(partition("t", 0).leader, 2);

  // The rebalance runs once per interval (the first call schedules it).
  _controller->maybe_rebalance_leaders(10'000);
  EXPECT_EQ(partition("t", 0).leader, 2);
  _controller->maybe_rebalance_leaders(200'000);
  EXPECT_EQ(partition("t", 0).leader, 2);
  _controller->maybe_rebalance_leaders(310'000);
  EXPECT_EQ(partition("t", 0).leader, 1);
}

// A whole-cluster kill -9: the controller that becomes active after the restart starts every
// session afresh, so every broker's session expires at the same check and they are fenced together; each
// partition keeps its own leader as the last known leader and its whole ISR in the ELR. The brokers then
// register as uncleanly shut down (leaving the ISRs and ELRs) and each partition comes back under its own
// last leader, whatever order the brokers return in, rather than all under the broker fenced last.
TEST_F(broker_lifecycle_test,
       after_a_whole_cluster_crash_each_partition_comes_back_under_its_own_last_leader) {
  open();
  start_brokers(3, /*now_ms=*/0);
  create("t", {{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, /*min_isr=*/2);
  for (int32_t p = 0; p < 3; ++p) ASSERT_EQ(partition("t", p).leader, p + 1);

  _controller->reset_heartbeat_deadlines(100'000);  // every node died; a controller starts after the restart
  _controller->fence_stale_brokers(100'000 + 9000);
  EXPECT_FALSE(broker(1).fenced);
  _controller->fence_stale_brokers(100'000 + 9001);
  for (int32_t id = 1; id <= 3; ++id) EXPECT_TRUE(broker(id).fenced);
  for (int32_t p = 0; p < 3; ++p) {
    SCOPED_TRACE(p);
    EXPECT_EQ(partition("t", p).leader, metadata::no_leader);
    EXPECT_EQ(partition("t", p).isr, (std::vector<int32_t>{}));
    EXPECT_EQ(partition("t", p).eligible_leader_replicas, partition("t", p).replicas);
    EXPECT_EQ(partition("t", p).last_known_elr, (std::vector<int32_t>{p + 1}));
  }

  // Broker 3 comes back first: only the partition it last led may return, and only once the other ELR
  // members have registered again (each may have had more than it, until its unclean shutdown is known).
  restart_after_crash(3, 110'000);
  for (int32_t p = 0; p < 3; ++p) EXPECT_EQ(partition("t", p).leader, metadata::no_leader) << p;
  restart_after_crash(2, 111'000);
  EXPECT_EQ(partition("t", 0).leader, metadata::no_leader);  // 1 not back: its ELR still holds 1
  restart_after_crash(1, 112'000);
  for (int32_t p = 0; p < 3; ++p) {
    SCOPED_TRACE(p);
    EXPECT_EQ(partition("t", p).leader, p + 1);
    EXPECT_EQ(partition("t", p).isr, (std::vector<int32_t>{p + 1}));
    EXPECT_EQ(partition("t", p).eligible_leader_replicas, (std::vector<int32_t>{}));
    EXPECT_EQ(partition("t", p).last_known_elr, (std::vector<int32_t>{}));
    EXPECT_EQ(partition("t", p).leader_recovery_state, metadata::leader_recovering);
  }
}

// The same crash with a stale replica: 3 fell out of the ISR before every node died. Restarted first and
// alone it must not lead (unclean.leader.election.enable is off): the partition waits for its last leader.
TEST_F(broker_lifecycle_test, a_stale_replica_back_first_after_a_whole_cluster_crash_does_not_lead) {
  open();
  start_brokers(3, /*now_ms=*/0);
  create("s", {{1, 2, 3}}, /*min_isr=*/2);
  alter_isr("s", 0, {1, 2});  // 3 lagged: it misses what is acknowledged from now on

  _controller->reset_heartbeat_deadlines(100'000);
  _controller->fence_stale_brokers(100'000 + 9001);
  EXPECT_EQ(partition("s", 0).leader, metadata::no_leader);
  EXPECT_EQ(partition("s", 0).isr, (std::vector<int32_t>{}));
  EXPECT_EQ(partition("s", 0).eligible_leader_replicas, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(partition("s", 0).last_known_elr, (std::vector<int32_t>{1}));

  restart_after_crash(3, 110'000);
  EXPECT_EQ(partition("s", 0).leader, metadata::no_leader);
  restart_after_crash(2, 111'000);
  EXPECT_EQ(partition("s", 0).leader, metadata::no_leader);  // 2 left the ELR: its shutdown was unclean
  EXPECT_EQ(partition("s", 0).eligible_leader_replicas, (std::vector<int32_t>{1}));
  restart_after_crash(1, 112'000);
  EXPECT_EQ(partition("s", 0).leader, 1);
  EXPECT_EQ(partition("s", 0).isr, (std::vector<int32_t>{1}));
}

// Two sessions expiring at one check while a third broker lives: the leadership goes straight to the live
// ISR member, and both that left join the ELR (the ISR fell below min ISR at once).
TEST_F(broker_lifecycle_test, brokers_whose_sessions_expire_together_are_fenced_together) {
  open();
  start_brokers(3, /*now_ms=*/0);
  create("t", {{1, 2, 3}}, /*min_isr=*/2);
  heartbeat(3, 5000);
  const int64_t before = end_offset();
  _controller->fence_stale_brokers(9001);
  EXPECT_EQ(end_offset(), before + 3);  // one PartitionChangeRecord, two fencings
  EXPECT_TRUE(broker(1).fenced);
  EXPECT_TRUE(broker(2).fenced);
  EXPECT_EQ(partition("t", 0).leader, 3);
  EXPECT_EQ(partition("t", 0).leader_epoch, 1);  // one new leader, not 2 then 3
  EXPECT_EQ(partition("t", 0).isr, (std::vector<int32_t>{3}));
  EXPECT_EQ(partition("t", 0).eligible_leader_replicas, (std::vector<int32_t>{1, 2}));
}

// KIP-966: changing min.insync.replicas clears the ELRs chosen against the old value.
TEST_F(broker_lifecycle_test, a_min_isr_change_clears_the_elr) {
  open();
  start_brokers(2, /*now_ms=*/0);
  create("t", {{1, 2}});
  heartbeat(2, 5000);
  _controller->fence_stale_brokers(9001);  // 1 fenced: ISR [2], still at min ISR 1, so no ELR
  heartbeat(2, 9500);
  _controller->fence_stale_brokers(30'000);  // 2 fenced too: the last ISR member waits in the ELR
  ASSERT_EQ(partition("t", 0).eligible_leader_replicas, (std::vector<int32_t>{2}));
  ASSERT_EQ(partition("t", 0).last_known_elr, (std::vector<int32_t>{2}));

  protocol::incremental_alter_configs_request req;
  auto& resource = req.resources.emplace_back();
  resource.resource_type = 2;  // TOPIC
  resource.resource_name = "t";
  auto& config = resource.configs.emplace_back();
  config.name = "min.insync.replicas";
  config.config_operation = 0;  // SET
  config.value = "2";
  ASSERT_EQ(_controller->incremental_alter_configs(req, 1).responses.at(0).error_code, 0);
  EXPECT_EQ(partition("t", 0).eligible_leader_replicas, (std::vector<int32_t>{}));
  EXPECT_EQ(partition("t", 0).last_known_elr, (std::vector<int32_t>{}));
}

// ElectLeaders: PREFERRED moves leadership to an in-sync first replica (ELECTION_NOT_NEEDED when it leads,
// PREFERRED_LEADER_NOT_AVAILABLE when it cannot); UNCLEAN elects a live replica for a leaderless partition.
TEST_F(broker_lifecycle_test, elect_leaders_preferred_and_unclean) {
  open();
  start_brokers(3, /*now_ms=*/0);
  create("t", {{1, 2, 3}});
  auto elect = [&](int8_t type, int32_t partition) {
    protocol::elect_leaders_request req;
    req.election_type = type;
    auto& tp = req.topic_partitions->emplace_back();
    tp.topic = "t";
    tp.partitions = {partition};
    auto resp = _controller->elect_leaders(req, 2);
    return resp.replica_election_results.at(0).partition_result.at(0).error_code;
  };
  EXPECT_EQ(elect(0, 0), to_wire(error_code::election_not_needed));
  EXPECT_EQ(elect(0, 7), to_wire(error_code::unknown_topic_or_partition));
  heartbeat(2, 5000);
  heartbeat(3, 5000);
  _controller->fence_stale_brokers(9001);  // 1 fenced: 2 leads
  ASSERT_EQ(partition("t", 0).leader, 2);
  EXPECT_EQ(elect(0, 0), to_wire(error_code::preferred_leader_not_available));  // 1 is not in the ISR
  EXPECT_EQ(elect(1, 0), to_wire(error_code::election_not_needed));             // it has a leader

  // 2 and 3 go too: no leader, ISR empty; then only 1 (out of sync) comes back.
  heartbeat(1, 9500);
  _controller->fence_stale_brokers(30'000);
  heartbeat(1, 30'100);
  ASSERT_EQ(partition("t", 0).leader, metadata::no_leader);
  ASSERT_FALSE(broker(1).fenced);
  EXPECT_EQ(elect(0, 0), to_wire(error_code::preferred_leader_not_available));
  EXPECT_EQ(elect(1, 0), 0);
  EXPECT_EQ(partition("t", 0).leader, 1);
  EXPECT_EQ(partition("t", 0).isr, (std::vector<int32_t>{1}));
  EXPECT_EQ(partition("t", 0).leader_recovery_state, metadata::leader_recovering);
}

}  // namespace
}  // namespace mala::controller

namespace mala::controller {
namespace {

// UnregisterBroker (handleBrokerUnregistered): the broker leaves every ISR, its leaderships move, its
// registration goes; an id without one is BROKER_ID_NOT_REGISTERED, and the broker may register again.
TEST_F(broker_lifecycle_test, unregistering_a_broker_removes_it_from_every_isr_and_the_image) {
  open();
  start_brokers(3, /*now_ms=*/0);
  create("t", {{3, 1, 2}, {1, 2, 3}});
  ASSERT_EQ(partition("t", 0).leader, 3);
  protocol::unregister_broker_request request;
  request.broker_id = 3;
  auto answer = _controller->unregister_broker(request);
  EXPECT_EQ(answer.error_code, 0) << answer.error_message.value_or("");
  EXPECT_FALSE(image().brokers.contains(3));
  for (int32_t p = 0; p < 2; ++p) {
    EXPECT_EQ(partition("t", p).isr, (std::vector<int32_t>{1, 2})) << p;
    EXPECT_NE(partition("t", p).leader, 3) << p;
  }
  EXPECT_EQ(partition("t", 0).leader, 1);
  auto again = _controller->unregister_broker(request);
  EXPECT_EQ(again.error_code, to_wire(error_code::broker_id_not_registered));
  EXPECT_EQ(again.error_message.value_or(""), "Broker ID 3 is not currently registered");
  // Its session was forgotten: nothing fences it later, and it registers anew.
  _controller->fence_stale_brokers(1'000'000);
  EXPECT_GT(register_broker(3), _epochs.at(1));
  EXPECT_TRUE(broker(3).fenced);
}

}  // namespace
}  // namespace mala::controller
