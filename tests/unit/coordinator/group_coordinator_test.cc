// The group coordinator as a state machine: a fake record writer (appends complete when the test says so), a
// fake clock (timers fire when the test moves it), and the classic protocol, offsets and persistence driven
// request by request as clients would.
#include <gtest/gtest.h>

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "coordinator_test_util.h"
#include "mala/coordinator/consumer_protocol.h"
#include "mala/coordinator/group_coordinator.h"
#include "mala/coordinator/group_placement.h"
#include "mala/coordinator/group_records.h"
#include "mala/protocol/wire.h"

namespace mala::coordinator {
namespace {

namespace proto = mala::protocol;

constexpr int64_t start_ms = 1'700'000'000'000;

using testing::fake_writer;
using testing::replay_committed;

// A ConsumerProtocolSubscription v0: the topics, no user data.
std::vector<uint8_t> subscription(const std::vector<std::string>& topics) {
  std::vector<uint8_t> out;
  proto::wire_writer w(out);
  w.write_int16(0);
  w.write_array_length(static_cast<int32_t>(topics.size()), false);
  for (const auto& t : topics) w.write_string(t, false);
  w.write_int32(-1);
  return out;
}

class coordinator_test : public ::testing::Test {
 protected:
  void SetUp() override {
    config.offsets_topic_num_partitions = 1;
    config.initial_rebalance_delay_ms = 3000;
    coordinator = std::make_unique<group_coordinator>(config, writer, [this] { return now; });
    coordinator->begin_loading(0);
    coordinator->complete_loading(0);
  }

  void advance(int64_t ms) {
    now += ms;
    coordinator->run_expired_timers();
  }

  proto::join_group_request join_request(const std::string& group, const std::string& member,
                                         std::optional<std::string> instance = std::nullopt,
                                         std::vector<std::string> protocols = {"range"},
                                         const std::string& type = "consumer") {
    proto::join_group_request r;
    r.group_id = group;
    r.session_timeout_ms = 10'000;
    r.rebalance_timeout_ms = 30'000;
    r.member_id = member;
    r.group_instance_id = std::move(instance);
    r.protocol_type = type;
    for (const auto& p : protocols) r.protocols.push_back({p, subscription({"events"})});
    return r;
  }

  // Sends a JoinGroup; the answer lands in the returned slot (maybe later).
  std::shared_ptr<std::optional<proto::join_group_response>> join(proto::join_group_request r,
                                                                  int16_t version = 9,
                                                                  const std::string& client = "client") {
    auto slot = std::make_shared<std::optional<proto::join_group_response>>();
    coordinator->join_group({client, "/127.0.0.1", version}, std::move(r),
                            [slot](proto::join_group_response resp) { *slot = std::move(resp); });
    return slot;
  }

  std::shared_ptr<std::optional<proto::sync_group_response>> sync(
      const std::string& group, const std::string& member, int32_t generation,
      std::vector<std::pair<std::string, std::string>> assignments = {},
      std::optional<std::string> instance = std::nullopt) {
    proto::sync_group_request r;
    r.group_id = group;
    r.generation_id = generation;
    r.member_id = member;
    r.group_instance_id = std::move(instance);
    r.protocol_type = "consumer";
    r.protocol_name = "range";
    for (auto& [m, a] : assignments) r.assignments.push_back({m, std::vector<uint8_t>(a.begin(), a.end())});
    auto slot = std::make_shared<std::optional<proto::sync_group_response>>();
    coordinator->sync_group({"client", "/127.0.0.1", 5}, std::move(r),
                            [slot](proto::sync_group_response resp) { *slot = std::move(resp); });
    return slot;
  }

  int16_t heartbeat(const std::string& group, const std::string& member, int32_t generation,
                    std::optional<std::string> instance = std::nullopt) {
    proto::heartbeat_request r;
    r.group_id = group;
    r.member_id = member;
    r.generation_id = generation;
    r.group_instance_id = std::move(instance);
    return coordinator->heartbeat({"client", "/127.0.0.1", 4}, r).error_code;
  }

  // A member id through the KIP-394 round: the first JoinGroup gets MEMBER_ID_REQUIRED and the id.
  std::string member_id_for(const std::string& group, const std::string& client = "client") {
    auto first = join(join_request(group, ""), 9, client);
    EXPECT_TRUE(first->has_value());
    EXPECT_EQ((*first)->error_code, to_wire(error_code::member_id_required));
    return (*first)->member_id;
  }

  // One member alone in a new Stable group: its id and generation.
  std::pair<std::string, int32_t> stable_single_member(const std::string& group) {
    const std::string id = member_id_for(group);
    auto joined = join(join_request(group, id));
    EXPECT_FALSE(joined->has_value());  // parked for the initial rebalance delay
    advance(config.initial_rebalance_delay_ms);
    EXPECT_TRUE(joined->has_value());
    const int32_t generation = (*joined)->generation_id;
    auto synced = sync(group, id, generation, {{id, "assignment"}});
    EXPECT_FALSE(synced->has_value());  // the assignment is written first
    writer.complete_all();
    EXPECT_TRUE(synced->has_value());
    return {id, generation};
  }

  proto::offset_commit_request commit_request(const std::string& group, int64_t offset,
                                              int32_t generation = -1, const std::string& member = "") {
    proto::offset_commit_request r;
    r.group_id = group;
    r.generation_id_or_member_epoch = generation;
    r.member_id = member;
    auto& t = r.topics.emplace_back();
    t.name = "events";
    auto& p = t.partitions.emplace_back();
    p.partition_index = 0;
    p.committed_offset = offset;
    p.committed_leader_epoch = 3;
    p.committed_metadata = "meta";
    return r;
  }

  std::optional<proto::offset_commit_response> commit(proto::offset_commit_request r, int16_t version = 9) {
    std::optional<proto::offset_commit_response> out;
    coordinator->commit_offsets({"client", "/127.0.0.1", version}, std::move(r),
                                [&out](proto::offset_commit_response resp) { out = std::move(resp); });
    writer.complete_all();
    return out;
  }

  // OffsetDelete of one partition of `topic`, its write completed.
  std::optional<proto::offset_delete_response> delete_offset(const std::string& group,
                                                             const std::string& topic,
                                                             int32_t partition = 0) {
    proto::offset_delete_request del;
    del.group_id = group;
    auto& t = del.topics.emplace_back();
    t.name = topic;
    t.partitions.push_back({partition});
    std::optional<proto::offset_delete_response> answer;
    coordinator->delete_offsets(del, [&](auto r) { answer = std::move(r); });
    writer.complete_all();
    return answer;
  }

