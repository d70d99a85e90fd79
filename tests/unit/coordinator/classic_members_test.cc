// Classic members inside KIP-848 consumer groups, and the online upgrade and downgrade between the two kinds
// of group (Kafka 4.x's classicGroupJoinToConsumerGroup / convertToConsumerGroup / convertToClassicGroup):
// JoinGroup answered with the member epoch and no leader, SyncGroup with the server-side assignment as a
// ConsumerProtocolAssignment, Heartbeat asking to rejoin, LeaveGroup, offsets with the generation, session
// expiry, records that replay. Fake writer and clock as in the other coordinator tests.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "coordinator_test_util.h"
#include "mala/coordinator/consumer_group.h"
#include "mala/coordinator/consumer_protocol.h"
#include "mala/coordinator/group_coordinator.h"
#include "mala/protocol/messages/consumer_protocol_subscription.h"
#include "mala/protocol/versioned_message.h"

namespace mala::coordinator {
namespace {

namespace proto = mala::protocol;

using testing::fake_writer;
using testing::replayed_coordinator;

// A subscription as the Java consumer sends it (version 3: topics, owned partitions, generation, rack).
std::vector<uint8_t> subscription(const std::vector<std::string>& topics,
                                  const named_partitions& owned = {}) {
  proto::consumer_protocol_subscription s;
  s.topics = topics;
  s.user_data = std::nullopt;
  for (const auto& [t, ps] : owned) {
    auto& e = s.owned_partitions.emplace_back();
    e.topic = t;
    e.partitions.assign(ps.begin(), ps.end());
  }
  s.rack_id = std::nullopt;
  return proto::encode_versioned(s, 3);
}

size_t count(const named_partitions& np) {
  size_t n = 0;
  for (const auto& [t, ps] : np) n += ps.size();
  return n;
}

class classic_members_test : public ::testing::Test {
 protected:
  void SetUp() override {
    config.offsets_topic_num_partitions = 1;
    config.initial_rebalance_delay_ms = 0;
    config.consumer_session_timeout_ms = 45'000;
    coordinator = std::make_unique<group_coordinator>(config, writer, [this] { return now; });
    coordinator->begin_loading(0);
    coordinator->complete_loading(0);
    topic_catalog c;
    uuid id;
    id.bytes[0] = 0x40;
    id.bytes[15] = 1;
    c.by_name["bus-events"] = topic_info{"bus-events", id, 6, false};
    catalog = c;
    coordinator->set_topics(catalog);
  }

  void advance(int64_t ms) {
    now += ms;
    coordinator->run_expired_timers();
    writer.complete_all();
  }

  // A KIP-848 member joining or heartbeating, owning `owned` (topic id of bus-events).
  proto::consumer_group_heartbeat_response beat(const std::string& member, int32_t epoch,
                                                std::optional<std::set<int32_t>> owned = std::nullopt) {
    proto::consumer_group_heartbeat_request r;
    r.group_id = "alerts";
    r.member_id = member;
    r.member_epoch = epoch;
    if (epoch == 0) {
      r.rebalance_timeout_ms = 30'000;
      r.subscribed_topic_names = std::vector<std::string>{"bus-events"};
      r.topic_partitions.emplace();
    } else if (owned) {
      r.topic_partitions.emplace();
      auto& e = r.topic_partitions->emplace_back();
      e.topic_id = catalog.by_name["bus-events"].id;
      e.partitions.assign(owned->begin(), owned->end());
    }
    std::optional<proto::consumer_group_heartbeat_response> out;
    coordinator->consumer_group_heartbeat({"java-848", "/127.0.0.1", 1}, std::move(r),
                                          [&](proto::consumer_group_heartbeat_response resp) { out = resp; });
    writer.complete_all();
    EXPECT_TRUE(out.has_value());
    return out.value_or(proto::consumer_group_heartbeat_response{});
  }

  // A KIP-848 member leaves for good (member epoch -1).
  void leave_848(const std::string& member) {
    proto::consumer_group_heartbeat_request r;
    r.group_id = "alerts";
    r.member_id = member;
    r.member_epoch = -1;
    coordinator->consumer_group_heartbeat({"java-848", "/127.0.0.1", 1}, r, [](auto) {});
    writer.complete_all();
  }

