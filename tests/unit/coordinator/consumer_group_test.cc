// The KIP-848 consumer protocol in the group coordinator: assignors, reconciliation with incremental
// revocation, epochs and fencing, static members, leaving, session expiry, offsets with member epochs, the
// records written to __consumer_offsets and their replay. Fake writer and clock as in group_coordinator_test.
#include <gtest/gtest.h>

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "coordinator_test_util.h"
#include "mala/coordinator/consumer_group.h"
#include "mala/coordinator/group_coordinator.h"
#include "mala/coordinator/group_records.h"

namespace mala::coordinator {
namespace {

namespace proto = mala::protocol;

using testing::fake_writer;
using testing::replayed_coordinator;

uuid topic_uuid(uint8_t n) {
  uuid u;
  u.bytes[15] = n;
  u.bytes[0] = 0x40;
  return u;
}

topic_catalog catalog_with(std::vector<std::pair<std::string, int32_t>> topics) {
  topic_catalog c;
  uint8_t n = 1;
  for (auto& [name, parts] : topics) c.by_name[name] = topic_info{name, topic_uuid(n++), parts, false};
  return c;
}

size_t count(const topic_partitions& tp) {
  return partition_count(tp);
}

class consumer_group_test : public ::testing::Test {
 protected:
  void SetUp() override {
    config.offsets_topic_num_partitions = 1;
    config.consumer_session_timeout_ms = 10'000;
    config.consumer_heartbeat_interval_ms = 1'000;
    coordinator = std::make_unique<group_coordinator>(config, writer, [this] { return now; });
    coordinator->begin_loading(0);
    coordinator->complete_loading(0);
    catalog = catalog_with({{"bus-events", 6}, {"other", 2}, {"__consumer_offsets", 1}});
    catalog.by_name["__consumer_offsets"].internal = true;
    coordinator->set_topics(catalog);
  }

  proto::consumer_group_heartbeat_response beat(proto::consumer_group_heartbeat_request r) {
    std::optional<proto::consumer_group_heartbeat_response> out;
    coordinator->consumer_group_heartbeat({"client", "/127.0.0.1", 1}, std::move(r),
                                          [&](proto::consumer_group_heartbeat_response resp) { out = resp; });
    writer.complete_all();
    EXPECT_TRUE(out.has_value());
    return out.value_or(proto::consumer_group_heartbeat_response{});
  }

  proto::consumer_group_heartbeat_request join_req(const std::string& member,
                                                   std::vector<std::string> topics = {"bus-events"},
                                                   std::optional<std::string> instance = std::nullopt) {
    proto::consumer_group_heartbeat_request r;
    r.group_id = "alerts";
    r.member_id = member;
    r.member_epoch = 0;
    r.rebalance_timeout_ms = 30'000;
    r.subscribed_topic_names = std::move(topics);
    r.instance_id = std::move(instance);
    r.topic_partitions.emplace();
    return r;
  }

  proto::consumer_group_heartbeat_request beat_req(const std::string& member, int32_t epoch,
                                                   std::optional<topic_partitions> owned = std::nullopt) {
    proto::consumer_group_heartbeat_request r;
    r.group_id = "alerts";
    r.member_id = member;
    r.member_epoch = epoch;
    if (owned) {
      r.topic_partitions.emplace();
      for (const auto& [t, ps] : *owned) {
        auto& e = r.topic_partitions->emplace_back();
        e.topic_id = t;
        e.partitions.assign(ps.begin(), ps.end());
      }
    }
    return r;
  }

  static topic_partitions assignment_of(const proto::consumer_group_heartbeat_response& r) {
    topic_partitions out;
    if (!r.assignment) return out;
    for (const auto& t : r.assignment->topic_partitions) {
      if (!t.partitions.empty()) out[t.topic_id].insert(t.partitions.begin(), t.partitions.end());
    }
    return out;
  }

  // Heartbeats every member (owning what it was last given) until nothing changes.
  void converge(std::map<std::string, std::pair<int32_t, topic_partitions>>& members) {
    for (int round = 0; round < 10; ++round) {
      bool changed = false;
      for (auto& [id, st] : members) {
        auto r = beat(beat_req(id, st.first, st.second));
        EXPECT_EQ(r.error_code, 0) << id;
        if (r.member_epoch != st.first) changed = true;
        st.first = r.member_epoch;
        if (r.assignment) {
          auto a = assignment_of(r);
          if (a != st.second) changed = true;
          st.second = a;
        }
      }
      if (!changed) return;
    }
  }