  proto::offset_fetch_response::offset_fetch_response_group fetch(const std::string& group,
                                                                  bool all_topics = false,
                                                                  bool require_stable = false) {
    proto::offset_fetch_request::offset_fetch_request_group g;
    g.group_id = group;
    if (all_topics) {
      g.topics = std::nullopt;
    } else {
      g.topics = std::vector<proto::offset_fetch_request::offset_fetch_request_topics>{{"events", {0, 1}}};
    }
    std::optional<proto::offset_fetch_response::offset_fetch_response_group> out;
    coordinator->fetch_offsets(g, require_stable, [&out](auto resp) { out = std::move(resp); });
    EXPECT_TRUE(out.has_value());
    return out.value_or(proto::offset_fetch_response::offset_fetch_response_group{});
  }

  group_coordinator_config config;
  fake_writer writer;
  int64_t now = start_ms;
  std::unique_ptr<group_coordinator> coordinator;
};

// --- Placement and records

TEST(group_placement, matches_java_string_hash_code) {
  EXPECT_EQ(java_string_hash(""), 0);
  EXPECT_EQ(java_string_hash("abc"), 96354);
  EXPECT_EQ(java_string_hash("live-map"), 1416525051);
  // "polygenelubricants".hashCode() == Integer.MIN_VALUE, which Utils.abs maps to 0.
  EXPECT_EQ(java_string_hash("polygenelubricants"), INT32_MIN);
  EXPECT_EQ(group_partition("polygenelubricants", 50), 0);
  EXPECT_EQ(java_string_hash("\xc3\xa9"), 233);                         // U+00E9
  EXPECT_EQ(java_string_hash("\xf0\x9f\x98\x80"), 55357 * 31 + 56832);  // U+1F600 as two surrogates
  EXPECT_EQ(group_partition("abc", 50), 96354 % 50);
  EXPECT_EQ(group_partition("a-negative-hash-group", 50),
            kafka_abs(java_string_hash("a-negative-hash-group")) % 50);
}

TEST(group_records, encode_kafka_versions_and_round_trip) {
  proto::offset_commit_value v;
  v.offset = 42;
  v.leader_epoch = 7;
  v.metadata = "m";
  v.commit_timestamp = start_ms;
  auto rec = offset_commit_record("g", "t", 3, v);
  ASSERT_GE(rec.key.size(), 2u);
  EXPECT_EQ(rec.key[0], 0);
  EXPECT_EQ(rec.key[1], 1);  // OffsetCommitKey v1
  ASSERT_TRUE(rec.value);
  EXPECT_EQ((*rec.value)[1], 3);  // OffsetCommitValue v3
  auto decoded = decode_record(rec.key, std::span<const uint8_t>(*rec.value));
  ASSERT_TRUE(decoded.ok());
  auto* e = std::get_if<offset_commit_entry>(&*decoded);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->key.group, "g");
  EXPECT_EQ(e->key.topic, "t");
  EXPECT_EQ(e->key.partition, 3);
  ASSERT_TRUE(e->value);
  EXPECT_EQ(e->value->offset, 42);
  EXPECT_EQ(e->value->leader_epoch, 7);
  EXPECT_EQ(e->value->metadata, "m");

  v.expire_timestamp = start_ms + 1000;
  EXPECT_EQ((*offset_commit_record("g", "t", 3, v).value)[1], 1);  // v1 carries the expire timestamp

  proto::group_metadata_value gv;
  gv.protocol_type = "consumer";
  gv.generation = 5;
  gv.protocol = "range";
  gv.leader = "m-1";
  auto& m = gv.members.emplace_back();
  m.member_id = "m-1";
  m.client_id = "c";
  m.client_host = "/127.0.0.1";
  m.session_timeout = 10'000;
  m.rebalance_timeout = 30'000;
  auto grec = group_metadata_record("g", gv);
  EXPECT_EQ(grec.key[1], 2);       // GroupMetadataKey v2
  EXPECT_EQ((*grec.value)[1], 3);  // GroupMetadataValue v3
  auto gdec = decode_record(grec.key, std::span<const uint8_t>(*grec.value));
  ASSERT_TRUE(gdec.ok());
  auto* ge = std::get_if<group_metadata_entry>(&*gdec);
  ASSERT_NE(ge, nullptr);
  EXPECT_EQ(*ge->value, gv);

  auto tomb = group_metadata_tombstone("g");
  auto tdec = decode_record(tomb.key, std::nullopt);
  ASSERT_TRUE(tdec.ok());
  EXPECT_FALSE(std::get<group_metadata_entry>(*tdec).value);

  std::vector<uint8_t> bad = {0, 1, 0};
  EXPECT_FALSE(decode_record(bad, std::nullopt).ok());
}

TEST(consumer_protocol, reads_subscribed_topics) {
  auto topics = subscription_topics(subscription({"a", "b"}));
  ASSERT_TRUE(topics);
  EXPECT_EQ(*topics, (std::set<std::string>{"a", "b"}));
  std::vector<uint8_t> garbage = {0, 0, 0x7f, 0xff, 0xff, 0xff};
  EXPECT_FALSE(subscription_topics(garbage));
}

// --- Classic protocol

TEST_F(coordinator_test, single_member_joins_syncs_and_heartbeats) {
  auto [id, generation] = stable_single_member("g");
  EXPECT_EQ(generation, 1);
  const auto* g = coordinator->find_group("g");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->state(), classic_group_state::stable);
  EXPECT_EQ(heartbeat("g", id, generation), to_wire(error_code::none));
  EXPECT_EQ(heartbeat("g", id, generation + 1), to_wire(error_code::illegal_generation));
  EXPECT_EQ(heartbeat("g", "stranger", generation), to_wire(error_code::unknown_member_id));
  EXPECT_EQ(heartbeat("nope", id, generation), to_wire(error_code::unknown_member_id));
  // The assignment was persisted as GroupMetadataValue (after the empty record of the group's creation).
  ASSERT_FALSE(writer.committed.empty());
  auto decoded = decode_record(writer.committed.back().second.key,
                               std::span<const uint8_t>(*writer.committed.back().second.value));
  ASSERT_TRUE(decoded.ok());
  const auto& value = *std::get<group_metadata_entry>(*decoded).value;
  EXPECT_EQ(value.generation, 1);
  ASSERT_EQ(value.members.size(), 1u);
  EXPECT_EQ(std::string(value.members[0].assignment.begin(), value.members[0].assignment.end()),
            "assignment");
  EXPECT_EQ(value.members[0].client_host, "/127.0.0.1");
}

TEST_F(coordinator_test, joins_before_v4_get_their_member_id_with_the_generation) {
  // JoinGroup v0-v3 has no MEMBER_ID_REQUIRED round: the member is added at once.
  auto joined = join(join_request("g", ""), 3);
  EXPECT_FALSE(joined->has_value());
  advance(config.initial_rebalance_delay_ms);
  ASSERT_TRUE(joined->has_value());
  EXPECT_EQ((*joined)->error_code, to_wire(error_code::none));
  EXPECT_EQ((*joined)->generation_id, 1);
  EXPECT_EQ((*joined)->leader, (*joined)->member_id);
}