  static std::set<int32_t> assigned(const proto::consumer_group_heartbeat_response& r) {
    std::set<int32_t> out;
    if (!r.assignment) return out;
    for (const auto& t : r.assignment->topic_partitions) out.insert(t.partitions.begin(), t.partitions.end());
    return out;
  }

  // A classic JoinGroup of a consumer subscribing to bus-events with the range protocol.
  static proto::join_group_request join_request(const std::string& member, const named_partitions& owned = {},
                                                std::optional<std::string> instance = std::nullopt) {
    proto::join_group_request r;
    r.group_id = "alerts";
    r.member_id = member;
    r.group_instance_id = std::move(instance);
    r.session_timeout_ms = 10'000;
    r.rebalance_timeout_ms = 30'000;
    r.protocol_type = "consumer";
    r.protocols.push_back({"range", subscription({"bus-events"}, owned)});
    return r;
  }

  proto::join_group_response join(const std::string& member, const named_partitions& owned = {},
                                  int16_t version = 9) {
    std::optional<proto::join_group_response> out;
    coordinator->join_group({"java-classic", "/127.0.0.1", version}, join_request(member, owned),
                            [&](proto::join_group_response resp) { out = resp; });
    writer.complete_all();
    EXPECT_TRUE(out.has_value());
    return out.value_or(proto::join_group_response{});
  }

  // A dynamic member's id through the KIP-394 round.
  std::string new_member() {
    auto first = join("");
    EXPECT_EQ(first.error_code, to_wire(error_code::member_id_required));
    return first.member_id;
  }

  std::pair<int16_t, named_partitions> sync(const std::string& member, int32_t generation) {
    proto::sync_group_request r;
    r.group_id = "alerts";
    r.member_id = member;
    r.generation_id = generation;
    r.protocol_type = "consumer";
    r.protocol_name = "range";
    std::optional<proto::sync_group_response> out;
    coordinator->sync_group({"java-classic", "/127.0.0.1", 5}, std::move(r),
                            [&](proto::sync_group_response resp) { out = resp; });
    writer.complete_all();
    EXPECT_TRUE(out.has_value());
    if (!out || out->error_code != 0) return {out ? out->error_code : int16_t(-1), {}};
    auto a = decode_assignment(out->assignment);
    EXPECT_TRUE(a.has_value());
    return {0, a.value_or(named_partitions{})};
  }

  int16_t heartbeat(const std::string& member, int32_t generation) {
    proto::heartbeat_request r;
    r.group_id = "alerts";
    r.member_id = member;
    r.generation_id = generation;
    return coordinator->heartbeat({"java-classic", "/127.0.0.1", 4}, r).error_code;
  }

  int16_t commit(const std::string& member, int32_t generation, int16_t version = 8) {
    proto::offset_commit_request r;
    r.group_id = "alerts";
    r.member_id = member;
    r.generation_id_or_member_epoch = generation;
    auto& t = r.topics.emplace_back();
    t.name = "bus-events";
    t.partitions.push_back({});
    t.partitions.back().committed_offset = 42;
    std::optional<proto::offset_commit_response> out;
    coordinator->commit_offsets({"java-classic", "/127.0.0.1", version}, r,
                                [&](proto::offset_commit_response resp) { out = resp; });
    writer.complete_all();
    EXPECT_TRUE(out.has_value());
    return out ? out->topics.at(0).partitions.at(0).error_code : -1;
  }

  // A classic member (with id `id`) joins, syncs and heartbeats until it is told nothing more; returns
  // its generation and assignment. `owned` is what it holds (cooperative protocol).
  std::pair<int32_t, named_partitions> settle_classic(const std::string& id, named_partitions owned) {
    int32_t generation = -1;
    for (int round = 0; round < 5; ++round) {
      auto j = join(id, owned);
      EXPECT_EQ(j.error_code, 0);
      EXPECT_EQ(j.leader, "");
      EXPECT_TRUE(j.members.empty());
      generation = j.generation_id;
      auto [e, a] = sync(id, generation);
      EXPECT_EQ(e, 0);
      owned = a;
      if (heartbeat(id, generation) == 0) break;
    }
    return {generation, owned};
  }

