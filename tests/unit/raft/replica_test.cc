// raft::replica rule by rule: votes (one per epoch, persisted before the answer, Raft's up-to-date check),
// pre-vote (KIP-996: no epoch bump, refused while a live leader is followed; a partitioned node rejoins
// without disrupting the leader), divergence truncation on a follower, the commitment rule for entries of
// earlier epochs, the single-voter quorum, restart as resigned, graceful resignation (EndQuorumEpoch), check
// quorum, long-poll fetches, observers and a split brain. Hand-driven replicas for the message-level rules;
// the simulated cluster of raft_sim.h (without faults unless stated) for the timing-level ones.
#include "mala/raft/replica.h"

#include "replica_test_helpers.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "raft_sim.h"

namespace mala::raft {
namespace {

using test::config_for;
using test::fill;
using test::manual_net;
using test::sent;

raft_message msg(raft_message_body body, int64_t correlation_id = 1) {
  return {correlation_id, std::move(body)};
}

vote_request vote(int32_t candidate, int32_t epoch, int32_t last_epoch, int64_t end_offset,
                  bool pre_vote = false) {
  return vote_request{epoch, candidate, 1, last_epoch, end_offset, pre_vote};
}

// A single vote request to a fresh node 1 of voters {1, 2, 3}: the answer and what it persisted.
struct vote_outcome {
  bool granted;
  std::optional<quorum_state> persisted;
  vote_response response;
};
vote_outcome ask(replica& r, int32_t from, const vote_request& request) {
  r.take_effects();
  r.on_message(from, msg(request));
  const effects e = r.take_effects();
  const auto responses = sent<vote_response>(e);
  EXPECT_EQ(responses.size(), 1u);
  EXPECT_EQ(responses.at(0).first, from);
  return {responses.at(0).second.vote_granted, e.quorum_state_to_persist, responses.at(0).second};
}

// ---------------------------------------------------------------------------------------------------------
// Votes

TEST(raft_votes, one_vote_per_epoch_persisted_with_the_answer) {
  memory_raft_log log;
  replica r(config_for(1, {1, 2, 3}), log, std::nullopt, 0);

  const auto first = ask(r, 2, vote(2, 1, 0, 0));
  EXPECT_TRUE(first.granted);
  // The vote is in the same batch of effects as the answer: the glue persists it before sending.
  ASSERT_TRUE(first.persisted);
  EXPECT_EQ(*first.persisted, (quorum_state{1, no_leader, 2}));

  const auto other = ask(r, 3, vote(3, 1, 0, 0));
  EXPECT_FALSE(other.granted);
  EXPECT_FALSE(other.persisted);

  const auto again = ask(r, 2, vote(2, 1, 0, 0));  // a retried request gets the same answer
  EXPECT_TRUE(again.granted);
  EXPECT_FALSE(again.persisted);
}

TEST(raft_votes, the_vote_survives_a_restart) {
  memory_raft_log log;
  replica r(config_for(1, {1, 2, 3}), log, quorum_state{1, no_leader, 2}, 0);
  EXPECT_EQ(r.current_role(), role::unattached);
  EXPECT_FALSE(ask(r, 3, vote(3, 1, 0, 0)).granted);
  EXPECT_TRUE(ask(r, 2, vote(2, 1, 0, 0)).granted);
}

TEST(raft_votes, up_to_date_check_compares_last_epoch_then_end_offset) {
  struct test_case {
    int32_t last_epoch;
    int64_t end_offset;
    bool granted;
  };
  // The voter's log: epochs 1, 1, 2 (last epoch 2, end offset 3).
  for (const test_case& c : std::vector<test_case>{{1, 10, false},   // longer but older: not up to date
                                                   {2, 2, false},    // same epoch, shorter
                                                   {2, 3, true},     // equal
                                                   {2, 4, true},     // same epoch, longer
                                                   {3, 0, true}}) {  // newer epoch wins whatever the length
    memory_raft_log log;
    fill(log, {1, 1, 2});
    replica r(config_for(1, {1, 2, 3}), log, quorum_state{2, no_leader, no_voter}, 0);
    const auto outcome = ask(r, 2, vote(2, 5, c.last_epoch, c.end_offset));
    EXPECT_EQ(outcome.granted, c.granted) << c.last_epoch << "@" << c.end_offset;
    // Granted or not, the higher epoch is adopted (and persisted), with a vote only when granted.
    ASSERT_TRUE(outcome.persisted);
    EXPECT_EQ(outcome.persisted->leader_epoch, 5);
    EXPECT_EQ(outcome.persisted->voted_id, c.granted ? 2 : no_voter);
    EXPECT_EQ(r.epoch(), 5);
  }
}

TEST(raft_votes, older_epoch_is_fenced_with_the_current_leader) {
  memory_raft_log log;
  replica r(config_for(1, {1, 2, 3}), log, quorum_state{4, 2, no_voter}, 0);
  ASSERT_EQ(r.current_role(), role::follower);
  const auto outcome = ask(r, 3, vote(3, 3, 9, 100));
  EXPECT_FALSE(outcome.granted);
  EXPECT_EQ(outcome.response.error_code, error_code::fenced_leader_epoch);
  EXPECT_EQ(outcome.response.leader_epoch, 4);
  EXPECT_EQ(outcome.response.leader_id, 2);
  EXPECT_EQ(r.epoch(), 4);
}

TEST(raft_votes, a_follower_does_not_vote_in_its_leaders_epoch) {
  memory_raft_log log;
  replica r(config_for(1, {1, 2, 3}), log, quorum_state{4, 2, no_voter}, 0);
  EXPECT_FALSE(ask(r, 3, vote(3, 4, 9, 100)).granted);
  EXPECT_EQ(r.leader_id(), 2);
}

TEST(raft_votes, observers_and_unknown_candidates_get_no_vote) {
  memory_raft_log log;
  replica observer(config_for(4, {1, 2, 3}), log, std::nullopt, 0);
  EXPECT_FALSE(observer.is_voter());
  const auto to_observer = ask(observer, 2, vote(2, 1, 0, 0));
  EXPECT_FALSE(to_observer.granted);
  EXPECT_EQ(to_observer.response.error_code, error_code::inconsistent_voter_set);

  memory_raft_log voter_log;
  replica voter(config_for(1, {1, 2, 3}), voter_log, std::nullopt, 0);
  EXPECT_FALSE(ask(voter, 4, vote(4, 1, 0, 0)).granted);
}

// ---------------------------------------------------------------------------------------------------------
// Pre-vote (KIP-996)

TEST(raft_pre_vote, granted_without_bumping_the_epoch_or_persisting) {
  memory_raft_log log;
  replica r(config_for(1, {1, 2, 3}), log, quorum_state{3, no_leader, no_voter}, 0);
  const auto outcome = ask(r, 2, vote(2, 3, 0, 0, true));
  EXPECT_TRUE(outcome.granted);
  EXPECT_TRUE(outcome.response.pre_vote);
  EXPECT_FALSE(outcome.persisted);
  EXPECT_EQ(r.epoch(), 3);
  EXPECT_EQ(r.voted_id(), no_voter);
  // Non-binding: a second prospective of the same epoch gets a pre-vote too, and a real vote is still free.
  EXPECT_TRUE(ask(r, 3, vote(3, 3, 0, 0, true)).granted);
  EXPECT_TRUE(ask(r, 3, vote(3, 4, 0, 0)).granted);
}

TEST(raft_pre_vote, refused_when_not_up_to_date) {
  memory_raft_log log;
  fill(log, {1, 2});
  replica r(config_for(1, {1, 2, 3}), log, quorum_state{3, no_leader, no_voter}, 0);
  EXPECT_FALSE(ask(r, 2, vote(2, 3, 1, 5, true)).granted);
}

TEST(raft_pre_vote, a_follower_of_a_live_leader_refuses) {
  memory_raft_log log;
  replica r(config_for(1, {1, 2, 3}), log, quorum_state{3, 2, no_voter}, 0);
  ASSERT_EQ(r.current_role(), role::follower);
  // Before its first successful fetch it grants (Kafka's fix for the prospective/follower ping-pong).
  const effects started = r.take_effects();
  const auto fetches = sent<fetch_request>(started);
  ASSERT_EQ(fetches.size(), 1u);
  EXPECT_EQ(fetches[0].first, 2);
  int64_t fetch_correlation = -1;
  for (const auto& m : started.messages) fetch_correlation = m.message.correlation_id;
  EXPECT_TRUE(ask(r, 3, vote(3, 3, 0, 0, true)).granted);

  fetch_response ok;
  ok.high_watermark = 0;
  ok.current_leader = {2, 3};
  r.on_message(2, msg(ok, fetch_correlation));
  r.take_effects();
  EXPECT_FALSE(ask(r, 3, vote(3, 3, 0, 0, true)).granted);

  // Once the leader resigns (EndQuorumEpoch), the follower canvasses for a successor again.
  r.on_message(2, msg(end_quorum_epoch_request{2, 3, {3, 1}}));
  r.take_effects();
  EXPECT_TRUE(ask(r, 3, vote(3, 3, 0, 0, true)).granted);
}

TEST(raft_pre_vote, a_leader_refuses_but_a_higher_epoch_deposes_it) {
  manual_net net;
  for (int32_t id : {1, 2, 3}) net.add(config_for(id, {1, 2, 3}), {}, std::nullopt);
  net.tick(1, 5000);
  net.run();
  ASSERT_EQ(net[1].current_role(), role::leader);
  const int32_t epoch = net[1].epoch();
  EXPECT_FALSE(ask(net[1], 2, vote(2, epoch, epoch, 100, true)).granted);
  EXPECT_EQ(net[1].current_role(), role::leader);
  // A real vote in a later epoch means an election already happened there: the leader steps down.
  EXPECT_TRUE(ask(net[1], 3, vote(3, epoch + 1, epoch, 100)).granted);
  EXPECT_EQ(net[1].current_role(), role::unattached);
  EXPECT_EQ(net[1].epoch(), epoch + 1);
}

// The scenario pre-vote exists for: a follower cut off from everyone keeps timing out, but its pre-votes go
// nowhere, so its epoch never moves; when it comes back its pre-votes are refused by followers of the live
// leader, whose answers name that leader, and it follows it again. The leader and its epoch never change.
TEST(raft_pre_vote, a_rejoining_partitioned_node_does_not_bump_the_epoch) {
  for (int voters : {3, 5}) {
    sim::cluster_options options;
    options.voters = voters;
    options.observers = 0;
    options.seed = 7;
    sim::cluster c(options);
    c.run_for(5000);
    const auto leader = c.stable_leader();
    ASSERT_TRUE(leader);
    const int32_t epoch = c.node(*leader).raft->epoch();
    const int32_t partitioned = *leader == 1 ? 2 : 1;

    c.isolate(partitioned);
    bool was_prospective = false;
    for (int i = 0; i < 2000; ++i) {  // 20 s cut off: ten fetch timeouts
      c.run_for(10);
      const replica& r = *c.node(partitioned).raft;
      was_prospective = was_prospective || r.current_role() == role::prospective;
      ASSERT_NE(r.current_role(), role::candidate);
      ASSERT_EQ(r.epoch(), epoch);
      ASSERT_EQ(c.node(*leader).raft->current_role(), role::leader);
    }
    EXPECT_TRUE(was_prospective);

    c.heal();
    c.run_for(3000);
    EXPECT_EQ(c.stable_leader(), leader);
    EXPECT_EQ(c.node(*leader).raft->epoch(), epoch);
    EXPECT_EQ(c.node(partitioned).raft->current_role(), role::follower);
    EXPECT_EQ(c.node(partitioned).raft->leader_id(), *leader);
    EXPECT_TRUE(c.failure.empty()) << c.failure;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Replication

// Node 2 holds entries of epoch 3 that the new leader (node 1, elected in epoch 4 with node 3's vote) never
// had. Its fetch (offset 4, last epoch 3) is answered with DivergingEpoch {epoch 2, end offset 4}; node 2's
// largest epoch <= 2 is epoch 1, ending at 2, so it truncates to 2 and fetches the leader's entries from
// there.
TEST(raft_replication, a_diverging_follower_truncates_to_the_common_prefix) {
  manual_net net;
  net.add(config_for(1, {1, 2, 3}), {1, 1, 2, 2}, quorum_state{3, no_leader, no_voter});
  net.add(config_for(2, {1, 2, 3}), {1, 1, 3, 3}, quorum_state{3, 2, 2});  // led epoch 3: restarts resigned
  net.add(config_for(3, {1, 2, 3}), {1, 1, 2, 2}, quorum_state{3, no_leader, no_voter});
  ASSERT_EQ(net[2].current_role(), role::resigned);
  net.run();

  net.tick(1, 5000);  // node 1's election timeout: pre-vote (node 3 grants), vote, leader of epoch 4
  net.run();
  ASSERT_EQ(net[1].current_role(), role::leader);
  ASSERT_EQ(net[1].epoch(), 4);
  ASSERT_EQ(net[2].current_role(), role::follower);

  const auto& ops = net.members.at(2)->log_operations;
  ASSERT_FALSE(ops.empty());
  ASSERT_TRUE(std::holds_alternative<log_truncation>(ops.front()));
  EXPECT_EQ(std::get<log_truncation>(ops.front()).offset, 2);
  EXPECT_EQ(net.members.at(2)->log.entries(), net.members.at(1)->log.entries());
  EXPECT_EQ(net.members.at(1)->log.end_offset(), 5);  // + the leader_change entry of epoch 4
  EXPECT_EQ(net[1].high_watermark(), 5);
  EXPECT_EQ(net[2].high_watermark(), 5);
  EXPECT_EQ(net[3].high_watermark(), 5);
}

// Raft's commitment rule (Figure 8 of the Raft paper): node 1, leader of epoch 3, holds an entry of epoch 2
// at offset 1 that it never committed. Followers fetch one entry per response, so there is a moment when that
// entry is on a majority (nodes 1 and 2) but the leader's own leader_change entry (offset 2) is not: the high
// watermark must stay put until the leader_change entry is on a majority too, and then cover both.
TEST(raft_replication, entries_of_earlier_epochs_commit_only_with_one_of_the_leaders_epoch) {
  manual_net net;
  auto one_entry = [](int32_t id) {
    raft_config c = config_for(id, {1, 2, 3});
    c.fetch_max_entries = 1;
    return c;
  };
  net.add(one_entry(1), {1, 2}, quorum_state{2, no_leader, no_voter});
  net.add(one_entry(2), {1}, quorum_state{2, no_leader, no_voter});
  net.add(one_entry(3), {1}, quorum_state{2, no_leader, no_voter});
  net.tick(1, 5000);
  // Let the election finish, then cut node 3 off.
  while (net[1].current_role() != role::leader && net.step()) {
  }
  ASSERT_EQ(net[1].current_role(), role::leader);
  ASSERT_EQ(net[1].epoch(), 3);
  net.link = [](int32_t from, int32_t to) { return from != 3 && to != 3; };

  bool saw_old_entry_on_majority_uncommitted = false;
  for (int i = 0; i < 1000 && net.step(); ++i) {
    const int64_t hw = net[1].high_watermark();
    ASSERT_TRUE(hw == 0 || hw >= 3) << "committed an epoch-2 entry without the epoch-3 one: hw " << hw;
    for (const replica_progress& p : net[1].progress()) {
      if (p.replica_id == 2 && p.log_end_offset == 2 && hw == 0) saw_old_entry_on_majority_uncommitted = true;
    }
  }
  EXPECT_TRUE(saw_old_entry_on_majority_uncommitted);
  EXPECT_EQ(net[1].high_watermark(), 3);
  EXPECT_EQ(net[2].high_watermark(), 3);
}

// What the leader tells controller_channel about its followers: seen_high_watermark never runs ahead of the
// high watermark a follower has actually handled, and catches up with the leader's once they fetch again.
TEST(raft_replication, the_leader_knows_which_high_watermark_each_follower_has_seen) {
  manual_net net;
  net.add(config_for(1, {1, 2, 3}), {1, 2}, quorum_state{2, no_leader, no_voter});
  net.add(config_for(2, {1, 2, 3}), {1}, quorum_state{2, no_leader, no_voter});
  net.add(config_for(3, {1, 2, 3}), {1}, quorum_state{2, no_leader, no_voter});
  net.tick(1, 5000);
  while (net[1].current_role() != role::leader && net.step()) {
  }
  ASSERT_EQ(net[1].current_role(), role::leader);
  ASSERT_TRUE(net[1].append({{7}, {8}}).ok());
  net.collect(1);
  auto check = [&] {
    for (const replica_progress& p : net[1].progress()) {
      ASSERT_LE(p.seen_high_watermark, net[p.replica_id].high_watermark()) << "follower " << p.replica_id;
    }
  };
  for (int i = 0; i < 1000 && net.step(); ++i) check();
  const int64_t hw = net[1].high_watermark();
  ASSERT_GE(hw, 3);  // leader_change + both entries
  // Followers park a fetch once they hold everything; the one that told the leader they saw `hw` has arrived.
  for (const replica_progress& p : net[1].progress()) EXPECT_EQ(p.seen_high_watermark, hw) << p.replica_id;
}

TEST(raft_replication, a_single_voter_elects_itself_and_commits_once_flushed) {
  memory_raft_log log;
  replica r(config_for(1, {1}), log, std::nullopt, 0);
  EXPECT_EQ(r.current_role(), role::leader);
  EXPECT_EQ(r.epoch(), 1);
  effects e = r.take_effects();
  ASSERT_TRUE(e.quorum_state_to_persist);
  EXPECT_EQ(*e.quorum_state_to_persist, (quorum_state{1, 1, 1}));
  EXPECT_FALSE(e.high_watermark);  // the leader counts only what it has flushed
  ASSERT_EQ(log.end_offset(), 1);
  EXPECT_EQ(log.entries()[0].type, entry_type::leader_change);
  r.on_log_flushed(1);
  e = r.take_effects();
  EXPECT_EQ(e.high_watermark, 1);  // the leader_change entry

  auto appended = r.append({{1}, {2}, {3}});
  ASSERT_TRUE(appended.ok());
  EXPECT_EQ(appended->first_offset, 1);
  EXPECT_EQ(appended->last_offset, 3);
  EXPECT_EQ(appended->epoch, 1);
  e = r.take_effects();
  ASSERT_EQ(e.log_operations.size(), 1u);
  EXPECT_EQ(std::get<log_append>(e.log_operations[0]).entries.size(), 3u);
  EXPECT_FALSE(e.high_watermark);
  r.on_log_flushed(4);
  EXPECT_EQ(r.take_effects().high_watermark, 4);
}

// The glue syncs on another thread while the replica goes on (raft_node): appends made while a sync runs
// commit with the next one (group commit), and a flush report never counts entries written after the sync
// started.
TEST(raft_replication, the_leader_commits_only_what_its_flushes_covered) {
  memory_raft_log log;
  replica r(config_for(1, {1}), log, std::nullopt, 0);
  r.take_effects();
  ASSERT_TRUE(r.append({{1}, {2}}).ok());  // offsets 1-2
  const int64_t first_sync_end = log.end_offset();
  ASSERT_TRUE(r.append({{3}}).ok());  // written while the first sync runs
  ASSERT_TRUE(r.append({{4}}).ok());
  EXPECT_EQ(r.high_watermark(), 0);
  r.on_log_flushed(first_sync_end);
  EXPECT_EQ(r.high_watermark(), first_sync_end);
  r.on_log_flushed(first_sync_end - 1);  // an older report moves nothing back
  EXPECT_EQ(r.high_watermark(), first_sync_end);
  r.on_log_flushed(log.end_offset() + 10);  // never past the log
  EXPECT_EQ(r.high_watermark(), log.end_offset());
}

TEST(raft_replication, only_the_leader_appends) {
  memory_raft_log log;
  replica r(config_for(1, {1, 2, 3}), log, std::nullopt, 0);
  const auto refused = r.append({{1}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, error_code::not_leader_or_follower);
  EXPECT_EQ(log.end_offset(), 0);
}

// A fetch with nothing new is parked (long poll) and answered as soon as entries arrive, and the follower
// learns the new high watermark without waiting out fetch_max_wait_ms.
TEST(raft_replication, long_polled_fetches_complete_on_append_and_commit) {
  sim::cluster_options options;
  options.voters = 3;
  options.observers = 1;
  options.faults = {0, 0, 1, 1};
  sim::cluster c(options);
  c.run_for(5000);
  ASSERT_TRUE(c.stable_leader());
  c.run_for(1000);
  const auto appended = c.client_append(2);
  ASSERT_TRUE(appended);
  c.run_for(10);  // a few network hops, far below the 500 ms long poll
  for (auto& n : c.nodes()) EXPECT_GT(n->committed, appended->last_offset) << "node " << n->id;
  EXPECT_TRUE(c.failure.empty()) << c.failure;
}

// ---------------------------------------------------------------------------------------------------------
// Leadership changes

TEST(raft_leadership, a_restarted_leader_comes_back_resigned) {
  memory_raft_log log;
  fill(log, {4});
  replica r(config_for(1, {1, 2, 3}), log, quorum_state{4, 1, 1}, 0);
  EXPECT_EQ(r.current_role(), role::resigned);
  EXPECT_EQ(r.epoch(), 4);
  const effects e = r.take_effects();
  EXPECT_FALSE(e.quorum_state_to_persist);
  EXPECT_EQ(sent<end_quorum_epoch_request>(e).size(), 2u);
  EXPECT_FALSE(r.append({{1}}).ok());
}

TEST(raft_leadership, graceful_resignation_elects_a_successor_quickly) {
  sim::cluster_options options;
  options.voters = 5;
  options.faults = {0, 0, 1, 5};
  sim::cluster c(options);
  c.run_for(5000);
  const auto leader = c.stable_leader();
  ASSERT_TRUE(leader);
  const int32_t epoch = c.node(*leader).raft->epoch();
  c.resign_leader();
  const int64_t resigned_at = c.now();
  while (c.now() - resigned_at < 10000 &&
         !(c.stable_leader() && c.node(*c.stable_leader()).raft->epoch() > epoch)) {
    c.run_for(10);
  }
  ASSERT_TRUE(c.stable_leader());
  EXPECT_GT(c.node(*c.stable_leader()).raft->epoch(), epoch);
  // The first preferred successor stands at once: far sooner than a fetch timeout plus an election timeout.
  EXPECT_LT(c.now() - resigned_at, 1500);
  EXPECT_TRUE(c.failure.empty()) << c.failure;
}

TEST(raft_leadership, an_isolated_leader_resigns_and_the_majority_elects_another) {
  sim::cluster_options options;
  options.voters = 3;
  options.faults = {0, 0, 1, 5};
  sim::cluster c(options);
  c.run_for(5000);
  const auto leader = c.stable_leader();
  ASSERT_TRUE(leader);
  const int32_t epoch = c.node(*leader).raft->epoch();
  c.isolate(*leader);
  c.run_for(3500);  // check quorum: 1.5 x controller.quorum.fetch.timeout.ms without a majority fetching
  EXPECT_NE(c.node(*leader).raft->current_role(), role::leader);
  int leaders = 0;
  for (auto& n : c.nodes()) {
    if (n->raft->current_role() == role::leader) {
      ++leaders;
      EXPECT_GT(n->raft->epoch(), epoch);
    }
  }
  EXPECT_EQ(leaders, 1);
  c.heal();
  c.run_for(3000);
  const auto after = c.stable_leader();
  ASSERT_TRUE(after);
  EXPECT_NE(*after, *leader);
  EXPECT_EQ(c.node(*leader).raft->leader_id(), *after);
  EXPECT_TRUE(c.failure.empty()) << c.failure;
}

// Split brain: the old leader keeps a minority and accepts appends it can never commit; the majority elects a
// new leader and commits; after healing, the minority's uncommitted entries are truncated away.
TEST(raft_leadership, split_brain_minority_cannot_commit_and_is_truncated) {
  sim::cluster_options options;
  options.voters = 5;
  options.observers = 1;
  options.faults = {0, 0, 1, 5};
  sim::cluster c(options);
  c.run_for(5000);
  const auto old_leader = c.stable_leader();
  ASSERT_TRUE(old_leader);
  std::vector<int32_t> minority{*old_leader, *old_leader % 5 + 1};
  std::vector<int32_t> majority;
  for (int32_t id = 1; id <= 6; ++id) {
    if (id != minority[0] && id != minority[1]) majority.push_back(id);
  }
  c.partition({minority, majority});
  const int64_t committed_before = c.node(*old_leader).committed;
  const auto lost = c.client_append(3);  // on the old leader, the only leader so far
  ASSERT_TRUE(lost);
  c.run_for(2000);
  EXPECT_EQ(c.node(*old_leader).committed, committed_before);  // no majority on its side
  c.run_for(3000);
  std::optional<append_info> kept;
  for (int i = 0; i < 100 && !kept; ++i) {
    kept = c.client_append(1);  // the new leader has the highest epoch
    if (kept && kept->epoch == lost->epoch) kept.reset();
    c.run_for(50);
  }
  ASSERT_TRUE(kept);
  c.run_for(1000);
  c.heal();
  c.run_for(5000);
  const auto leader = c.stable_leader();
  ASSERT_TRUE(leader);
  for (int32_t id : minority) {
    const auto& entries = c.node(id).log.entries();
    EXPECT_GT(c.node(id).committed, kept->last_offset) << "node " << id;
    for (const log_entry& e : entries) {
      EXPECT_FALSE(e.epoch == lost->epoch && e.offset >= lost->first_offset)
          << "node " << id << " kept " << e.offset;
    }
  }
  EXPECT_TRUE(c.failure.empty()) << c.failure;
}

TEST(raft_messages, describe_names_the_kafka_message_and_its_fields) {
  EXPECT_EQ(describe(msg(vote(2, 5, 4, 10, true), 7)), "#7 PreVote(candidate 2 epoch 5 last 10@4)");
  fetch_response diverging;
  diverging.diverging_epoch = {2, 4};
  diverging.current_leader = {1, 4};
  diverging.high_watermark = 3;
  EXPECT_EQ(describe(msg(diverging, 8)),
            "#8 FetchResponse(NONE hw 3 diverging 4@2 leader 1 epoch 4 records 0)");
}

// ---------------------------------------------------------------------------------------------------------
// Observers

// An observer that knows the voters, and one that knows only bootstrap servers (KIP-853) and learns the
// leader's real id from their answers: both end up following the leader, replicated, without ever voting.
class raft_observer_discovery : public ::testing::TestWithParam<bool> {};

TEST_P(raft_observer_discovery, an_observer_finds_the_leader_replicates_and_never_votes) {
  sim::cluster_options options;
  options.voters = 3;
  options.observers = 1;
  options.observers_use_bootstrap = GetParam();
  options.faults = {0.02, 0.02, 1, 20};
  sim::cluster c(options);
  const int32_t observer = 4;
  for (int i = 0; i < 1000; ++i) {
    c.run_for(10);
    ASSERT_NE(c.node(observer).raft->current_role(), role::prospective);
    ASSERT_NE(c.node(observer).raft->current_role(), role::candidate);
    if (i % 50 == 0) c.client_append(1);
  }
  c.faults() = {0, 0, 1, 20};
  c.run_for(2000);
  const auto leader = c.stable_leader();
  ASSERT_TRUE(leader);
  const replica& r = *c.node(observer).raft;
  EXPECT_FALSE(r.is_voter());
  EXPECT_EQ(r.current_role(), role::follower);
  EXPECT_EQ(r.leader_id(), *leader);
  EXPECT_EQ(r.high_watermark(), c.node(*leader).raft->high_watermark());
  EXPECT_EQ(r.voted_id(), no_voter);
  // The leader tracks it, but it does not count for the high watermark.
  bool tracked = false;
  for (const replica_progress& p : c.node(*leader).raft->progress()) {
    if (p.replica_id == observer) tracked = !p.voter;
  }
  EXPECT_TRUE(tracked);
  EXPECT_TRUE(c.failure.empty()) << c.failure;
}

INSTANTIATE_TEST_SUITE_P(raft_observers, raft_observer_discovery, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "bootstrap_servers" : "voters"; });

TEST(raft_observers, a_fresh_observer_asks_a_bootstrap_server_and_follows_the_leader_it_names) {
  memory_raft_log log;
  raft_config config;
  config.node_id = 7;
  config.bootstrap_servers = 2;
  config.random_seed = 3;
  replica observer(config, log, std::nullopt, 0);
  observer.tick(1);
  effects sent_effects = observer.take_effects();
  ASSERT_EQ(sent_effects.messages.size(), 1u);
  const outbound_message& first = sent_effects.messages[0];
  const auto* fetch = std::get_if<fetch_request>(&first.message.body);
  ASSERT_NE(fetch, nullptr);
  const int32_t bootstrap = first.destination;
  EXPECT_TRUE(bootstrap == bootstrap_server_id(0) || bootstrap == bootstrap_server_id(1)) << bootstrap;
  EXPECT_EQ(fetch->current_leader_epoch, 0);
  // The bootstrap server is in epoch 3: it fences the request and names leader 2.
  fetch_response fenced;
  fenced.error_code = error_code::fenced_leader_epoch;
  fenced.current_leader = {2, 3};
  observer.on_message(bootstrap, raft_message{first.message.correlation_id, fenced});
  EXPECT_EQ(observer.current_role(), role::follower);
  EXPECT_EQ(observer.leader_id(), 2);
  EXPECT_EQ(observer.epoch(), 3);
  observer.tick(100);
  auto next = test::sent<fetch_request>(observer.take_effects());
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].first, 2);
  EXPECT_EQ(next[0].second.current_leader_epoch, 3);
}

}  // namespace
}  // namespace mala::raft
