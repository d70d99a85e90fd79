// KIP-853 voter changes on hand-driven replicas (replica_test_helpers.h): the voter set of a kraft.version 1
// quorum follows the VotersRecords in the log (read back at start-up, in effect once appended); AddRaftVoter
// adds a caught-up observer (which then votes and counts toward commits), RemoveRaftVoter removes a voter
// (the leader itself included: it leads until the change commits, then resigns and observes); the checks
// refuse with Kafka's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include "mala/raft/log.h"
#include "mala/raft/replica.h"
#include "mala/raft/voter_set.h"
#include "replica_test_helpers.h"

namespace mala::raft {
namespace {

using test::manual_net;

uuid directory_of(int32_t id) {
  // A fixed, distinct directory id per node (never zero).
  uuid out;
  out.bytes[0] = 0x42;
  out.bytes[15] = static_cast<uint8_t>(id);
  return out;
}

voter_info voter(int32_t id) {
  return voter_info{id, directory_of(id), "CONTROLLER", {"node-" + std::to_string(id), 9000 + id}};
}

std::vector<voter_info> voters_of(std::initializer_list<int32_t> ids) {
  std::vector<voter_info> out;
  for (int32_t id : ids) out.push_back(voter(id));
  return out;
}

raft_config dynamic_config(int32_t id, std::vector<voter_info> voters) {
  raft_config c;
  c.node_id = id;
  c.voter_set = std::move(voters);
  c.directory_id = directory_of(id);
  c.random_seed = 42;
  return c;
}

std::vector<int32_t> sorted(std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Voters 1-3 and node 4, an observer of the same quorum. Time moves for every node together, 50 ms a step,
// until a leader is elected and the observer follows it.
struct quorum_with_observer {
  manual_net net;
  int64_t now = 0;
  int32_t leader = -1;
  std::vector<int32_t> others;  // the voters that do not lead

  quorum_with_observer() {
    for (int32_t id : {1, 2, 3}) net.add(dynamic_config(id, voters_of({1, 2, 3})), {}, std::nullopt);
    net.add(dynamic_config(4, voters_of({1, 2, 3})), {}, std::nullopt);
    EXPECT_FALSE(net[4].is_voter());
    advance_until([&] { return find_leader() && net[4].current_role() == role::follower; });
    advance(1000);  // the followers fetch again: the leader's high watermark passes its leader_change entry
    for (int32_t id : {1, 2, 3})
      if (id != leader) others.push_back(id);
  }
  bool find_leader() {
    for (int32_t id : {1, 2, 3}) {
      if (net[id].current_role() == role::leader) leader = id;
    }
    return leader > 0 && net[leader].current_role() == role::leader;
  }
  void step() {
    now += 50;
    for (int32_t id : {1, 2, 3, 4}) net.tick(id, now);
    net.run();
  }
  void advance(int64_t ms) {
    for (const int64_t end = now + ms; now < end;) step();
  }
  template <typename Done>
  void advance_until(Done done, int64_t limit_ms = 30'000) {
    for (const int64_t end = now + limit_ms; now < end && !done();) step();
  }
  // Runs a call on the leader and delivers what it sent.
  template <typename Call>
  void on_leader(Call call) {
    call(net[leader]);
    net.collect(leader);
    net.run();
  }
  const std::vector<voter_change_answer>& answers() { return net.members.at(leader)->answers; }
};

TEST(raft_voter_changes, a_caught_up_observer_is_added_and_then_counts) {
  quorum_with_observer q;
  auto& net = q.net;
  ASSERT_GT(q.leader, 0);
  ASSERT_GT(net[q.leader].high_watermark(), 0);
  ASSERT_EQ(net[4].current_role(), role::follower);  // the observer found the leader

  q.on_leader([](replica& r) { r.add_voter(7, voter(4)); });
  q.advance_until([&] { return !q.answers().empty(); });
  q.advance(1000);
  ASSERT_EQ(q.answers().size(), 1u);
  EXPECT_EQ(q.answers()[0].request_id, 7);
  EXPECT_EQ(q.answers()[0].error, error_code::none);
  for (int32_t id : {1, 2, 3, 4}) {
    EXPECT_EQ(sorted(net[id].voter_ids()), (std::vector<int32_t>{1, 2, 3, 4})) << "node " << id;
    ASSERT_NE(net[id].voter_set(), nullptr);
    EXPECT_EQ(net[id].voter_set()->back(), voter(4));
  }
  EXPECT_TRUE(net[4].is_voter());
  EXPECT_EQ(net[q.leader].current_role(), role::leader);

  // Four voters: a commit needs three. The leader, one other voter and node 4 make one; the leader and node 4
  // alone do not.
  const int32_t cut = q.others[0];
  net.link = [cut](int32_t from, int32_t to) { return from != cut && to != cut; };
  const int64_t hw = net[q.leader].high_watermark();
  q.on_leader([](replica& r) { ASSERT_TRUE(r.append({{1, 2, 3}}).ok()); });
  q.advance(600);
  EXPECT_GT(net[q.leader].high_watermark(), hw);
  const int32_t also_cut = q.others[1];
  net.link = [cut, also_cut](int32_t from, int32_t to) {
    return from != cut && to != cut && from != also_cut && to != also_cut;
  };
  const int64_t before = net[q.leader].high_watermark();
  q.on_leader([](replica& r) { ASSERT_TRUE(r.append({{4, 5, 6}}).ok()); });
  q.advance(600);
  EXPECT_EQ(net[q.leader].high_watermark(), before);
}

TEST(raft_voter_changes, refusals_follow_kafkas_checks) {
  quorum_with_observer q;
  auto& net = q.net;
  auto answer = [&](auto request) {
    const size_t before = q.answers().size();
    q.on_leader(request);
    EXPECT_EQ(q.answers().size(), before + 1);
    return q.answers().back();
  };
  const int32_t other = q.others[0];
  EXPECT_EQ(answer([&](replica& r) { r.add_voter(1, voter(other)); }).error, error_code::duplicate_voter);
  voter_info no_directory = voter(4);
  no_directory.directory_id = uuid{};
  EXPECT_EQ(answer([&](replica& r) { r.add_voter(2, no_directory); }).error, error_code::invalid_request);
  // Node 5 never fetched; node 4 fetches under its own directory id, not another.
  EXPECT_EQ(answer([](replica& r) { r.add_voter(3, voter(5)); }).error, error_code::request_timed_out);
  voter_info other_directory = voter(4);
  other_directory.directory_id = directory_of(44);
  EXPECT_EQ(answer([&](replica& r) { r.add_voter(4, other_directory); }).error,
            error_code::request_timed_out);
  EXPECT_EQ(answer([](replica& r) { r.remove_voter(5, 4, directory_of(4)); }).error,
            error_code::voter_not_found);
  EXPECT_EQ(answer([&](replica& r) { r.remove_voter(6, other, directory_of(44)); }).error,
            error_code::voter_not_found);

  // Not the leader.
  const size_t before = net.members.at(other)->answers.size();
  net[other].add_voter(8, voter(4));
  net.collect(other);
  ASSERT_EQ(net.members.at(other)->answers.size(), before + 1);
  EXPECT_EQ(net.members.at(other)->answers.back().error, error_code::not_leader_or_follower);

  // One change at a time: a second request while the first is not committed is refused. The other voters
  // are cut off, so the first one never commits and times out after controller.quorum.request.timeout.ms.
  const int32_t leader = q.leader;
  net.link = [leader](int32_t from, int32_t to) { return from != leader && to != leader; };
  q.on_leader([&](replica& r) { r.remove_voter(9, other, directory_of(other)); });
  EXPECT_EQ(answer([](replica& r) { r.add_voter(10, voter(4)); }).error, error_code::request_timed_out);
  const size_t pending = q.answers().size();
  net.tick(leader, q.now + raft_config{}.request_timeout_ms + 1);
  ASSERT_EQ(q.answers().size(), pending + 1);
  EXPECT_EQ(q.answers().back().request_id, 9);
  EXPECT_EQ(q.answers().back().error, error_code::request_timed_out);
}

TEST(raft_voter_changes, a_voter_updates_its_endpoint) {
  quorum_with_observer q;
  auto& net = q.net;
  const int32_t other = q.others[0];
  const int32_t epoch = net[q.leader].epoch();
  voter_info moved = voter(other);
  moved.endpoint = {"moved-host", 19093};
  auto update = [&](int64_t id, int32_t at_epoch, voter_info v, int16_t min, int16_t max) {
    q.on_leader([&](replica& r) { r.update_voter(id, at_epoch, v, min, max); });
    return q.answers().back();
  };
  EXPECT_EQ(update(1, epoch - 1, moved, 0, 1).error, error_code::fenced_leader_epoch);
  EXPECT_EQ(update(2, epoch + 1, moved, 0, 1).error, error_code::unknown_leader_epoch);
  EXPECT_EQ(update(3, epoch, moved, 0, 0).error, error_code::invalid_request);  // kraft.version 1 unsupported
  EXPECT_EQ(update(4, epoch, voter(4), 0, 1).error, error_code::voter_not_found);
  EXPECT_EQ(update(5, epoch, moved, 0, 1).error, error_code::none);  // answered before the commit
  q.advance(1000);
  for (int32_t id : {1, 2, 3, 4}) {
    const auto* set = net[id].voter_set();
    ASSERT_NE(set, nullptr);
    const auto it =
        std::find_if(set->begin(), set->end(), [&](const voter_info& v) { return v.id == other; });
    ASSERT_NE(it, set->end());
    EXPECT_EQ(it->endpoint.host, "moved-host") << "node " << id;
  }
}

// KafkaRaftClient.pollFollowerAsVoter: a voter whose entry in the voter set is not what it is now (restarted
// on another port) sends UpdateRaftVoter to the leader after three fetch timeouts, and every replica ends up
// with its new endpoint; one whose entry matches sends none.
TEST(raft_voter_changes, a_voter_restarted_on_another_endpoint_updates_its_own_entry) {
  manual_net net;
  voter_info moved = voter(3);
  moved.endpoint = {"node-3-new", 29093};
  for (int32_t id : {1, 2, 3}) {
    auto config = dynamic_config(id, voters_of({1, 2, 3}));
    config.local_voter = id == 3 ? moved : voter(id);
    net.add(std::move(config), {}, std::nullopt);
  }
  int64_t now = 0;
  auto advance = [&](int64_t ms) {
    for (int64_t end = now + ms; now < end;) {
      now += 50;
      for (int32_t id : {1, 2, 3}) net.tick(id, now);
      net.run();
    }
  };
  int updates = 0;
  auto count_updates = [&] {
    for (const auto& m : net.queue) updates += std::holds_alternative<update_voter_request>(m.message.body);
  };
  for (int i = 0; i < 400; ++i) {
    now += 50;
    for (int32_t id : {1, 2, 3}) net.tick(id, now);
    count_updates();
    net.run();
  }
  advance(1000);
  EXPECT_GE(updates, 1);
  for (int32_t id : {1, 2, 3}) {
    const auto* set = net[id].voter_set();
    ASSERT_NE(set, nullptr);
    const auto it = std::find_if(set->begin(), set->end(), [](const voter_info& v) { return v.id == 3; });
    ASSERT_NE(it, set->end());
    EXPECT_EQ(it->endpoint.host, "node-3-new") << "node " << id;
    EXPECT_EQ(it->endpoint.port, 29093) << "node " << id;
  }
  // Now that every entry matches, no voter sends another.
  updates = 0;
  for (int i = 0; i < 400; ++i) {
    now += 50;
    for (int32_t id : {1, 2, 3}) net.tick(id, now);
    count_updates();
    net.run();
  }
  EXPECT_EQ(updates, 0);
}

TEST(raft_voter_changes, static_voters_refuse_changes) {
  manual_net net;
  net.add(test::config_for(1, {1}), {}, std::nullopt);
  ASSERT_EQ(net[1].current_role(), role::leader);
  net[1].on_log_flushed(net.members.at(1)->log.end_offset());
  net.collect(1);
  net[1].add_voter(1, voter(2));
  net.collect(1);
  ASSERT_EQ(net.members.at(1)->answers.size(), 1u);
  EXPECT_EQ(net.members.at(1)->answers[0].error, error_code::unsupported_version);
}

TEST(raft_voter_changes, a_leader_that_removes_itself_resigns_once_committed_and_observes) {
  quorum_with_observer q;
  auto& net = q.net;
  const int32_t old_leader = q.leader;
  q.on_leader([&](replica& r) { r.remove_voter(3, old_leader, directory_of(old_leader)); });
  q.advance_until([&] { return !q.answers().empty(); });
  ASSERT_EQ(q.answers().size(), 1u);
  EXPECT_EQ(q.answers()[0].error, error_code::none);
  EXPECT_FALSE(net[old_leader].is_voter());
  EXPECT_EQ(sorted(net[q.others[0]].voter_ids()), sorted(q.others));
  // It resigns at its next tick; the other two elect a leader between them; it carries on as an observer.
  q.advance_until([&] {
    return (net[q.others[0]].current_role() == role::leader ||
            net[q.others[1]].current_role() == role::leader) &&
           net[old_leader].current_role() == role::follower;
  });
  EXPECT_TRUE(net[q.others[0]].current_role() == role::leader ||
              net[q.others[1]].current_role() == role::leader);
  EXPECT_EQ(net[old_leader].current_role(), role::follower);
  EXPECT_FALSE(net[old_leader].is_voter());
}

TEST(raft_voter_changes, the_voter_set_is_read_back_from_the_log_and_undone_by_truncation) {
  memory_raft_log log;
  const std::vector<log_entry> entries{
      {0, 1, entry_type::leader_change, {}},
      {1, 2, entry_type::leader_change, {}},
      {2, 2, entry_type::voters, encode_voters_record(voters_of({1, 2, 3, 4}))},
      {3, 2, entry_type::data, {9}},
  };
  log.append(entries);
  // Node 4 follows node 1, leader of epoch 3.
  replica r(dynamic_config(4, voters_of({1, 2, 3})), log, quorum_state{3, 1, no_voter}, 0);
  EXPECT_TRUE(r.is_voter());
  EXPECT_EQ(sorted(r.voter_ids()), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(r.voter_set_before(2)->size(), 3u);  // a snapshot ending at 2 holds the set before the record
  EXPECT_EQ(r.voter_set_before(3)->size(), 4u);

  // The leader of epoch 3 has epoch 2 only up to offset 2: node 4 truncates there and is an observer again.
  const effects e = r.take_effects();  // a follower fetches at once
  const outbound_message* fetch = nullptr;
  for (const auto& m : e.messages) {
    if (std::holds_alternative<fetch_request>(m.message.body)) fetch = &m;
  }
  ASSERT_NE(fetch, nullptr);
  EXPECT_EQ(std::get<fetch_request>(fetch->message.body).replica_directory_id, directory_of(4));
  fetch_response diverging;
  diverging.current_leader = {1, 3};
  diverging.high_watermark = 0;
  diverging.diverging_epoch = {2, 2};
  r.on_message(1, raft_message{fetch->message.correlation_id, std::move(diverging)});
  (void)r.take_effects();
  EXPECT_EQ(log.end_offset(), 2);
  EXPECT_FALSE(r.is_voter());
  EXPECT_EQ(sorted(r.voter_ids()), (std::vector<int32_t>{1, 2, 3}));
}

// KIP-853 upgrade of a static quorum (Kafka 4.1+: `kafka-features upgrade --feature kraft.version=1`): the
// voters of controller.quorum.voters send UpdateRaftVoter to each new leader, which keeps their directory
// ids, endpoints and ranges in memory; once every voter has reported, the leader appends a KRaftVersionRecord
// and a VotersRecord, and from then on every replica has the voter set (read back from the log after a
// restart with the same static configuration), and voter changes work.
struct static_quorum {
  manual_net net;
  int64_t now = 0;
  int32_t leader = -1;

  explicit static_quorum(int16_t node_3_max_kraft_version = 1) {
    for (int32_t id : {1, 2, 3}) net.add(config(id, id == 3 ? node_3_max_kraft_version : int16_t{1}), {}, {});
    advance_until([&] {
      for (int32_t id : {1, 2, 3}) {
        if (net[id].current_role() == role::leader) leader = id;
      }
      return leader > 0;
    });
    advance(1000);  // the high watermark passes the leader_change entry
  }
  static raft_config config(int32_t id, int16_t max_kraft_version = 1) {
    raft_config c = test::config_for(id, {1, 2, 3});
    c.directory_id = directory_of(id);
    c.local_voter = voter(id);
    c.max_kraft_version = max_kraft_version;
    return c;
  }
  void advance(int64_t ms) {
    for (const int64_t end = now + ms; now < end;) {
      now += 50;
      for (int32_t id : {1, 2, 3}) net.tick(id, now);
      net.run();
    }
  }
  template <typename Done>
  void advance_until(Done done, int64_t limit_ms = 30'000) {
    for (const int64_t end = now + limit_ms; now < end && !done();) advance(50);
  }
  status upgrade(int16_t version, bool validate_only) {
    auto s = net[leader].upgrade_kraft_version(net[leader].epoch(), version, validate_only);
    net.collect(leader);
    net.run();
    return s;
  }
};

TEST(raft_voter_changes, a_static_quorum_is_upgraded_to_kraft_version_1_once_every_voter_reported) {
  static_quorum q;
  auto& net = q.net;
  ASSERT_EQ(net[q.leader].kraft_version(), 0);
  EXPECT_EQ(net[q.leader].voter_set(), nullptr);
  // At once: the other voters have not reported yet (their first check comes after 3 fetch timeouts).
  auto early = q.upgrade(1, true);
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.code, error_code::invalid_update_version);
  EXPECT_NE(early.message.find("not all of the voters support it"), std::string::npos) << early.message;
  EXPECT_NE(early.message.find("has not sent UpdateRaftVoter to this leader yet"), std::string::npos)
      << early.message;
  // Static voter changes stay refused.
  net[q.leader].add_voter(1, voter(4));
  net.collect(q.leader);
  EXPECT_EQ(net.members.at(q.leader)->answers.back().error, error_code::unsupported_version);

  q.advance_until([&] { return q.upgrade(1, true).ok(); });
  ASSERT_TRUE(q.upgrade(1, true).ok());
  EXPECT_EQ(net[q.leader].kraft_version(), 0);            // validation only: nothing appended
  EXPECT_EQ(q.upgrade(0, false).code, error_code::none);  // the level in effect: a no-op
  EXPECT_EQ(net[q.leader].upgrade_kraft_version(net[q.leader].epoch() - 1, 1, false).code,
            error_code::not_leader_or_follower);
  const int64_t before = net.members.at(q.leader)->log.end_offset();
  ASSERT_TRUE(q.upgrade(1, false).ok());
  EXPECT_EQ(net.members.at(q.leader)->log.end_offset(), before + 2);  // KRaftVersionRecord + VotersRecord
  q.advance(1000);
  for (int32_t id : {1, 2, 3}) {
    EXPECT_EQ(net[id].kraft_version(), 1) << "node " << id;
    const auto* set = net[id].voter_set();
    ASSERT_NE(set, nullptr) << "node " << id;
    EXPECT_EQ(*set, voters_of({1, 2, 3})) << "node " << id;
  }
  EXPECT_TRUE(q.upgrade(1, false).ok());  // again: a no-op
  auto down = q.upgrade(0, false);
  EXPECT_EQ(down.code, error_code::invalid_update_version);
  EXPECT_NE(down.message.find("downgrade"), std::string::npos) << down.message;

  // A voter change now works: node 2 (or 1) removed.
  const int32_t removed = q.leader == 2 ? 1 : 2;
  net[q.leader].remove_voter(7, removed, directory_of(removed));
  net.collect(q.leader);
  net.run();
  q.advance_until([&] { return net.members.at(q.leader)->answers.back().request_id == 7; });
  EXPECT_EQ(net.members.at(q.leader)->answers.back().error, error_code::none);
  EXPECT_EQ(net[q.leader].voter_ids().size(), 2u);

  // Restarted with the same static configuration, a replica reads the voter set back from its log.
  memory_raft_log copy;
  const auto& log = net.members.at(q.leader)->log;
  copy.append(log.read(log.start_offset(), 10'000));
  replica restarted(static_quorum::config(q.leader), copy,
                    quorum_state{net[q.leader].epoch(), q.leader, no_voter}, q.now);
  EXPECT_EQ(restarted.kraft_version(), 1);
  EXPECT_EQ(restarted.voter_ids().size(), 2u);
}

TEST(raft_voter_changes, a_kraft_version_upgrade_needs_every_voter_to_support_it) {
  static_quorum q(/*node_3_max_kraft_version=*/0);
  q.advance(10'000);                         // every voter reported
  const auto refused = q.upgrade(1, false);  // node 3 (the leader or a follower) supports only 0
  EXPECT_EQ(refused.code, error_code::invalid_update_version);
  EXPECT_NE(refused.message.find("not all of the voters support it (voter 3 supports [0, 0])"),
            std::string::npos)
      << refused.message;
  EXPECT_EQ(q.net[q.leader].kraft_version(), 0);
}

}  // namespace
}  // namespace mala::raft