  // A Stable classic group of two members (the leader assigns 3 + 3): their ids and the generation.
  std::tuple<std::string, std::string, int32_t> stable_classic_group() {
    const std::string m1 = new_member();
    const std::string m2 = new_member();
    std::optional<proto::join_group_response> j1, j2;
    for (const auto& entry : {std::pair{m1, &j1}, std::pair{m2, &j2}}) {
      const std::string& id = entry.first;
      auto* slot = entry.second;
      coordinator->join_group({"java-classic", "/127.0.0.1", 9}, join_request(id),
                              [slot](proto::join_group_response resp) { *slot = resp; });
    }
    advance(0);
    EXPECT_TRUE(j1 && j2 && j1->error_code == 0);
    if (!j1) return {};
    const std::string leader = j1->leader;
    const int32_t generation = j1->generation_id;
    proto::sync_group_request s;
    s.group_id = "alerts";
    s.member_id = leader;
    s.generation_id = generation;
    s.protocol_type = "consumer";
    s.protocol_name = "range";
    s.assignments.push_back({m1, encode_assignment({{"bus-events", {0, 1, 2}}}, 3)});
    s.assignments.push_back({m2, encode_assignment({{"bus-events", {3, 4, 5}}}, 3)});
    std::optional<proto::sync_group_response> synced;
    coordinator->sync_group({"java-classic", "/127.0.0.1", 5}, s,
                            [&](proto::sync_group_response r) { synced = r; });
    writer.complete_all();
    EXPECT_TRUE(synced && synced->error_code == 0);
    return {m1, m2, generation};
  }

  group_coordinator_config config;
  fake_writer writer;
  int64_t now = 1'700'000'000'000;
  std::unique_ptr<group_coordinator> coordinator;
  topic_catalog catalog;
};

TEST_F(classic_members_test, classic_member_joins_a_consumer_group_and_shares_its_partitions) {
  auto a = beat("a", 0);
  ASSERT_EQ(a.error_code, 0);
  EXPECT_EQ(assigned(a).size(), 6u);

  const std::string c = new_member();
  auto j = join(c);
  ASSERT_EQ(j.error_code, 0);
  EXPECT_EQ(j.protocol_type, "consumer");
  EXPECT_EQ(j.protocol_name, "range");
  EXPECT_EQ(j.leader, "");  // nobody assigns in the client: the assignor runs on the server
  // Its partitions are still a's: it gets none yet and waits.
  auto [e, first] = sync(c, j.generation_id);
  EXPECT_EQ(e, 0);
  EXPECT_EQ(count(first), 0u);
  EXPECT_EQ(heartbeat(c, j.generation_id), 0);  // still waiting on a

  // a revokes three and keeps three.
  auto a2 = beat("a", a.member_epoch, assigned(a));
  auto a3 = beat("a", a2.member_epoch, assigned(a2));
  EXPECT_EQ(assigned(a3).size(), 3u);
  // Now the classic member is asked to rejoin, and gets the other three.
  EXPECT_EQ(heartbeat(c, j.generation_id), to_wire(error_code::rebalance_in_progress));
  auto [generation, mine] = settle_classic(c, first);
  EXPECT_EQ(count(mine), 3u);
  for (int32_t p : mine["bus-events"]) EXPECT_FALSE(assigned(a3).contains(p));

  // ConsumerGroupDescribe shows both members.
  auto d = coordinator->consumer_group_describe({"alerts"}, false);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].members.size(), 2u);

  // Offsets: the generation is the member epoch, with any OffsetCommit version.
  EXPECT_EQ(commit(c, generation, 8), 0);
  EXPECT_EQ(commit(c, generation + 1, 8), to_wire(error_code::illegal_generation));
  EXPECT_EQ(commit(c, generation, 2), 0);
  // Wrong generations and unknown members.
  EXPECT_EQ(heartbeat(c, generation + 5), to_wire(error_code::illegal_generation));
  EXPECT_EQ(heartbeat("nobody", generation), to_wire(error_code::unknown_member_id));
  EXPECT_EQ(sync(c, generation + 5).first, to_wire(error_code::illegal_generation));
  // A consumer-protocol member's id is not a classic member.
  EXPECT_EQ(heartbeat("a", a3.member_epoch), to_wire(error_code::unknown_member_id));
}