TEST_F(coordinator_test, member_ids_start_with_the_client_id) {
  const std::string id = member_id_for("g", "rdkafka");
  EXPECT_EQ(id.rfind("rdkafka-", 0), 0u) << id;
  EXPECT_EQ(id.size(), std::string("rdkafka-").size() + 36);
}

TEST_F(coordinator_test, concurrent_joins_all_land_in_one_generation_without_unknown_member_id) {
  // Five consumers start at once: each first gets its id, then they all rejoin while the initial delay runs.
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(member_id_for("g", "c" + std::to_string(i)));
  std::vector<std::shared_ptr<std::optional<proto::join_group_response>>> answers;
  for (int i = 0; i < 5; ++i) {
    answers.push_back(join(join_request("g", ids[i]), 9, "c" + std::to_string(i)));
    advance(500);  // each new member extends the initial delay
  }
  for (const auto& a : answers) EXPECT_FALSE(a->has_value());
  // group.initial.rebalance.delay.ms is extended once more because members kept arriving during the first.
  advance(config.initial_rebalance_delay_ms);
  for (const auto& a : answers) EXPECT_FALSE(a->has_value());
  advance(config.initial_rebalance_delay_ms);
  int leaders = 0;
  for (size_t i = 0; i < answers.size(); ++i) {
    ASSERT_TRUE(answers[i]->has_value()) << i;
    const auto& r = **answers[i];
    EXPECT_EQ(r.error_code, to_wire(error_code::none)) << i;
    EXPECT_EQ(r.generation_id, 1);
    EXPECT_EQ(r.member_id, ids[i]);
    EXPECT_EQ(r.protocol_name, "range");
    if (r.leader == r.member_id) {
      ++leaders;
      EXPECT_EQ(r.members.size(), 5u);
    } else {
      EXPECT_TRUE(r.members.empty());
    }
  }
  EXPECT_EQ(leaders, 1);
  // Followers sync first and park; the leader's assignment releases everyone.
  std::vector<std::shared_ptr<std::optional<proto::sync_group_response>>> syncs;
  std::string leader;
  for (size_t i = 0; i < ids.size(); ++i) {
    if ((**answers[i]).leader == ids[i]) {
      leader = ids[i];
      continue;
    }
    syncs.push_back(sync("g", ids[i], 1));
  }
  for (const auto& s : syncs) EXPECT_FALSE(s->has_value());
  std::vector<std::pair<std::string, std::string>> assignment;
  for (const auto& id : ids) assignment.emplace_back(id, "for-" + id);
  syncs.push_back(sync("g", leader, 1, assignment));
  writer.complete_all();
  for (const auto& s : syncs) {
    ASSERT_TRUE(s->has_value());
    EXPECT_EQ((*s)->error_code, to_wire(error_code::none));
    EXPECT_EQ(std::string((*s)->assignment.begin(), (*s)->assignment.end()).rfind("for-", 0), 0u);
  }
  EXPECT_EQ(coordinator->find_group("g")->state(), classic_group_state::stable);
}

TEST_F(coordinator_test, a_new_member_rebalances_a_stable_group) {
  auto [a, generation] = stable_single_member("g");
  const std::string b = member_id_for("g", "b");
  auto b_join = join(join_request("g", b), 9, "b");
  EXPECT_FALSE(b_join->has_value());
  EXPECT_EQ(coordinator->find_group("g")->state(), classic_group_state::preparing_rebalance);
  // The old member learns of the rebalance from its heartbeat and rejoins; the join phase then completes.
  EXPECT_EQ(heartbeat("g", a, generation), to_wire(error_code::rebalance_in_progress));
  auto a_join = join(join_request("g", a));
  ASSERT_TRUE(a_join->has_value());
  ASSERT_TRUE(b_join->has_value());
  EXPECT_EQ((*a_join)->generation_id, generation + 1);
  EXPECT_EQ((*b_join)->generation_id, generation + 1);
  // SyncGroup of the old generation is refused.
  auto stale = sync("g", a, generation);
  ASSERT_TRUE(stale->has_value());
  EXPECT_EQ((*stale)->error_code, to_wire(error_code::illegal_generation));
}

