// Consumer group traffic across shards inside one node (tests/unit/broker/shard_node_fixture.h): two members
// whose connections live on different shards find the coordinator, join and sync a classic group, consume
// their assigned partitions (spread over every shard), commit offsets, read them back from a third shard, see
// the coordinator move away and back (its __consumer_offsets partition replayed), and leave. The group
// coordinator stays on the home shard; every answer must be the same with 1, 2 and 4 shards.
#include <gtest/gtest.h>

#include "mala/coordinator/consumer_protocol.h"
#include "mala/protocol/messages/find_coordinator_request.h"
#include "mala/protocol/messages/find_coordinator_response.h"
#include "mala/protocol/messages/heartbeat_request.h"
#include "mala/protocol/messages/heartbeat_response.h"
#include "mala/protocol/messages/join_group_request.h"
#include "mala/protocol/messages/join_group_response.h"
#include "mala/protocol/messages/leave_group_request.h"
#include "mala/protocol/messages/leave_group_response.h"
#include "mala/protocol/messages/offset_commit_request.h"
#include "mala/protocol/messages/offset_commit_response.h"
#include "mala/protocol/messages/offset_fetch_request.h"
#include "mala/protocol/messages/offset_fetch_response.h"
#include "mala/protocol/messages/sync_group_request.h"
#include "mala/protocol/messages/sync_group_response.h"
#include "mala/protocol/messages/txn_offset_commit_request.h"
#include "mala/protocol/messages/txn_offset_commit_response.h"
#include "shard_node_fixture.h"

namespace mala::broker {
namespace {

constexpr int16_t member_id_required = 79;
constexpr int16_t rebalance_in_progress = 27;
constexpr int16_t not_coordinator = 16;
constexpr int16_t coordinator_load_in_progress = 14;
constexpr int16_t invalid_producer_epoch = 47;
constexpr int16_t unstable_offset_commit = 88;
constexpr int32_t event_partitions = 6;
const std::string group = "shard-group";

// A ConsumerProtocolSubscription v0 of `topics`, no user data.
std::vector<uint8_t> subscription(const std::vector<std::string>& topics) {
  std::vector<uint8_t> out;
  wire_writer w(out);
  w.write_int16(0);
  w.write_array_length(static_cast<int32_t>(topics.size()), false);
  for (const auto& t : topics) w.write_string(t, false);
  w.write_int32(-1);
  return out;
}

class group_traffic_test : public shard_node_test {
 protected:
  static join_group_request join_req(const std::string& member_id) {
    join_group_request req;
    req.group_id = group;
    req.session_timeout_ms = 10'000;
    req.rebalance_timeout_ms = 10'000;
    req.member_id = member_id;
    req.protocol_type = "consumer";
    req.protocols.push_back({"range", subscription({"events"})});
    return req;
  }
  std::future<net::dispatch_result> start_join(size_t shard, const std::string& member_id) {
    return start(frame(join_group_request::api_key, 9, join_req(member_id)), nullptr, shard % GetParam());
  }
  // A new member's first JoinGroup (KIP-394): MEMBER_ID_REQUIRED and the id to join with.
  std::string member_id_from(size_t shard) {
    auto resp = call<join_group_response>(shard, 9, join_req(""));
    EXPECT_EQ(resp.error_code, member_id_required);
    EXPECT_FALSE(resp.member_id.empty());
    return resp.member_id;
  }

  std::future<net::dispatch_result> start_sync(
      size_t shard, int32_t generation, const std::string& member_id,
      const std::map<std::string, coordinator::named_partitions>& plan) {
    sync_group_request req;
    req.group_id = group;
    req.generation_id = generation;
    req.member_id = member_id;
    req.protocol_type = "consumer";
    req.protocol_name = "range";
    for (const auto& [member, partitions] : plan) {
      req.assignments.push_back({member, coordinator::encode_assignment(partitions, 0)});
    }
    return start(frame(sync_group_request::api_key, 5, req), nullptr, shard % GetParam());
  }
  // The partitions of `events` a SyncGroup answer assigns.
  static std::set<int32_t> assigned(const sync_group_response& resp) {
    EXPECT_EQ(resp.error_code, 0);
    auto partitions = coordinator::decode_assignment(resp.assignment);
    EXPECT_TRUE(partitions.has_value());
    if (!partitions || !partitions->contains("events")) return {};
    return partitions->at("events");
  }