TEST_F(classic_members_test, leave_and_session_expiry_give_the_partitions_back) {
  auto a = beat("a", 0);
  const std::string c = new_member();
  join(c);
  auto a2 = beat("a", a.member_epoch, assigned(a));
  auto a3 = beat("a", a2.member_epoch, assigned(a2));
  auto [generation, mine] = settle_classic(c, {});
  ASSERT_EQ(count(mine), 3u);

  // LeaveGroup: a gets all six back.
  proto::leave_group_request leave;
  leave.group_id = "alerts";
  leave.members.push_back({});
  leave.members.back().member_id = c;
  auto left = coordinator->leave_group({"java-classic", "/127.0.0.1", 5}, leave);
  ASSERT_EQ(left.members.size(), 1u);
  EXPECT_EQ(left.members[0].error_code, 0);
  writer.complete_all();
  auto a4 = beat("a", a3.member_epoch, assigned(a3));
  EXPECT_EQ(assigned(a4).size(), 6u);
  EXPECT_EQ(heartbeat(c, generation), to_wire(error_code::unknown_member_id));

  // A second classic member is removed after its own session timeout (10 s), not the group's (45 s).
  const std::string d = new_member();
  auto [g2, got] = settle_classic(d, {});
  (void)got;
  beat("a", a4.member_epoch, assigned(a4));
  advance(11'000);
  EXPECT_EQ(heartbeat(d, g2), to_wire(error_code::unknown_member_id));
  const auto* group = coordinator->find_consumer_group("alerts");
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->members().size(), 1u);
}

TEST_F(classic_members_test, classic_member_metadata_survives_replay) {
  beat("a", 0);
  const std::string c = new_member();
  join(c);
  const consumer_group before = *coordinator->find_consumer_group("alerts");
  ASSERT_TRUE(before.member(c)->uses_classic_protocol());

  replayed_coordinator other(
      config, [this] { return now; }, catalog, writer);
  const auto* after = other.coordinator.find_consumer_group("alerts");
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->members(), before.members());
  EXPECT_EQ(after->member(c)->classic->session_timeout_ms, 10'000);
}