TEST_F(coordinator_test, session_expiry_removes_the_member_and_empties_the_group) {
  auto [id, generation] = stable_single_member("g");
  advance(9'000);
  EXPECT_EQ(heartbeat("g", id, generation), to_wire(error_code::none));  // heartbeats keep the session
  advance(9'000);
  EXPECT_NE(coordinator->find_group("g")->members().size(), 0u);
  advance(1'001);  // 10 s after the last heartbeat
  const auto* g = coordinator->find_group("g");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->members().empty());
  EXPECT_EQ(g->state(), classic_group_state::empty);
  EXPECT_EQ(g->generation_id(), generation + 1);
  EXPECT_EQ(heartbeat("g", id, generation), to_wire(error_code::unknown_member_id));
}

TEST_F(coordinator_test, a_member_that_does_not_rejoin_is_dropped_after_the_rebalance_timeout) {
  auto [a, generation] = stable_single_member("g");
  const std::string b = member_id_for("g", "b");
  auto b_join = join(join_request("g", b), 9, "b");
  // a keeps heartbeating but never rejoins: after its rebalance timeout (30 s) the join completes without it.
  for (int i = 0; i < 6; ++i) {
    advance(5'000);
    heartbeat("g", a, generation);
  }
  advance(1);
  ASSERT_TRUE(b_join->has_value());
  EXPECT_EQ((*b_join)->error_code, to_wire(error_code::none));
  EXPECT_EQ((*b_join)->leader, b);
  EXPECT_FALSE(coordinator->find_group("g")->has_member(a));
}

TEST_F(coordinator_test, pending_member_that_never_rejoins_expires) {
  const std::string id = member_id_for("g");
  EXPECT_TRUE(coordinator->find_group("g")->is_pending_member(id));
  advance(10'001);
  EXPECT_FALSE(coordinator->find_group("g")->is_pending_member(id));
}

TEST_F(coordinator_test, static_member_rejoining_keeps_the_generation_and_fences_the_old_id) {
  // A static member needs no MEMBER_ID_REQUIRED round.
  auto first = join(join_request("g", "", "instance-1"));
  EXPECT_FALSE(first->has_value());
  advance(config.initial_rebalance_delay_ms);
  ASSERT_TRUE(first->has_value());
  const std::string old_id = (*first)->member_id;
  EXPECT_EQ(old_id.rfind("instance-1-", 0), 0u);
  auto s = sync("g", old_id, 1, {{old_id, "mine"}}, "instance-1");
  writer.complete_all();
  ASSERT_TRUE(s->has_value());

  // The same instance restarts (unknown member id): it gets a new id, no rebalance, its old assignment.
  auto again = join(join_request("g", "", "instance-1"), 9);
  EXPECT_FALSE(again->has_value());  // the new member id is persisted first
  writer.complete_all();
  ASSERT_TRUE(again->has_value());
  EXPECT_EQ((*again)->error_code, to_wire(error_code::none));
  EXPECT_EQ((*again)->generation_id, 1);
  EXPECT_NE((*again)->member_id, old_id);
  EXPECT_TRUE((*again)->skip_assignment);  // v9: the leader keeps the assignment (KIP-814)
  EXPECT_EQ(coordinator->find_group("g")->state(), classic_group_state::stable);
  EXPECT_EQ(heartbeat("g", old_id, 1, "instance-1"), to_wire(error_code::fenced_instance_id));
  EXPECT_EQ(heartbeat("g", (*again)->member_id, 1, "instance-1"), to_wire(error_code::none));
  auto s2 = sync("g", (*again)->member_id, 1, {}, "instance-1");
  ASSERT_TRUE(s2->has_value());
  EXPECT_EQ(std::string((*s2)->assignment.begin(), (*s2)->assignment.end()), "mine");
}

TEST_F(coordinator_test, static_member_survives_its_session_only_through_heartbeats) {
  auto first = join(join_request("g", "", "i"));
  advance(config.initial_rebalance_delay_ms);
  const std::string id = (*first)->member_id;
  sync("g", id, 1, {{id, "x"}}, "i");
  writer.complete_all();
  advance(10'001);
  EXPECT_FALSE(coordinator->find_group("g")->has_member(id));
}

TEST_F(coordinator_test, protocol_checks_and_selection) {
  auto a = join(join_request("g", "", "a", {"range", "roundrobin"}));
  auto b = join(join_request("g", "", "b", {"roundrobin", "range"}));
  auto c = join(join_request("g", "", "c", {"roundrobin"}));
  // Another protocol type, or no common protocol, is refused.
  auto other_type = join(join_request("g", "", "d", {"range"}, "connect"));
  ASSERT_TRUE(other_type->has_value());
  EXPECT_EQ((*other_type)->error_code, to_wire(error_code::inconsistent_group_protocol));
  auto no_common = join(join_request("g", "", "e", {"sticky"}));
  ASSERT_TRUE(no_common->has_value());
  EXPECT_EQ((*no_common)->error_code, to_wire(error_code::inconsistent_group_protocol));
  advance(config.initial_rebalance_delay_ms);  // extended once for the later members
  advance(config.initial_rebalance_delay_ms);
  ASSERT_TRUE(a->has_value());
  // roundrobin is the only protocol all three support.
  EXPECT_EQ((*a)->protocol_name, "roundrobin");
  EXPECT_EQ((*c)->protocol_name, "roundrobin");
  (void)b;
}

TEST_F(coordinator_test, session_timeout_outside_the_bounds_is_refused) {
  auto r = join_request("g", "");
  r.session_timeout_ms = 1000;
  auto answer = join(r);
  ASSERT_TRUE(answer->has_value());
  EXPECT_EQ((*answer)->error_code, to_wire(error_code::invalid_session_timeout));
  auto empty_group = join(join_request("", ""));
  EXPECT_EQ((*empty_group)->error_code, to_wire(error_code::invalid_group_id));
  auto unknown = join(join_request("nope", "made-up"));
  EXPECT_EQ((*unknown)->error_code, to_wire(error_code::unknown_member_id));
}

TEST_F(coordinator_test, group_max_size_is_enforced) {
  config.max_group_size = 2;
  coordinator = std::make_unique<group_coordinator>(config, writer, [this] { return now; });
  coordinator->begin_loading(0);
  coordinator->complete_loading(0);
  auto a = join(join_request("g", "", "a"));
  auto b = join(join_request("g", "", "b"));
  auto c = join(join_request("g", "", "c"));
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->error_code, to_wire(error_code::group_max_size_reached));
  advance(config.initial_rebalance_delay_ms);
  advance(config.initial_rebalance_delay_ms);
  ASSERT_TRUE(a->has_value());
  ASSERT_TRUE(b->has_value());
  EXPECT_EQ((*a)->error_code, to_wire(error_code::none));
  EXPECT_EQ((*b)->error_code, to_wire(error_code::none));
}

TEST_F(coordinator_test, leave_group_rebalances_and_delete_groups_needs_an_empty_group) {
  auto [id, generation] = stable_single_member("g");
  std::optional<std::vector<proto::delete_groups_response::deletable_group_result>> deleted;
  coordinator->delete_groups({"g", "unknown"}, [&](auto r) { deleted = std::move(r); });
  ASSERT_TRUE(deleted);
  EXPECT_EQ((*deleted)[0].error_code, to_wire(error_code::non_empty_group));
  EXPECT_EQ((*deleted)[1].error_code, to_wire(error_code::group_id_not_found));

  proto::leave_group_request leave;
  leave.group_id = "g";
  leave.members.push_back({id, std::nullopt, std::nullopt});
  leave.members.push_back({"stranger", std::nullopt, std::nullopt});
  auto left = coordinator->leave_group({"client", "/127.0.0.1", 5}, leave);
  ASSERT_EQ(left.members.size(), 2u);
  EXPECT_EQ(left.members[0].error_code, to_wire(error_code::none));
  EXPECT_EQ(left.members[1].error_code, to_wire(error_code::unknown_member_id));
  EXPECT_EQ(coordinator->find_group("g")->state(), classic_group_state::empty);

  ASSERT_TRUE(commit(commit_request("g", 10)).has_value());
  deleted.reset();
  coordinator->delete_groups({"g"}, [&](auto r) { deleted = std::move(r); });
  EXPECT_FALSE(deleted);  // tombstones are written first
  writer.complete_all();
  ASSERT_TRUE(deleted);
  EXPECT_EQ((*deleted)[0].error_code, to_wire(error_code::none));
  EXPECT_EQ(coordinator->find_group("g"), nullptr);
  EXPECT_EQ(coordinator->find_offset("g", "events", 0), nullptr);
  (void)generation;
}

TEST_F(coordinator_test, list_and_describe_groups) {
  auto [id, generation] = stable_single_member("live");
  commit(commit_request("simple", 5));
  proto::list_groups_request all;
  auto listed = coordinator->list_groups(all);
  ASSERT_EQ(listed.groups.size(), 2u);
  proto::list_groups_request stable_only;
  stable_only.states_filter = {"STABLE"};
  listed = coordinator->list_groups(stable_only);
  ASSERT_EQ(listed.groups.size(), 1u);
  EXPECT_EQ(listed.groups[0].group_id, "live");
  EXPECT_EQ(listed.groups[0].protocol_type, "consumer");
  EXPECT_EQ(listed.groups[0].group_type, "classic");
  proto::list_groups_request consumer_type;
  consumer_type.types_filter = {"consumer"};
  EXPECT_TRUE(coordinator->list_groups(consumer_type).groups.empty());

  auto described = coordinator->describe_groups({"live", "simple", "missing"});
  ASSERT_EQ(described.size(), 3u);
  EXPECT_EQ(described[0].group_state, "Stable");
  EXPECT_EQ(described[0].protocol_data, "range");
  ASSERT_EQ(described[0].members.size(), 1u);
  EXPECT_EQ(described[0].members[0].member_id, id);
  EXPECT_EQ(described[0].members[0].client_id, "client");
  EXPECT_FALSE(described[0].members[0].member_metadata.empty());
  EXPECT_EQ(described[1].group_state, "Empty");
  EXPECT_EQ(described[1].protocol_type, "");
  EXPECT_EQ(described[2].group_state, "Dead");
  EXPECT_EQ(described[2].error_code, to_wire(error_code::none));
  (void)generation;
}

// --- Offsets

TEST_F(coordinator_test, simple_commit_then_fetch_sees_it_once_committed) {
  std::optional<proto::offset_commit_response> answer;
  coordinator->commit_offsets({"client", "/127.0.0.1", 9}, commit_request("simple", 17),
                              [&](auto r) { answer = std::move(r); });
  EXPECT_FALSE(answer);                                                     // waits for the append
  EXPECT_EQ(fetch("simple").topics[0].partitions[0].committed_offset, -1);  // not visible before the commit
  writer.complete_all();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->topics[0].partitions[0].error_code, to_wire(error_code::none));
  auto fetched = fetch("simple");
  ASSERT_EQ(fetched.topics.size(), 1u);
  ASSERT_EQ(fetched.topics[0].partitions.size(), 2u);
  EXPECT_EQ(fetched.topics[0].partitions[0].committed_offset, 17);
  EXPECT_EQ(fetched.topics[0].partitions[0].committed_leader_epoch, 3);
  EXPECT_EQ(fetched.topics[0].partitions[0].metadata, "meta");
  EXPECT_EQ(fetched.topics[0].partitions[1].committed_offset, -1);
  auto all = fetch("simple", true);
  ASSERT_EQ(all.topics.size(), 1u);
  EXPECT_EQ(all.topics[0].partitions.size(), 1u);
  EXPECT_EQ(fetch("nobody").topics[0].partitions[0].committed_offset, -1);
}

TEST_F(coordinator_test, require_stable_fetch_waits_for_commits_in_flight) {
  coordinator->commit_offsets({"client", "/127.0.0.1", 9}, commit_request("g", 5), [](auto) {});
  proto::offset_fetch_request::offset_fetch_request_group g;
  g.group_id = "g";
  g.topics = std::nullopt;
  std::optional<proto::offset_fetch_response::offset_fetch_response_group> out;
  coordinator->fetch_offsets(g, true, [&](auto r) { out = std::move(r); });
  EXPECT_FALSE(out);
  writer.complete_all();
  ASSERT_TRUE(out);
  ASSERT_EQ(out->topics.size(), 1u);
  EXPECT_EQ(out->topics[0].partitions[0].committed_offset, 5);
}

TEST_F(coordinator_test, member_commits_are_checked_against_the_generation) {
  auto [id, generation] = stable_single_member("g");
  auto ok = commit(commit_request("g", 1, generation, id));
  EXPECT_EQ(ok->topics[0].partitions[0].error_code, to_wire(error_code::none));
  auto stale = commit(commit_request("g", 2, generation - 1, id));
  EXPECT_EQ(stale->topics[0].partitions[0].error_code, to_wire(error_code::illegal_generation));
  auto unknown = commit(commit_request("g", 2, generation, "stranger"));
  EXPECT_EQ(unknown->topics[0].partitions[0].error_code, to_wire(error_code::unknown_member_id));
  // A groupless commit to an active group is refused.
  auto simple = commit(commit_request("g", 2));
  EXPECT_EQ(simple->topics[0].partitions[0].error_code, to_wire(error_code::unknown_member_id));
  // A member commit to a group that does not exist: GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before.
  EXPECT_EQ(commit(commit_request("none", 1, 3, "m"), 9)->topics[0].partitions[0].error_code,
            to_wire(error_code::group_id_not_found));
  EXPECT_EQ(commit(commit_request("none", 1, 3, "m"), 8)->topics[0].partitions[0].error_code,
            to_wire(error_code::illegal_generation));
  auto big = commit_request("g", 3, generation, id);
  big.topics[0].partitions[0].committed_metadata = std::string(5000, 'x');
  EXPECT_EQ(commit(big)->topics[0].partitions[0].error_code, to_wire(error_code::offset_metadata_too_large));
  EXPECT_EQ(coordinator->find_offset("g", "events", 0)->offset, 1);
}

TEST_F(coordinator_test, failed_append_is_reported_and_not_applied) {
  std::optional<proto::offset_commit_response> answer;
  coordinator->commit_offsets({"client", "/127.0.0.1", 9}, commit_request("g", 9),
                              [&](auto r) { answer = std::move(r); });
  writer.complete_all(error_code::not_enough_replicas);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->topics[0].partitions[0].error_code, to_wire(error_code::coordinator_not_available));
  EXPECT_EQ(coordinator->find_offset("g", "events", 0), nullptr);
}

TEST_F(coordinator_test, offset_delete_refuses_subscribed_topics_of_active_groups) {
  auto [id, generation] = stable_single_member("g");
  commit(commit_request("g", 4, generation, id));
  auto answer = delete_offset("g", "events");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->topics[0].partitions[0].error_code, to_wire(error_code::group_subscribed_to_topic));
  answer = delete_offset("g", "other");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->topics[0].partitions[0].error_code, to_wire(error_code::none));
  EXPECT_NE(coordinator->find_offset("g", "events", 0), nullptr);
}