  group_coordinator_config config;
  fake_writer writer;
  int64_t now = 1'700'000'000'000;
  std::unique_ptr<group_coordinator> coordinator;
  topic_catalog catalog;
};

TEST(consumer_group_assignors, uniform_balances_and_sticks) {
  auto c = catalog_with({{"t", 6}});
  std::vector<assignor_member> members{{"a", std::nullopt, {"t"}, {}}, {"b", std::nullopt, {"t"}, {}}};
  auto out = assign("uniform", members, c);
  EXPECT_EQ(count(out["a"]), 3u);
  EXPECT_EQ(count(out["b"]), 3u);
  // A third member takes two partitions, the others keep four of their six.
  members[0].current_target = out["a"];
  members[1].current_target = out["b"];
  members.push_back({"c", std::nullopt, {"t"}, {}});
  auto next = assign("uniform", members, c);
  EXPECT_EQ(count(next["a"]), 2u);
  EXPECT_EQ(count(next["b"]), 2u);
  EXPECT_EQ(count(next["c"]), 2u);
  EXPECT_EQ(count(intersect(next["a"], out["a"])), 2u);
  EXPECT_EQ(count(intersect(next["b"], out["b"])), 2u);
}

TEST(consumer_group_assignors, more_members_than_partitions) {
  auto c = catalog_with({{"t", 6}});
  std::vector<assignor_member> members;
  for (char ch = 'a'; ch < 'a' + 8; ++ch) members.push_back({std::string(1, ch), std::nullopt, {"t"}, {}});
  for (auto name : {"uniform", "range"}) {
    auto out = assign(name, members, c);
    int empty = 0;
    size_t total = 0;
    for (auto& [id, tp] : out) {
      empty += tp.empty() ? 1 : 0;
      total += count(tp);
    }
    EXPECT_EQ(empty, 2) << name;
    EXPECT_EQ(total, 6u) << name;
  }
}

TEST(consumer_group_assignors, range_gives_consecutive_ranges) {
  auto c = catalog_with({{"t", 5}});
  std::vector<assignor_member> members{{"b", std::nullopt, {"t"}, {}}, {"a", std::nullopt, {"t"}, {}}};
  auto out = assign("range", members, c);
  EXPECT_EQ(out["a"][topic_uuid(1)], (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(out["b"][topic_uuid(1)], (std::set<int32_t>{3, 4}));
}

TEST(consumer_group_regex, full_match_and_unsupported_syntax) {
  auto c = catalog_with({{"bus-events", 1}, {"bus-events-dlq", 1}, {"x-bus-events", 1}});
  consumer_member m;
  m.subscribed_topic_regex = "bus-.*";
  EXPECT_EQ(subscribed_topics(m, c), (std::set<std::string>{"bus-events", "bus-events-dlq"}));
  EXPECT_TRUE(valid_topic_regex("bus-(events|alerts)"));
  EXPECT_FALSE(valid_topic_regex("bus-[("));
  EXPECT_FALSE(valid_topic_regex("\\Qa.b\\E"));
}

TEST_F(consumer_group_test, two_members_get_three_partitions_each_with_incremental_revocation) {
  auto a = beat(join_req("member-a"));
  ASSERT_EQ(a.error_code, 0);
  EXPECT_EQ(a.member_epoch, 1);
  EXPECT_EQ(a.heartbeat_interval_ms, 1000);
  EXPECT_EQ(count(assignment_of(a)), 6u);

  auto b = beat(join_req("member-b"));
  ASSERT_EQ(b.error_code, 0);
  // b's partitions are still a's: it waits at the new epoch with nothing yet.
  EXPECT_EQ(b.member_epoch, 2);
  EXPECT_EQ(count(assignment_of(b)), 0u);
  const auto* g = coordinator->find_consumer_group("alerts");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->state(), consumer_group_state::reconciling);

  // a is asked to revoke three partitions, at its old epoch.
  auto a2 = beat(beat_req("member-a", 1, assignment_of(a)));
  EXPECT_EQ(a2.member_epoch, 1);
  EXPECT_EQ(count(assignment_of(a2)), 3u);
  // b gets nothing until a confirms.
  auto b2 = beat(beat_req("member-b", 2, topic_partitions{}));
  EXPECT_EQ(count(assignment_of(b2)), 0u);
  // a confirms the revocation: new epoch.
  auto a3 = beat(beat_req("member-a", 1, assignment_of(a2)));
  EXPECT_EQ(a3.member_epoch, 2);
  // Now b receives its three.
  auto b3 = beat(beat_req("member-b", 2, topic_partitions{}));
  EXPECT_EQ(count(assignment_of(b3)), 3u);
  EXPECT_TRUE(intersect(assignment_of(b3), assignment_of(a2)).empty());
  beat(beat_req("member-b", 2, assignment_of(b3)));
  EXPECT_EQ(coordinator->find_consumer_group("alerts")->state(), consumer_group_state::stable);
}

TEST_F(consumer_group_test, eight_members_on_six_partitions_leave_two_idle) {
  std::map<std::string, std::pair<int32_t, topic_partitions>> members;
  for (int i = 0; i < 8; ++i) {
    const std::string id = "m" + std::to_string(i);
    auto r = beat(join_req(id));
    ASSERT_EQ(r.error_code, 0);
    members[id] = {r.member_epoch, assignment_of(r)};
  }
  converge(members);
  int idle = 0;
  size_t total = 0;
  for (auto& [id, st] : members) {
    idle += st.second.empty() ? 1 : 0;
    total += count(st.second);
  }
  EXPECT_EQ(idle, 2);
  EXPECT_EQ(total, 6u);
  EXPECT_EQ(coordinator->find_consumer_group("alerts")->state(), consumer_group_state::stable);
}

TEST_F(consumer_group_test, fencing_and_unknown_members) {
  auto a = beat(join_req("member-a"));
  EXPECT_EQ(beat(beat_req("member-a", 5)).error_code, to_wire(error_code::fenced_member_epoch));
  EXPECT_EQ(beat(beat_req("nobody", 1)).error_code, to_wire(error_code::unknown_member_id));
  // One epoch behind with no more than it was given: our answer was lost, accepted.
  auto b = beat(join_req("member-b"));
  (void)b;
  auto a2 = beat(beat_req("member-a", a.member_epoch, assignment_of(a)));
  auto a3 = beat(beat_req("member-a", a2.member_epoch, assignment_of(a2)));
  ASSERT_EQ(a3.member_epoch, 2);
  EXPECT_EQ(beat(beat_req("member-a", 1, assignment_of(a2))).error_code, 0);
  EXPECT_EQ(beat(beat_req("member-a", 0)).error_code, to_wire(error_code::invalid_request));
}

TEST_F(consumer_group_test, max_size_and_bad_requests) {
  config.consumer_max_size = 1;
  coordinator = std::make_unique<group_coordinator>(config, writer, [this] { return now; });
  coordinator->begin_loading(0);
  coordinator->complete_loading(0);
  coordinator->set_topics(catalog);
  EXPECT_EQ(beat(join_req("a")).error_code, 0);
  EXPECT_EQ(beat(join_req("b")).error_code, to_wire(error_code::group_max_size_reached));
  auto bad = join_req("c");
  bad.server_assignor = "sticky";
  EXPECT_EQ(beat(bad).error_code, to_wire(error_code::unsupported_assignor));
  auto regex = join_req("d");
  regex.subscribed_topic_names.reset();
  regex.subscribed_topic_regex = "bus-[(";
  EXPECT_EQ(beat(regex).error_code, 128);  // INVALID_REGULAR_EXPRESSION
}

TEST_F(consumer_group_test, leave_and_session_expiry_move_partitions) {
  std::map<std::string, std::pair<int32_t, topic_partitions>> members;
  for (auto id : {"a", "b", "c"}) {
    auto r = beat(join_req(id));
    members[id] = {r.member_epoch, assignment_of(r)};
  }
  converge(members);
  EXPECT_EQ(count(members["a"].second), 2u);
  // c leaves.
  auto leave = beat_req("c", leave_group_member_epoch);
  auto left = beat(leave);
  EXPECT_EQ(left.error_code, 0);
  EXPECT_EQ(left.member_epoch, -1);
  members.erase("c");
  converge(members);
  EXPECT_EQ(count(members["a"].second), 3u);
  EXPECT_EQ(count(members["b"].second), 3u);
  // b goes silent: after the session timeout a owns everything.
  now += 6'000;
  beat(beat_req("a", members["a"].first, members["a"].second));
  now += 6'000;
  coordinator->run_expired_timers();
  writer.complete_all();
  EXPECT_EQ(coordinator->find_consumer_group("alerts")->members().size(), 1u);
  members.erase("b");
  converge(members);
  EXPECT_EQ(count(members["a"].second), 6u);
}

TEST_F(consumer_group_test, static_member_rejoins_with_its_assignment) {
  std::map<std::string, std::pair<int32_t, topic_partitions>> members;
  for (auto [id, inst] : {std::pair{"a", "inst-a"}, std::pair{"b", "inst-b"}}) {
    auto r = beat(join_req(id, {"bus-events"}, inst));
    members[id] = {r.member_epoch, assignment_of(r)};
  }
  converge(members);
  const auto epoch_before = coordinator->find_consumer_group("alerts")->group_epoch();
  auto leave = beat_req("b", leave_group_static_member_epoch);
  leave.instance_id = "inst-b";
  auto left = beat(leave);
  EXPECT_EQ(left.error_code, 0) << left.error_message.value_or("");
  EXPECT_EQ(left.member_epoch, -2);
  // Another process with the same instance id while b is still active would be refused; now it is released.
  auto back = beat(join_req("b2", {"bus-events"}, "inst-b"));
  ASSERT_EQ(back.error_code, 0);
  EXPECT_EQ(assignment_of(back), members["b"].second);
  EXPECT_EQ(coordinator->find_consumer_group("alerts")->group_epoch(), epoch_before);
  // A second process claiming inst-b now: UNRELEASED_INSTANCE_ID.
  EXPECT_EQ(beat(join_req("b3", {"bus-events"}, "inst-b")).error_code,
            to_wire(error_code::unreleased_instance_id));
}

TEST_F(consumer_group_test, offsets_check_member_epochs) {
  auto a = beat(join_req("a"));
  auto commit = [&](const std::string& member, int32_t epoch, int16_t version) {
    proto::offset_commit_request r;
    r.group_id = "alerts";
    r.member_id = member;
    r.generation_id_or_member_epoch = epoch;
    auto& t = r.topics.emplace_back();
    t.name = "bus-events";
    t.partitions.push_back({});
    t.partitions.back().partition_index = 0;
    t.partitions.back().committed_offset = 42;
    std::optional<proto::offset_commit_response> out;
    coordinator->commit_offsets({"client", "/127.0.0.1", version}, r,
                                [&](proto::offset_commit_response resp) { out = resp; });
    writer.complete_all();
    return out->topics[0].partitions[0].error_code;
  };
  EXPECT_EQ(commit("a", a.member_epoch, 9), 0);
  EXPECT_EQ(commit("a", a.member_epoch + 1, 9), to_wire(error_code::stale_member_epoch));
  EXPECT_EQ(commit("zz", a.member_epoch, 9), to_wire(error_code::unknown_member_id));
  EXPECT_EQ(commit("", -1, 9), to_wire(error_code::unknown_member_id));  // not empty
  ASSERT_NE(coordinator->find_offset("alerts", "bus-events", 0), nullptr);
  EXPECT_EQ(coordinator->find_offset("alerts", "bus-events", 0)->offset, 42);
  EXPECT_EQ(coordinator->find_group("alerts"), nullptr);  // no classic shadow group

  proto::list_groups_request lr;
  lr.types_filter = {"consumer"};
  auto listed = coordinator->list_groups(lr);
  ASSERT_EQ(listed.groups.size(), 1u);
  EXPECT_EQ(listed.groups[0].group_type, "consumer");
  EXPECT_EQ(listed.groups[0].group_state, "Stable");
  lr.types_filter = {"classic"};
  EXPECT_TRUE(coordinator->list_groups(lr).groups.empty());

  auto described = coordinator->consumer_group_describe({"alerts", "nope"}, false);
  ASSERT_EQ(described.size(), 2u);
  EXPECT_EQ(described[0].group_state, "Stable");
  ASSERT_EQ(described[0].members.size(), 1u);
  EXPECT_EQ(described[0].members[0].assignment.topic_partitions[0].topic_name, "bus-events");
  EXPECT_EQ(described[1].error_code, to_wire(error_code::group_id_not_found));

  // Not deletable while a member is in; deletable after it left.
  std::optional<std::vector<proto::delete_groups_response::deletable_group_result>> deleted;
  coordinator->delete_groups({"alerts"}, [&](auto r) { deleted = r; });
  writer.complete_all();
  EXPECT_EQ((*deleted)[0].error_code, to_wire(error_code::non_empty_group));
  beat(beat_req("a", leave_group_member_epoch));
  coordinator->delete_groups({"alerts"}, [&](auto r) { deleted = r; });
  writer.complete_all();
  EXPECT_EQ((*deleted)[0].error_code, 0);
  EXPECT_EQ(coordinator->find_consumer_group("alerts"), nullptr);
  EXPECT_EQ(coordinator->find_offset("alerts", "bus-events", 0), nullptr);
}

TEST_F(consumer_group_test, offsets_expire_unless_subscribed_and_an_empty_group_goes_with_them) {
  // ConsumerGroup.offsetExpirationCondition: retention counts from each commit; a topic some member
  // subscribes to keeps its offsets whatever their age.
  auto a = beat(join_req("a"));
  auto commit = [&](const std::string& topic, const std::string& member, int32_t epoch) {
    proto::offset_commit_request r;
    r.group_id = "alerts";
    r.member_id = member;
    r.generation_id_or_member_epoch = epoch;
    auto& t = r.topics.emplace_back();
    t.name = topic;
    t.partitions.push_back({});
    t.partitions.back().partition_index = 0;
    t.partitions.back().committed_offset = 7;
    std::optional<proto::offset_commit_response> out;
    coordinator->commit_offsets({"client", "/127.0.0.1", 9}, r,
                                [&](proto::offset_commit_response resp) { out = resp; });
    writer.complete_all();
    return out->topics[0].partitions[0].error_code;
  };
  ASSERT_EQ(commit("bus-events", "a", a.member_epoch), 0);
  ASSERT_EQ(commit("other", "a", a.member_epoch), 0);  // a topic the member does not subscribe to
  now += config.offsets_retention_ms - 1;
  coordinator->cleanup_group_metadata();
  writer.complete_all();
  EXPECT_NE(coordinator->find_offset("alerts", "other", 0), nullptr);
  now += 1;
  coordinator->cleanup_group_metadata();
  writer.complete_all();
  EXPECT_EQ(coordinator->find_offset("alerts", "other", 0), nullptr);
  EXPECT_NE(coordinator->find_offset("alerts", "bus-events", 0), nullptr);  // subscribed
  ASSERT_NE(coordinator->find_consumer_group("alerts"), nullptr);

  // Once the member left, the subscribed topic's offset expires too, and the empty group is deleted.
  auto left = beat(beat_req("a", leave_group_member_epoch));
  ASSERT_EQ(left.error_code, 0);
  coordinator->cleanup_group_metadata();
  writer.complete_all();
  EXPECT_EQ(coordinator->find_offset("alerts", "bus-events", 0), nullptr);
  EXPECT_EQ(coordinator->find_consumer_group("alerts"), nullptr);
  // What was written can be replayed: nothing of the group comes back.
  fake_writer other_writer;
  group_coordinator restarted(config, other_writer, [this] { return now; });
  restarted.begin_loading(0);
  replay_committed(writer, restarted);
  restarted.complete_loading(0);
  EXPECT_EQ(restarted.find_consumer_group("alerts"), nullptr);
  EXPECT_EQ(restarted.find_offset("alerts", "bus-events", 0), nullptr);
}

TEST_F(consumer_group_test, records_replay_into_the_same_group) {
  std::map<std::string, std::pair<int32_t, topic_partitions>> members;
  for (auto id : {"a", "b"}) {
    auto r = beat(join_req(id));
    members[id] = {r.member_epoch, assignment_of(r)};
  }
  converge(members);
  const consumer_group before = *coordinator->find_consumer_group("alerts");

  // Every record decodes; replaying the log into a fresh coordinator gives the same group.
  replayed_coordinator other(
      config, [this] { return now; }, catalog, writer);
  const auto* after = other.coordinator.find_consumer_group("alerts");
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->group_epoch(), before.group_epoch());
  EXPECT_EQ(after->assignment_epoch(), before.assignment_epoch());
  EXPECT_EQ(after->members(), before.members());
  EXPECT_EQ(after->target(), before.target());
  EXPECT_EQ(after->state(), consumer_group_state::stable);
}

TEST_F(consumer_group_test, empty_classic_group_is_upgraded) {
  // A classic group that only holds offsets (simple group).
  proto::offset_commit_request r;
  r.group_id = "alerts";
  r.generation_id_or_member_epoch = -1;
  auto& t = r.topics.emplace_back();
  t.name = "bus-events";
  t.partitions.push_back({});
  t.partitions.back().committed_offset = 7;
  coordinator->commit_offsets({"client", "/127.0.0.1", 8}, r, [](auto) {});
  writer.complete_all();
  ASSERT_NE(coordinator->find_group("alerts"), nullptr);
  auto a = beat(join_req("a"));
  EXPECT_EQ(a.error_code, 0);
  EXPECT_EQ(coordinator->find_group("alerts"), nullptr);
  ASSERT_NE(coordinator->find_consumer_group("alerts"), nullptr);
  EXPECT_EQ(coordinator->find_offset("alerts", "bus-events", 0)->offset, 7);
}

}  // namespace
}  // namespace mala::coordinator
