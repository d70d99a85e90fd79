// build_partition_change: the election order (ISR, then ELR, then the last known leader, then unclean), the
// ELR and last known ELR bookkeeping of KIP-966, and the records it writes (or not), case by case.
#include "mala/controller/partition_change.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "mala/metadata/metadata_delta.h"

namespace mala::controller {
namespace {

using ids = std::vector<int32_t>;

metadata::partition_state partition(ids replicas, ids isr, int32_t leader, ids elr = {},
                                    ids last_known = {}) {
  metadata::partition_state p;
  p.partition = 3;
  p.replicas = std::move(replicas);
  p.isr = std::move(isr);
  p.leader = leader;
  p.leader_epoch = 7;
  p.partition_epoch = 9;
  p.eligible_leader_replicas = std::move(elr);
  p.last_known_elr = std::move(last_known);
  return p;
}

partition_change_request request(ids target_isr, std::set<int32_t> alive, int32_t min_isr = 2) {
  partition_change_request r;
  r.topic_id = uuid::random();
  r.target_isr = std::move(target_isr);
  r.acceptable_leader = [alive](int32_t id) { return alive.count(id) != 0; };
  r.min_insync_replicas = min_isr;
  return r;
}

TEST(partition_change, nothing_to_change_writes_nothing) {
  const auto p = partition({1, 2, 3}, {1, 2, 3}, 1);
  const auto change = build_partition_change(p, request({1, 2, 3}, {1, 2, 3}));
  EXPECT_FALSE(change.record);
  EXPECT_EQ(change.leader, 1);
}

TEST(partition_change, an_isr_shrink_that_keeps_min_isr_changes_only_the_isr) {
  const auto p = partition({1, 2, 3}, {1, 2, 3}, 1);
  const auto change = build_partition_change(p, request({1, 2}, {1, 2, 3}));
  ASSERT_TRUE(change.record);
  EXPECT_EQ(change.record->leader, metadata::no_leader_change);  // no leader epoch bump
  EXPECT_EQ(change.record->isr, (ids{1, 2}));
  EXPECT_FALSE(change.record->eligible_leader_replicas);
  EXPECT_EQ(change.record->partition_id, 3);
}

TEST(partition_change, members_leaving_the_isr_below_min_isr_join_the_elr) {
  const auto p = partition({1, 2, 3}, {1, 2}, 1);
  const auto change = build_partition_change(p, request({1}, {1, 2, 3}));
  ASSERT_TRUE(change.record);
  EXPECT_EQ(change.record->isr, (ids{1}));
  EXPECT_EQ(change.record->eligible_leader_replicas, (ids{2}));
}

TEST(partition_change, an_isr_back_at_min_isr_clears_the_elr) {
  const auto p = partition({1, 2, 3}, {1}, 1, {2});
  const auto change = build_partition_change(p, request({1, 3}, {1, 2, 3}));
  ASSERT_TRUE(change.record);
  EXPECT_EQ(change.record->isr, (ids{1, 3}));
  EXPECT_EQ(change.record->eligible_leader_replicas, (ids{}));
}

TEST(partition_change, a_dead_leader_is_replaced_by_the_first_live_isr_member_in_replica_order) {
  const auto p = partition({3, 1, 2}, {1, 2, 3}, 1);
  const auto change = build_partition_change(p, request({2, 3}, {2, 3}));
  ASSERT_TRUE(change.record);
  EXPECT_EQ(change.record->leader, 3);
  EXPECT_EQ(change.record->isr, (ids{2, 3}));
  EXPECT_FALSE(change.unclean);
}

TEST(partition_change, the_last_isr_member_fenced_leaves_the_isr_empty_with_it_in_the_elr) {
  const auto p = partition({1, 2, 3}, {1}, 1, {2});
  const auto change = build_partition_change(p, request({}, {2, 3}));
  ASSERT_TRUE(change.record);
  // 2 is alive and in the ELR: it leads, as the whole ISR.
  EXPECT_EQ(change.record->leader, 2);
  EXPECT_TRUE(change.from_elr);
  EXPECT_EQ(change.record->isr, (ids{2}));
  EXPECT_EQ(change.record->eligible_leader_replicas, (ids{1}));
}

TEST(partition_change, with_no_live_isr_or_elr_member_the_partition_has_no_leader_and_remembers_the_last) {
  const auto p = partition({1, 2, 3}, {1}, 1, {2});
  const auto change = build_partition_change(p, request({}, {3}));
  ASSERT_TRUE(change.record);
  EXPECT_EQ(change.record->leader, metadata::no_leader);
  EXPECT_EQ(change.record->isr, (ids{}));
  EXPECT_EQ(change.record->eligible_leader_replicas, (ids{1, 2}));
  EXPECT_EQ(change.record->last_known_elr, (ids{1}));
  // 3 is alive but out of sync: only an unclean election takes it.
  auto unclean = request({}, {3});
  unclean.election = election_type::unclean;
  const auto forced = build_partition_change(p, unclean);
  ASSERT_TRUE(forced.record);
  EXPECT_EQ(forced.record->leader, 3);
  EXPECT_TRUE(forced.unclean);
  EXPECT_EQ(forced.record->isr, (ids{3}));
  EXPECT_EQ(forced.record->eligible_leader_replicas, (ids{}));
  EXPECT_EQ(forced.record->leader_recovery_state, metadata::leader_recovering);
}

TEST(partition_change, an_elr_member_coming_back_leads) {
  const auto p = partition({1, 2, 3}, {}, metadata::no_leader, {1, 2}, {1});
  const auto change = build_partition_change(p, request({}, {2}));
  ASSERT_TRUE(change.record);
  EXPECT_EQ(change.record->leader, 2);
  EXPECT_EQ(change.record->isr, (ids{2}));
  EXPECT_EQ(change.record->eligible_leader_replicas, (ids{1}));
  EXPECT_EQ(change.record->last_known_elr, (ids{}));  // a leader again
  EXPECT_EQ(change.record->leader_recovery_state, metadata::no_leader_recovery_state_change);
}

TEST(partition_change, an_unclean_shutdown_removes_the_replica_from_isr_and_elr) {
  const auto p = partition({1, 2, 3}, {1, 2}, 1, {});
  auto r = request({1}, {1, 3});
  r.unclean_shutdown_replicas = {2};
  const auto change = build_partition_change(p, r);
  ASSERT_TRUE(change.record);
  EXPECT_EQ(change.record->isr, (ids{1}));
  EXPECT_FALSE(change.record->eligible_leader_replicas);  // still empty: 2 may have lost its tail
}

TEST(partition_change, the_last_known_leader_returns_when_every_replica_shut_down_uncleanly) {
  // A whole-cluster kill -9: the replicas registered again one by one after an unclean shutdown and left
  // the ISR; the last one was the leader.
  const auto p = partition({1, 2, 3}, {}, metadata::no_leader, {}, {3});
  EXPECT_EQ(build_partition_change(p, request({}, {1, 2})).record, std::nullopt);  // 3 not back: wait
  const auto change = build_partition_change(p, request({}, {1, 2, 3}));
  ASSERT_TRUE(change.record);
  EXPECT_EQ(change.record->leader, 3);
  // Not an unclean election (no replica outside the ISR and ELR was chosen), though handled like one.
  EXPECT_FALSE(change.unclean);
  EXPECT_TRUE(change.from_last_known_leader);
  EXPECT_EQ(change.record->isr, (ids{3}));
  EXPECT_EQ(change.record->leader_recovery_state, metadata::leader_recovering);
  EXPECT_EQ(change.record->last_known_elr, (ids{}));
}

TEST(partition_change, a_stale_replica_never_leads_an_empty_isr_and_elr_without_unclean_election) {
  // 3 was out of the ISR when every replica crashed; 1 was the leader. Only 3 is back.
  const auto p = partition({1, 2, 3}, {}, metadata::no_leader, {}, {1});
  EXPECT_EQ(build_partition_change(p, request({}, {3})).record, std::nullopt);
  auto r = request({}, {3});
  r.election = election_type::unclean;
  const auto change = build_partition_change(p, r);
  ASSERT_TRUE(change.record);
  EXPECT_EQ(change.record->leader, 3);
  EXPECT_TRUE(change.unclean);
  EXPECT_FALSE(change.from_last_known_leader);
  // With the last known leader back too, even an unclean election takes it first.
  r.acceptable_leader = [](int32_t id) { return id == 1 || id == 3; };
  const auto back = build_partition_change(p, r);
  ASSERT_TRUE(back.record);
  EXPECT_EQ(back.record->leader, 1);
  EXPECT_FALSE(back.unclean);
  EXPECT_TRUE(back.from_last_known_leader);
}

TEST(partition_change, the_preferred_replica_leads_when_several_elr_members_are_eligible) {
  const auto p = partition({2, 1, 3}, {}, metadata::no_leader, {1, 2, 3});
  const auto change = build_partition_change(p, request({}, {1, 2, 3}));
  ASSERT_TRUE(change.record);
  EXPECT_EQ(change.record->leader, 2);
  EXPECT_TRUE(change.from_elr);
  EXPECT_EQ(change.record->isr, (ids{2}));
  EXPECT_EQ(change.record->eligible_leader_replicas, (ids{1, 3}));
}

TEST(partition_change, a_preferred_election_moves_leadership_to_the_first_replica_when_in_sync) {
  const auto p = partition({1, 2, 3}, {1, 2, 3}, 2);
  auto r = request({1, 2, 3}, {1, 2, 3});
  r.election = election_type::preferred;
  const auto change = build_partition_change(p, r);
  ASSERT_TRUE(change.record);
  EXPECT_EQ(change.record->leader, 1);
  // Not in sync: the leader stays.
  const auto out_of_sync = partition({1, 2, 3}, {2, 3}, 2);
  auto r2 = request({2, 3}, {1, 2, 3});
  r2.election = election_type::preferred;
  EXPECT_FALSE(build_partition_change(out_of_sync, r2).record);
  // A plain (online) election never moves a healthy leader.
  EXPECT_FALSE(build_partition_change(p, request({1, 2, 3}, {1, 2, 3})).record);
}

TEST(partition_change, without_elr_the_last_isr_member_stays_in_the_isr) {
  const auto p = partition({1, 2}, {1}, 1);
  auto r = request({}, {2}, 1);
  r.elr_enabled = false;
  const auto change = build_partition_change(p, r);
  ASSERT_TRUE(change.record);
  EXPECT_EQ(change.record->leader, metadata::no_leader);
  EXPECT_FALSE(change.record->isr);
  EXPECT_FALSE(change.record->eligible_leader_replicas);
}

TEST(partition_change, a_recovered_leader_clears_the_recovering_state) {
  auto p = partition({1, 2, 3}, {1}, 1);
  p.leader_recovery_state = metadata::leader_recovering;
  auto r = request({1}, {1, 2, 3}, 1);
  r.target_leader_recovery_state = metadata::leader_recovered;
  const auto change = build_partition_change(p, r);
  ASSERT_TRUE(change.record);
  EXPECT_EQ(change.record->leader_recovery_state, metadata::leader_recovered);
  EXPECT_FALSE(change.record->isr);
}

}  // namespace
}  // namespace mala::controller