TEST_F(coordinator_test, offsets_of_an_empty_group_expire_after_the_retention) {
  commit(commit_request("g", 4));
  coordinator->cleanup_group_metadata();
  writer.complete_all();
  EXPECT_NE(coordinator->find_offset("g", "events", 0), nullptr);
  now += config.offsets_retention_ms;
  coordinator->cleanup_group_metadata();
  writer.complete_all();
  EXPECT_EQ(coordinator->find_offset("g", "events", 0), nullptr);
  EXPECT_EQ(coordinator->find_group("g"), nullptr);
  // Tombstones for the offset and the group.
  size_t tombstones = 0;
  for (const auto& [p, r] : writer.committed) tombstones += r.value ? 0 : 1;
  EXPECT_EQ(tombstones, 2u);
}

// --- Persistence

TEST_F(coordinator_test, replaying_the_log_restores_groups_and_offsets) {
  auto [id, generation] = stable_single_member("g");
  commit(commit_request("g", 11, generation, id));
  commit(commit_request("simple", 3));
  commit(commit_request("simple", 4));  // the later commit wins
  coordinator->delete_groups({"gone"}, [](auto) {});
  writer.complete_all();

  fake_writer other_writer;
  group_coordinator restarted(config, other_writer, [this] { return now; });
  restarted.begin_loading(0);
  // While loading, requests are told to come back.
  std::optional<proto::join_group_response> during;
  restarted.join_group({"c", "/h", 9}, join_request("g", ""), [&](auto r) { during = std::move(r); });
  ASSERT_TRUE(during);
  EXPECT_EQ(during->error_code, to_wire(error_code::coordinator_load_in_progress));
  replay_committed(writer, restarted);
  restarted.complete_loading(0);
  const auto* g = restarted.find_group("g");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->state(), classic_group_state::stable);
  EXPECT_EQ(g->generation_id(), generation);
  ASSERT_TRUE(g->has_member(id));
  EXPECT_EQ(restarted.find_offset("g", "events", 0)->offset, 11);
  EXPECT_EQ(restarted.find_offset("simple", "events", 0)->offset, 4);
  ASSERT_NE(restarted.find_group("simple"), nullptr);
  EXPECT_TRUE(restarted.find_group("simple")->is_simple());
  // The member resumes with its generation; without heartbeats its session expires.
  proto::heartbeat_request hb;
  hb.group_id = "g";
  hb.member_id = id;
  hb.generation_id = generation;
  EXPECT_EQ(restarted.heartbeat({"c", "/h", 4}, hb).error_code, to_wire(error_code::none));
  now += 10'001;
  restarted.run_expired_timers();
  EXPECT_FALSE(restarted.find_group("g")->has_member(id));
}