  int16_t heartbeat(size_t shard, int32_t generation, const std::string& member_id) {
    heartbeat_request req;
    req.group_id = group;
    req.generation_id = generation;
    req.member_id = member_id;
    return call<heartbeat_response>(shard, 4, req).error_code;
  }

  // Fetches `partitions` of events from offset 0 on a connection of `shard`: the record count of each.
  std::map<int32_t, int32_t> consume(size_t shard, const std::set<int32_t>& partitions) {
    std::vector<std::tuple<std::string, int32_t, int64_t>> wanted;
    for (int32_t p : partitions) wanted.emplace_back("events", p, 0);
    auto raw = start(frame(1, 12, fetch_req(wanted)), nullptr, shard % GetParam()).get();
    auto resp = decode<fetch_response>(raw, 12);
    std::map<int32_t, int32_t> counts;
    for (const auto& t : resp.responses) {
      for (const auto& p : t.partitions) {
        EXPECT_EQ(p.error_code, 0);
        int32_t records = 0;
        for (const auto& [base, count] : batches_in(p.records)) records += count;
        counts[p.partition_index] = records;
      }
    }
    return counts;
  }

  // Commits offset `offset` of `partitions` as a member of `generation`; the error of every partition.
  std::set<int16_t> commit(size_t shard, int32_t generation, const std::string& member_id,
                           const std::set<int32_t>& partitions, int64_t offset) {
    offset_commit_request req;
    req.group_id = group;
    req.generation_id_or_member_epoch = generation;
    req.member_id = member_id;
    auto& t = req.topics.emplace_back();
    t.name = "events";
    for (int32_t p : partitions) {
      auto& part = t.partitions.emplace_back();
      part.partition_index = p;
      part.committed_offset = offset;
    }
    auto resp = call<offset_commit_response>(shard, 8, req);
    std::set<int16_t> errors;
    for (const auto& topic : resp.topics) {
      for (const auto& p : topic.partitions) errors.insert(p.error_code);
    }
    EXPECT_EQ(resp.topics.size(), 1u);
    return errors;
  }

  // The group's committed offsets of every events partition (v8, the groups form); the group's error code.
  std::pair<int16_t, std::map<int32_t, int64_t>> committed(size_t shard) {
    offset_fetch_request req;
    auto& g = req.groups.emplace_back();
    g.group_id = group;
    g.topics.emplace();
    auto& t = g.topics->emplace_back();
    t.name = "events";
    for (int32_t p = 0; p < event_partitions; ++p) t.partition_indexes.push_back(p);
    auto resp = call<offset_fetch_response>(shard, 8, req);
    std::map<int32_t, int64_t> offsets;
    if (resp.groups.size() != 1) {
      ADD_FAILURE() << "groups in the answer: " << resp.groups.size();
      return {-1, offsets};
    }
    for (const auto& topic : resp.groups[0].topics) {
      for (const auto& p : topic.partitions) offsets[p.partition_index] = p.committed_offset;
    }
    return {resp.groups[0].error_code, offsets};
  }

  // TxnOffsetCommit v3 of `offsets` (partition -> offset) by a producer outside the group's membership.
  std::set<int16_t> txn_commit(size_t shard, int64_t producer_id, int16_t epoch,
                               const std::map<int32_t, int64_t>& offsets) {
    txn_offset_commit_request req;
    req.transactional_id = "txn-" + std::to_string(producer_id);
    req.group_id = group;
    req.producer_id = producer_id;
    req.producer_epoch = epoch;
    auto& t = req.topics.emplace_back();
    t.name = "events";
    for (auto [p, offset] : offsets) {
      auto& part = t.partitions.emplace_back();
      part.partition_index = p;
      part.committed_offset = offset;
    }
    auto resp = call<txn_offset_commit_response>(shard, 3, req);
    std::set<int16_t> errors;
    for (const auto& topic : resp.topics) {
      for (const auto& p : topic.partitions) errors.insert(p.error_code);
    }
    return errors;
  }