TEST_F(classic_members_test, classic_group_with_members_is_upgraded_and_downgraded_back) {
  auto [m1, m2, generation] = stable_classic_group();
  ASSERT_NE(coordinator->find_group("alerts"), nullptr);
  // A consumer-protocol member joins: the group becomes a consumer group, the classic members keep their
  // partitions at their generation, and are asked to rejoin for the new epoch.
  auto a = beat("a", 0);
  ASSERT_EQ(a.error_code, 0);
  EXPECT_EQ(coordinator->find_group("alerts"), nullptr);
  const auto* cg = coordinator->find_consumer_group("alerts");
  ASSERT_NE(cg, nullptr);
  EXPECT_EQ(cg->members().size(), 3u);
  EXPECT_EQ(cg->member(m1)->member_epoch, generation);
  EXPECT_EQ(cg->member(m1)->assigned.begin()->second, (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(heartbeat(m1, generation), to_wire(error_code::rebalance_in_progress));
  auto [g1, p1] = settle_classic(m1, {{"bus-events", {0, 1, 2}}});
  auto [g2, p2] = settle_classic(m2, {{"bus-events", {3, 4, 5}}});
  auto a2 = beat("a", a.member_epoch, assigned(a));
  auto [g1b, p1b] = settle_classic(m1, p1);
  auto [g2b, p2b] = settle_classic(m2, p2);
  auto a3 = beat("a", a2.member_epoch, assigned(a2));
  EXPECT_EQ(count(p1b) + count(p2b) + assigned(a3).size(), 6u);
  EXPECT_EQ(assigned(a3).size(), 2u);

  // The consumer-protocol member leaves: only classic members remain, and the group goes back to the classic
  // protocol, rebalancing.
  leave_848("a");
  EXPECT_EQ(coordinator->find_consumer_group("alerts"), nullptr);
  const auto* back = coordinator->find_group("alerts");
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->members().size(), 2u);
  EXPECT_TRUE(back->in_state(classic_group_state::preparing_rebalance));
}

TEST_F(classic_members_test, migration_policy_decides_upgrade_and_downgrade) {
  // disabled / downgrade: a classic group with members is not upgraded.
  for (const char* policy : {"disabled", "downgrade"}) {
    config.consumer_migration_policy = policy;
    SetUp();  // the coordinator copies its configuration
    auto [m1, m2, generation] = stable_classic_group();
    (void)m2;
    auto a = beat("a", 0);
    EXPECT_EQ(a.error_code, to_wire(error_code::group_id_not_found)) << policy;
    EXPECT_NE(coordinator->find_group("alerts"), nullptr) << policy;
    EXPECT_EQ(heartbeat(m1, generation), 0) << policy;
  }
  // upgrade: upgraded, but not downgraded when the consumer-protocol member leaves.
  config.consumer_migration_policy = "upgrade";
  SetUp();
  auto [m1, m2, generation] = stable_classic_group();
  (void)m1;
  (void)m2;
  (void)generation;
  auto a = beat("a", 0);
  ASSERT_EQ(a.error_code, 0);
  ASSERT_NE(coordinator->find_consumer_group("alerts"), nullptr);
  leave_848("a");
  ASSERT_NE(coordinator->find_consumer_group("alerts"), nullptr);
  EXPECT_EQ(coordinator->find_consumer_group("alerts")->members().size(), 2u);
  EXPECT_EQ(coordinator->find_group("alerts"), nullptr);
}

TEST_F(classic_members_test, classic_static_member_replacing_the_last_consumer_member_downgrades_the_group) {
  // A static KIP-848 member holds every partition, then leaves temporarily (epoch -2).
  proto::consumer_group_heartbeat_request r;
  r.group_id = "alerts";
  r.member_id = "s";
  r.member_epoch = 0;
  r.instance_id = "instance-1";
  r.rebalance_timeout_ms = 30'000;
  r.subscribed_topic_names = std::vector<std::string>{"bus-events"};
  r.topic_partitions.emplace();
  std::optional<proto::consumer_group_heartbeat_response> out;
  coordinator->consumer_group_heartbeat({"java-848", "/127.0.0.1", 1}, r,
                                        [&](proto::consumer_group_heartbeat_response resp) { out = resp; });
  writer.complete_all();
  ASSERT_TRUE(out && out->error_code == 0);
  ASSERT_EQ(assigned(*out).size(), 6u);
  proto::consumer_group_heartbeat_request away;
  away.group_id = "alerts";
  away.member_id = "s";
  away.member_epoch = -2;
  away.instance_id = "instance-1";
  coordinator->consumer_group_heartbeat({"java-848", "/127.0.0.1", 1}, away, [](auto) {});
  writer.complete_all();

  // The same instance comes back speaking the classic protocol: it takes the place of the old member and the
  // group becomes a Stable classic group with it, keeping its partitions (no rebalance).
  std::optional<proto::join_group_response> joined;
  coordinator->join_group({"java-classic", "/127.0.0.1", 9}, join_request("", {}, "instance-1"),
                          [&](proto::join_group_response resp) { joined = resp; });
  writer.complete_all();
  ASSERT_TRUE(joined);
  ASSERT_EQ(joined->error_code, 0);
  EXPECT_GT(joined->generation_id, 0);
  EXPECT_EQ(coordinator->find_consumer_group("alerts"), nullptr);
  const auto* g = coordinator->find_group("alerts");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->in_state(classic_group_state::stable));
  ASSERT_EQ(g->members().size(), 1u);
  EXPECT_EQ(g->generation_id(), joined->generation_id);
  auto [e, partitions] = sync(joined->member_id, joined->generation_id);
  EXPECT_EQ(e, 0);
  EXPECT_EQ(count(partitions), 6u);
}

}  // namespace
}  // namespace mala::coordinator