TEST_F(coordinator_test, unloading_answers_parked_requests_not_coordinator) {
  const std::string id = member_id_for("g");
  auto parked = join(join_request("g", id));
  EXPECT_FALSE(parked->has_value());
  coordinator->unload(0);
  ASSERT_TRUE(parked->has_value());
  EXPECT_EQ((*parked)->error_code, to_wire(error_code::not_coordinator));
  EXPECT_EQ(heartbeat("g", id, 0), to_wire(error_code::not_coordinator));
  EXPECT_EQ(coordinator->status_of(0), partition_status::not_owned);
}

// --- Transactions (TxnOffsetCommit and markers)

class transactional_offsets_test : public coordinator_test {
 protected:
  static constexpr int64_t producer_a = 4000;
  static constexpr int64_t producer_b = 5000;

  static proto::txn_offset_commit_request txn_request(const std::string& group, int64_t producer_id,
                                                      std::vector<std::pair<int32_t, int64_t>> offsets,
                                                      int32_t generation = -1,
                                                      const std::string& member = "") {
    proto::txn_offset_commit_request r;
    r.transactional_id = "txn-" + std::to_string(producer_id);
    r.group_id = group;
    r.producer_id = producer_id;
    r.producer_epoch = 2;
    r.generation_id_or_member_epoch = generation;
    r.member_id = member;
    auto& t = r.topics.emplace_back();
    t.name = "events";
    for (auto [partition, offset] : offsets) {
      auto& p = t.partitions.emplace_back();
      p.partition_index = partition;
      p.committed_offset = offset;
      p.committed_leader_epoch = 1;
      p.committed_metadata = "txn";
    }
    return r;
  }

  // Sends the TxnOffsetCommit and completes its write: the error of each partition.
  std::vector<int16_t> txn_commit(proto::txn_offset_commit_request r, int16_t version = 3) {
    std::optional<proto::txn_offset_commit_response> out;
    coordinator->commit_transactional_offsets({"producer", "/127.0.0.1", version}, std::move(r),
                                              [&out](auto resp) { out = std::move(resp); });
    writer.complete_all();
    EXPECT_TRUE(out);
    std::vector<int16_t> errors;
    if (out) {
      for (const auto& t : out->topics) {
        for (const auto& p : t.partitions) errors.push_back(p.error_code);
      }
    }
    return errors;
  }

  static txn_marker_write marker(int64_t producer_id, bool commit) {
    return txn_marker_write{producer_id, 2, commit, /*coordinator_epoch=*/7, /*transaction_version=*/0};
  }

  // Writes the marker on partition 0 and completes its write: complete_transaction's answer.
  error_code end_transaction(int64_t producer_id, bool commit, error_code append_error = error_code::none) {
    std::optional<error_code> out;
    coordinator->complete_transaction(0, marker(producer_id, commit), [&out](error_code e) { out = e; });
    writer.complete_all(append_error);
    EXPECT_TRUE(out);
    return out.value_or(error_code::unknown_server_error);
  }

  int64_t fetched(const proto::offset_fetch_response::offset_fetch_response_group& g, int32_t partition) {
    for (const auto& t : g.topics) {
      for (const auto& p : t.partitions) {
        if (p.partition_index == partition) return p.committed_offset;
      }
    }
    return -2;
  }
};

TEST_F(transactional_offsets_test, pending_offsets_are_invisible_until_the_commit_marker) {
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 42}})), std::vector<int16_t>{0});
  // Written as the producer's transactional batch.
  ASSERT_FALSE(writer.log.empty());
  EXPECT_EQ(writer.log.back().producer_id, producer_a);
  EXPECT_EQ(coordinator->find_offset("g", "events", 0), nullptr);
  EXPECT_EQ(fetched(fetch("g"), 0), -1);
  EXPECT_TRUE(fetch("g", true).topics.empty());
  ASSERT_NE(coordinator->find_pending_offset(producer_a, "g", "events", 0), nullptr);
  // The group exists (a simple group), as Kafka creates it for the offsets.
  ASSERT_NE(coordinator->find_group("g"), nullptr);

  // Nothing changes until the marker's write is committed.
  std::optional<error_code> answer;
  coordinator->complete_transaction(0, marker(producer_a, true), [&](error_code e) { answer = e; });
  EXPECT_FALSE(answer);
  EXPECT_EQ(coordinator->find_offset("g", "events", 0), nullptr);
  writer.complete_all();
  ASSERT_TRUE(answer);
  EXPECT_EQ(*answer, error_code::none);
  ASSERT_TRUE(writer.log.back().marker);
  EXPECT_TRUE(writer.log.back().marker->commit);
  EXPECT_EQ(writer.log.back().marker->producer_id, producer_a);
  EXPECT_EQ(fetched(fetch("g"), 0), 42);
  EXPECT_EQ(coordinator->find_offset("g", "events", 0)->metadata, "txn");
  EXPECT_EQ(coordinator->find_pending_offset(producer_a, "g", "events", 0), nullptr);
  // A retried marker (written again) completes nothing more.
  EXPECT_EQ(end_transaction(producer_a, false), error_code::none);
  EXPECT_EQ(fetched(fetch("g"), 0), 42);
}

TEST_F(transactional_offsets_test, an_abort_marker_drops_the_pending_offsets) {
  commit(commit_request("g", 10));
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 42}, {1, 43}})), (std::vector<int16_t>{0, 0}));
  EXPECT_EQ(end_transaction(producer_a, false), error_code::none);
  EXPECT_EQ(fetched(fetch("g"), 0), 10);
  EXPECT_EQ(fetched(fetch("g"), 1), -1);
  EXPECT_EQ(coordinator->find_pending_offset(producer_a, "g", "events", 0), nullptr);
  // A commit marker afterwards has nothing left to commit.
  EXPECT_EQ(end_transaction(producer_a, true), error_code::none);
  EXPECT_EQ(fetched(fetch("g"), 0), 10);
}