  // OffsetFetch v8 of events-0 and events-1 with RequireStable: each partition's error code.
  std::map<int32_t, int16_t> stable_errors(size_t shard) {
    offset_fetch_request req;
    req.require_stable = true;
    auto& g = req.groups.emplace_back();
    g.group_id = group;
    g.topics.emplace();
    g.topics->push_back({"events", {0, 1}});
    auto resp = call<offset_fetch_response>(shard, 8, req);
    std::map<int32_t, int16_t> errors;
    for (const auto& topic : resp.groups.at(0).topics) {
      for (const auto& p : topic.partitions) errors[p.partition_index] = p.error_code;
    }
    return errors;
  }

  // The transaction coordinator's marker for __consumer_offsets-0 through the group coordinator (what the
  // WriteTxnMarkers handler calls): its answer once written.
  error_code end_transaction(int64_t producer_id, int16_t epoch, bool commit) {
    auto answer = std::make_shared<std::promise<error_code>>();
    auto done = answer->get_future();
    on_home([&] {
      _groups->coordinator().complete_transaction(0, {producer_id, epoch, commit, 1, 0},
                                                  [answer](error_code e) { answer->set_value(e); });
      return 0;
    });
    return done.get();
  }

  // The committed offsets once the coordinator (re)loaded its partition.
  std::map<int32_t, int64_t> committed_after_load(size_t shard) {
    auto deadline = steady_clock::now() + std::chrono::seconds(10);
    auto reloaded = committed(shard);
    while (reloaded.first == coordinator_load_in_progress && steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(10));
      reloaded = committed(shard);
    }
    EXPECT_EQ(reloaded.first, 0);
    return reloaded.second;
  }