TEST_F(transactional_offsets_test, interleaved_producers_complete_independently) {
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 5}})), std::vector<int16_t>{0});
  EXPECT_EQ(txn_commit(txn_request("g", producer_b, {{0, 7}, {1, 8}})), (std::vector<int16_t>{0, 0}));
  EXPECT_EQ(end_transaction(producer_b, true), error_code::none);
  EXPECT_EQ(fetched(fetch("g"), 0), 7);
  EXPECT_EQ(fetched(fetch("g"), 1), 8);
  ASSERT_NE(coordinator->find_pending_offset(producer_a, "g", "events", 0), nullptr);
  // A's offset was written before B's: committing A later keeps B's, the latest in the log.
  EXPECT_EQ(end_transaction(producer_a, true), error_code::none);
  EXPECT_EQ(fetched(fetch("g"), 0), 7);
  EXPECT_EQ(coordinator->find_pending_offset(producer_a, "g", "events", 0), nullptr);
}

TEST_F(transactional_offsets_test, a_plain_commit_written_after_the_transactional_one_wins) {
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 5}, {1, 6}})), (std::vector<int16_t>{0, 0}));
  commit(commit_request("g", 9));  // partition 0 only
  EXPECT_EQ(end_transaction(producer_a, true), error_code::none);
  EXPECT_EQ(fetched(fetch("g"), 0), 9);
  EXPECT_EQ(fetched(fetch("g"), 1), 6);
}

TEST_F(transactional_offsets_test, replay_keeps_open_transactions_pending_and_a_later_marker_completes_them) {
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 5}})), std::vector<int16_t>{0});
  EXPECT_EQ(txn_commit(txn_request("g", producer_b, {{1, 11}})), std::vector<int16_t>{0});
  commit(commit_request("other", 3));
  EXPECT_EQ(end_transaction(producer_a, true), error_code::none);
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 6}})), std::vector<int16_t>{0});
  EXPECT_EQ(end_transaction(producer_a, false), error_code::none);

  // Failover: another coordinator loads the same log (B's transaction still open).
  testing::replayed_coordinator restarted(
      config, [this] { return now; }, topic_catalog{}, writer);
  auto& c = restarted.coordinator;
  ASSERT_NE(c.find_offset("g", "events", 0), nullptr);
  EXPECT_EQ(c.find_offset("g", "events", 0)->offset, 5);  // A's committed txn, not its aborted one
  EXPECT_EQ(c.find_pending_offset(producer_a, "g", "events", 0), nullptr);
  EXPECT_EQ(c.find_offset("g", "events", 1), nullptr);  // B's offset stays pending
  ASSERT_NE(c.find_pending_offset(producer_b, "g", "events", 1), nullptr);
  EXPECT_EQ(c.find_pending_offset(producer_b, "g", "events", 1)->offset, 11);
  EXPECT_EQ(c.find_offset("other", "events", 0)->offset, 3);

  // The transaction coordinator's marker reaches the new coordinator.
  std::optional<error_code> answer;
  c.complete_transaction(0, marker(producer_b, true), [&](error_code e) { answer = e; });
  restarted.writer.complete_all();
  ASSERT_TRUE(answer);
  EXPECT_EQ(*answer, error_code::none);
  ASSERT_NE(c.find_offset("g", "events", 1), nullptr);
  EXPECT_EQ(c.find_offset("g", "events", 1)->offset, 11);
}

TEST_F(transactional_offsets_test, replay_of_a_tombstone_drops_pending_offsets_of_its_partition) {
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 5}, {1, 6}})), (std::vector<int16_t>{0, 0}));
  auto answer = delete_offset("g", "events");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->topics[0].partitions[0].error_code, to_wire(error_code::none));
  // The tombstone was written although only a pending offset existed, and dropped it.
  EXPECT_EQ(coordinator->find_pending_offset(producer_a, "g", "events", 0), nullptr);
  ASSERT_NE(coordinator->find_pending_offset(producer_a, "g", "events", 1), nullptr);
  testing::replayed_coordinator restarted(
      config, [this] { return now; }, topic_catalog{}, writer);
  EXPECT_EQ(restarted.coordinator.find_pending_offset(producer_a, "g", "events", 0), nullptr);
  EXPECT_NE(restarted.coordinator.find_pending_offset(producer_a, "g", "events", 1), nullptr);
  EXPECT_EQ(end_transaction(producer_a, true), error_code::none);
  EXPECT_EQ(coordinator->find_offset("g", "events", 0), nullptr);
  EXPECT_EQ(coordinator->find_offset("g", "events", 1)->offset, 6);
}

TEST_F(transactional_offsets_test, require_stable_answers_unstable_offset_commit_for_pending_partitions) {
  commit(commit_request("g", 10));
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 42}})), std::vector<int16_t>{0});
  auto listed = fetch("g", false, true);
  ASSERT_EQ(listed.topics.size(), 1u);
  ASSERT_EQ(listed.topics[0].partitions.size(), 2u);
  EXPECT_EQ(listed.topics[0].partitions[0].error_code, to_wire(error_code::unstable_offset_commit));
  EXPECT_EQ(listed.topics[0].partitions[0].committed_offset, -1);
  EXPECT_EQ(listed.topics[0].partitions[0].committed_leader_epoch, -1);
  EXPECT_EQ(listed.topics[0].partitions[1].error_code, to_wire(error_code::none));
  auto all = fetch("g", true, true);
  ASSERT_EQ(all.topics.size(), 1u);
  ASSERT_EQ(all.topics[0].partitions.size(), 1u);
  EXPECT_EQ(all.topics[0].partitions[0].error_code, to_wire(error_code::unstable_offset_commit));
  // Without RequireStable the committed offset is answered.
  EXPECT_EQ(fetched(fetch("g"), 0), 10);
  EXPECT_EQ(end_transaction(producer_a, true), error_code::none);
  auto stable = fetch("g", false, true);
  EXPECT_EQ(stable.topics[0].partitions[0].error_code, to_wire(error_code::none));
  EXPECT_EQ(stable.topics[0].partitions[0].committed_offset, 42);
}

TEST_F(transactional_offsets_test, commits_are_checked_like_kafka) {
  const auto only = [](error_code e) { return std::vector<int16_t>{to_wire(e)}; };
  EXPECT_EQ(txn_commit(txn_request("", producer_a, {{0, 1}})), only(error_code::invalid_group_id));
  // An unknown group: generation -1 makes a simple group, a generation is refused.
  EXPECT_EQ(txn_commit(txn_request("none", producer_a, {{0, 1}}, 4, "m")),
            only(error_code::illegal_generation));
  EXPECT_EQ(coordinator->find_group("none"), nullptr);

  auto [id, generation] = stable_single_member("g");
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 1}}, generation, id)), only(error_code::none));
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 1}}, generation + 1, id)),
            only(error_code::illegal_generation));
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 1}}, generation, "stranger")),
            only(error_code::unknown_member_id));
  // Without member fields (TxnOffsetCommit v0-v2) the commit is accepted whatever the group's state.
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 1}}), 2), only(error_code::none));
  auto big = txn_request("g", producer_a, {{0, 1}, {1, 2}}, generation, id);
  big.topics[0].partitions[0].committed_metadata = std::string(5000, 'x');
  EXPECT_EQ(txn_commit(big), (std::vector<int16_t>{to_wire(error_code::offset_metadata_too_large), 0}));

  // A failed append: the client's error, nothing pending.
  std::optional<proto::txn_offset_commit_response> failed;
  coordinator->commit_transactional_offsets({"p", "/h", 3}, txn_request("g", producer_b, {{0, 9}}),
                                            [&](auto r) { failed = std::move(r); });
  writer.complete_all(error_code::not_enough_replicas);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->topics[0].partitions[0].error_code, to_wire(error_code::coordinator_not_available));
  EXPECT_EQ(coordinator->find_pending_offset(producer_b, "g", "events", 0), nullptr);

  // A zombie producer: the partition's producer state refuses the batch.
  failed.reset();
  coordinator->commit_transactional_offsets({"p", "/h", 3}, txn_request("g", producer_b, {{0, 9}}),
                                            [&](auto r) { failed = std::move(r); });
  writer.complete_all(error_code::invalid_producer_epoch);
  EXPECT_EQ(failed->topics[0].partitions[0].error_code, to_wire(error_code::invalid_producer_epoch));

  coordinator->unload(0);
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 1}})), only(error_code::not_coordinator));
  coordinator->begin_loading(0);
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 1}})),
            only(error_code::coordinator_load_in_progress));
}

TEST_F(transactional_offsets_test, a_static_member_with_another_member_id_is_fenced) {
  const std::string group = "static";
  auto joined = join(join_request(group, "", std::string("instance-1")));
  advance(config.initial_rebalance_delay_ms);
  ASSERT_TRUE(joined->has_value());
  const std::string id = (*joined)->member_id;
  const int32_t generation = (*joined)->generation_id;
  auto synced = sync(group, id, generation, {{id, "a"}}, std::string("instance-1"));
  writer.complete_all();
  ASSERT_TRUE(synced->has_value());
  auto r = txn_request(group, producer_a, {{0, 1}}, generation, "not-" + id);
  r.group_instance_id = "instance-1";
  EXPECT_EQ(txn_commit(r), std::vector<int16_t>{to_wire(error_code::fenced_instance_id)});
}

TEST_F(transactional_offsets_test,
       complete_transaction_answers_coordinator_errors_and_applies_nothing_on_failure) {
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 5}})), std::vector<int16_t>{0});
  // The append fails: the pending offset stays for the retried marker.
  EXPECT_EQ(end_transaction(producer_a, true, error_code::not_enough_replicas),
            error_code::not_enough_replicas);
  EXPECT_EQ(coordinator->find_offset("g", "events", 0), nullptr);
  ASSERT_NE(coordinator->find_pending_offset(producer_a, "g", "events", 0), nullptr);
  EXPECT_EQ(end_transaction(producer_a, true), error_code::none);
  EXPECT_EQ(coordinator->find_offset("g", "events", 0)->offset, 5);

  // The partition moves while the marker is written: nothing applied.
  EXPECT_EQ(txn_commit(txn_request("g", producer_b, {{0, 6}})), std::vector<int16_t>{0});
  std::optional<error_code> lost;
  coordinator->complete_transaction(0, marker(producer_b, true), [&](error_code e) { lost = e; });
  coordinator->unload(0);
  writer.complete_all();
  ASSERT_TRUE(lost);
  EXPECT_EQ(*lost, error_code::not_leader_or_follower);

  std::optional<error_code> answer;
  coordinator->complete_transaction(0, marker(producer_b, true), [&](error_code e) { answer = e; });
  EXPECT_EQ(answer, error_code::not_coordinator);
  coordinator->begin_loading(0);
  answer.reset();
  coordinator->complete_transaction(0, marker(producer_b, true), [&](error_code e) { answer = e; });
  EXPECT_EQ(answer, error_code::coordinator_load_in_progress);
  EXPECT_TRUE(writer.pending.empty());  // nothing written
}

TEST_F(transactional_offsets_test, retention_keeps_offsets_and_groups_of_open_transactions) {
  commit(commit_request("g", 4));
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 5}})), std::vector<int16_t>{0});
  EXPECT_EQ(txn_commit(txn_request("pending-only", producer_a, {{0, 1}})), std::vector<int16_t>{0});
  now += config.offsets_retention_ms;
  coordinator->cleanup_group_metadata();
  writer.complete_all();
  // The expired offset has a pending one: kept; the groups have open transactions: kept.
  ASSERT_NE(coordinator->find_offset("g", "events", 0), nullptr);
  ASSERT_NE(coordinator->find_group("g"), nullptr);
  ASSERT_NE(coordinator->find_group("pending-only"), nullptr);
  EXPECT_EQ(end_transaction(producer_a, false), error_code::none);
  coordinator->cleanup_group_metadata();
  writer.complete_all();
  EXPECT_EQ(coordinator->find_offset("g", "events", 0), nullptr);
  EXPECT_EQ(coordinator->find_group("g"), nullptr);
  EXPECT_EQ(coordinator->find_group("pending-only"), nullptr);
}

TEST_F(transactional_offsets_test, delete_groups_tombstones_pending_only_partitions) {
  commit(commit_request("g", 4));
  EXPECT_EQ(txn_commit(txn_request("g", producer_a, {{0, 5}, {1, 6}})), (std::vector<int16_t>{0, 0}));
  const size_t before = writer.committed.size();
  std::optional<std::vector<proto::delete_groups_response::deletable_group_result>> answer;
  coordinator->delete_groups({"g"}, [&](auto r) { answer = std::move(r); });
  writer.complete_all();
  ASSERT_TRUE(answer);
  EXPECT_EQ((*answer)[0].error_code, to_wire(error_code::none));
  // Tombstones: events-0 (committed), events-1 (pending only), the group.
  EXPECT_EQ(writer.committed.size() - before, 3u);
  EXPECT_EQ(coordinator->find_pending_offset(producer_a, "g", "events", 1), nullptr);
  EXPECT_EQ(end_transaction(producer_a, true), error_code::none);
  EXPECT_EQ(coordinator->find_offset("g", "events", 0), nullptr);
  EXPECT_EQ(coordinator->find_offset("g", "events", 1), nullptr);
}

}  // namespace
}  // namespace mala::coordinator