  // Moves the leadership of __consumer_offsets-0 to `leader` at `epoch` (this node follows when it is not the
  // leader), publishes the image and tells the group coordinator, as the metadata publisher does.
  void move_offsets_partition(int32_t leader, int32_t epoch) {
    auto image = std::make_shared<metadata::metadata_image>(*_image);
    auto& state = image->topics["__consumer_offsets"].partitions[0];
    state.leader = leader;
    state.leader_epoch = epoch;
    state.partition_epoch = epoch;
    state.replicas = {self, 2};
    state.isr = leader == self ? std::vector<int32_t>{self} : std::vector<int32_t>{self, 2};
    replication::partition_leadership l;
    l.topic = "__consumer_offsets";
    l.partition = 0;
    l.topic_id = image->topics.at("__consumer_offsets").id;
    l.state = {state.leader, state.leader_epoch, state.partition_epoch, state.replicas, state.isr, 1};
    auto applied = on_owner("__consumer_offsets", 0, [&] {
      auto r = replicas_of("__consumer_offsets", 0).apply_leadership(l);
      return r.ok() ? std::string() : r.error().message;
    });
    ASSERT_EQ(applied, "");
    _image = image;
    cache.publish(image);
    on_home([&] {
      _groups->on_metadata(*image);
      return 0;
    });
  }
};

TEST_P(group_traffic_test, members_on_several_shards_share_partitions_commit_and_survive_a_coordinator_move) {
  // The coordinator's partition is on the home shard; the group's partitions on every shard.
  EXPECT_EQ(shard_of("__consumer_offsets", 0), 0u);
  std::set<size_t> shards;
  for (int32_t p = 0; p < event_partitions; ++p) shards.insert(shard_of("events", p));
  EXPECT_EQ(shards.size(), std::min<size_t>(GetParam(), event_partitions));

  // p + 1 records in partition p, each produced from a different shard.
  for (int32_t p = 0; p < event_partitions; ++p) {
    auto resp = call<produce_response>(static_cast<size_t>(p), 11, produce_req("events", p, batch(p + 1)));
    ASSERT_EQ(resp.responses.size(), 1u);
    EXPECT_EQ(resp.responses[0].partition_responses.at(0).error_code, 0);
  }

  // FindCoordinator from shard 1: this node.
  find_coordinator_request find;
  find.key_type = 0;
  find.coordinator_keys = {group};
  auto found = call<find_coordinator_response>(1, 4, find);
  ASSERT_EQ(found.coordinators.size(), 1u);
  EXPECT_EQ(found.coordinators[0].error_code, 0);
  EXPECT_EQ(found.coordinators[0].node_id, self);
  EXPECT_EQ(found.coordinators[0].host, "broker-1");

  // Member A (shard 1) joins alone and takes every partition.
  const std::string a = member_id_from(1);
  auto joined_a = decode<join_group_response>(start_join(1, a).get(), 9);
  ASSERT_EQ(joined_a.error_code, 0);
  EXPECT_EQ(joined_a.generation_id, 1);
  EXPECT_EQ(joined_a.leader, a);
  ASSERT_EQ(joined_a.members.size(), 1u);
  std::set<int32_t> all;
  for (int32_t p = 0; p < event_partitions; ++p) all.insert(p);
  auto synced_a = decode<sync_group_response>(start_sync(1, 1, a, {{a, {{"events", all}}}}).get(), 5);
  EXPECT_EQ(assigned(synced_a), all);
  auto counts = consume(1, all);
  for (int32_t p = 0; p < event_partitions; ++p) EXPECT_EQ(counts[p], p + 1) << "partition " << p;
  EXPECT_EQ(commit(1, 1, a, {0, 1, 2}, 1), std::set<int16_t>{0});

  // Member B (shard 2) joins: its JoinGroup waits for A, whose heartbeat learns of the rebalance.
  const std::string b = member_id_from(2);
  auto join_b = start_join(2, b);
  EXPECT_EQ(join_b.wait_for(milliseconds(100)), std::future_status::timeout);
  EXPECT_EQ(heartbeat(1, 1, a), rebalance_in_progress);
  auto rejoined_a = decode<join_group_response>(start_join(1, a).get(), 9);
  auto joined_b = decode<join_group_response>(join_b.get(), 9);
  ASSERT_EQ(rejoined_a.error_code, 0);
  ASSERT_EQ(joined_b.error_code, 0);
  EXPECT_EQ(rejoined_a.generation_id, 2);
  EXPECT_EQ(joined_b.generation_id, 2);
  EXPECT_EQ(rejoined_a.leader, a);
  EXPECT_EQ(rejoined_a.members.size(), 2u);  // only the leader learns the members
  EXPECT_TRUE(joined_b.members.empty());

  // B's SyncGroup waits for the leader's; A hands out the halves.
  const std::set<int32_t> half_a{0, 1, 2};
  const std::set<int32_t> half_b{3, 4, 5};
  auto sync_b = start_sync(2, 2, b, {});
  EXPECT_EQ(sync_b.wait_for(milliseconds(100)), std::future_status::timeout);
  auto synced = decode<sync_group_response>(
      start_sync(1, 2, a, {{a, {{"events", half_a}}}, {b, {{"events", half_b}}}}).get(), 5);
  EXPECT_EQ(assigned(synced), half_a);
  EXPECT_EQ(assigned(decode<sync_group_response>(sync_b.get(), 5)), half_b);

  // Each consumes its half from its own shard and commits everything it read; a commit of the old generation
  // is refused.
  counts = consume(2, half_b);
  EXPECT_EQ(counts.size(), half_b.size());
  for (int32_t p : half_b) EXPECT_EQ(counts[p], p + 1) << "partition " << p;
  EXPECT_EQ(commit(1, 1, a, half_a, 9), std::set<int16_t>{22});  // ILLEGAL_GENERATION
  for (int32_t p : half_a) EXPECT_EQ(commit(1, 2, a, {p}, p + 1), std::set<int16_t>{0});
  for (int32_t p : half_b) EXPECT_EQ(commit(2, 2, b, {p}, p + 1), std::set<int16_t>{0});
  std::map<int32_t, int64_t> expected;
  for (int32_t p = 0; p < event_partitions; ++p) expected[p] = p + 1;
  auto [error, offsets] = committed(3);
  EXPECT_EQ(error, 0);
  EXPECT_EQ(offsets, expected);
  EXPECT_EQ(heartbeat(2, 2, b), 0);

  // The coordinator moves to node 2: every shard answers NOT_COORDINATOR.
  move_offsets_partition(2, 4);
  EXPECT_EQ(heartbeat(1, 2, a), not_coordinator);
  EXPECT_EQ(committed(2).first, not_coordinator);

  // It comes back: the group and its offsets are replayed from __consumer_offsets.
  move_offsets_partition(self, 5);
  EXPECT_EQ(committed_after_load(3), expected);
  EXPECT_EQ(heartbeat(1, 2, a), 0);
  EXPECT_EQ(heartbeat(2, 2, b), 0);

  // B leaves from shard 2; A learns of the rebalance and rejoins alone at generation 3.
  leave_group_request leave;
  leave.group_id = group;
  leave.members.push_back({b, std::nullopt, std::nullopt});
  auto left = call<leave_group_response>(2, 5, leave);
  EXPECT_EQ(left.error_code, 0);
  ASSERT_EQ(left.members.size(), 1u);
  EXPECT_EQ(left.members[0].error_code, 0);
  EXPECT_EQ(heartbeat(1, 2, a), rebalance_in_progress);
  auto alone = decode<join_group_response>(start_join(1, a).get(), 9);
  EXPECT_EQ(alone.error_code, 0);
  EXPECT_EQ(alone.generation_id, 3);
  EXPECT_EQ(alone.members.size(), 1u);
}

// TxnOffsetCommit through the dispatcher into the real __consumer_offsets log (a transactional batch), the
// markers written by the group coordinator, and the replay of both when the coordinator moves away and back.
TEST_P(group_traffic_test, transactional_offsets_stay_pending_across_a_coordinator_move_until_the_marker) {
  constexpr int64_t producer = 7000;
  constexpr int64_t other_producer = 8000;
  EXPECT_EQ(txn_commit(1, producer, 0, {{0, 9}, {1, 11}}), std::set<int16_t>{0});
  // The same producer and epoch again: the coordinator's batches all have sequence 0, and this one is written
  // (not taken for a duplicate), as the replays below show.
  EXPECT_EQ(txn_commit(2, producer, 0, {{0, 10}}), std::set<int16_t>{0});
  std::map<int32_t, int64_t> none{{0, -1}, {1, -1}, {2, -1}, {3, -1}, {4, -1}, {5, -1}};
  EXPECT_EQ(committed(2).second, none);
  EXPECT_EQ(stable_errors(3),
            (std::map<int32_t, int16_t>{{0, unstable_offset_commit}, {1, unstable_offset_commit}}));

  // The coordinator moves away and back: the transaction is still open after the replay.
  move_offsets_partition(2, 4);
  move_offsets_partition(self, 5);
  EXPECT_EQ(committed_after_load(3), none);
  EXPECT_EQ(stable_errors(1),
            (std::map<int32_t, int16_t>{{0, unstable_offset_commit}, {1, unstable_offset_commit}}));

  EXPECT_EQ(end_transaction(producer, 0, true), error_code::none);
  auto expected = none;
  expected[0] = 10;
  expected[1] = 11;
  EXPECT_EQ(committed(2).second, expected);
  EXPECT_EQ(stable_errors(2), (std::map<int32_t, int16_t>{{0, 0}, {1, 0}}));

  // Another producer's transaction aborts; a zombie epoch of it is fenced by the partition.
  EXPECT_EQ(txn_commit(1, other_producer, 3, {{0, 50}}), std::set<int16_t>{0});
  EXPECT_EQ(txn_commit(1, other_producer, 2, {{0, 60}}), std::set<int16_t>{invalid_producer_epoch});
  EXPECT_EQ(end_transaction(other_producer, 3, false), error_code::none);
  EXPECT_EQ(committed(3).second, expected);

  // Both markers are replayed from the log.
  move_offsets_partition(2, 6);
  move_offsets_partition(self, 7);
  EXPECT_EQ(committed_after_load(1), expected);
  EXPECT_EQ(stable_errors(2), (std::map<int32_t, int16_t>{{0, 0}, {1, 0}}));
}

INSTANTIATE_TEST_SUITE_P(shards, group_traffic_test, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "_shards"; });

}  // namespace
}  // namespace mala::broker
