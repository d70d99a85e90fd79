// KIP-630 snapshots: memory_raft_log's snapshot methods (log start, epochs falling back to the snapshot at
// the log start), and the replica's rules: create_snapshot only of the committed prefix, the leader answering
// a Fetch below its log start with its snapshot id and serving FetchSnapshot chunks (SNAPSHOT_NOT_FOUND,
// POSITION_OUT_OF_RANGE, epoch fencing), the follower downloading chunk by chunk, installing, reporting
// snapshot_installed and fetching on from the snapshot's end. Replicas are driven by hand: a single voter
// (leader at once) and an observer.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <limits>
#include <vector>

#include "mala/raft/log.h"
#include "mala/raft/replica.h"
#include "replica_test_helpers.h"

namespace mala::raft {
namespace {

using test::config_for;
using test::fill;
using test::sent;

const std::vector<uint8_t> payload{'s', 'n', 'a', 'p', 's', 'h', 'o', 't', '!', '!'};

// --- memory_raft_log ---

TEST(memory_raft_log_snapshots, write_delete_and_the_log_start) {
  memory_raft_log log;
  fill(log, {1, 1, 2, 2, 3});
  EXPECT_FALSE(log.latest_snapshot());
  EXPECT_FALSE(log.write_snapshot({3, 1}, payload));  // entry 2 is of epoch 2
  EXPECT_FALSE(log.write_snapshot({6, 3}, payload));  // beyond the log end
  ASSERT_TRUE(log.write_snapshot({3, 2}, payload));
  EXPECT_EQ(log.latest_snapshot(), (offset_and_epoch{3, 2}));
  EXPECT_EQ(log.read_snapshot({3, 2}), payload);
  EXPECT_FALSE(log.read_snapshot({3, 1}));
  EXPECT_EQ(log.start_offset(), 0);  // writing deletes nothing

  log.delete_before(3);
  EXPECT_EQ(log.start_offset(), 3);
  EXPECT_EQ(log.end_offset(), 5);
  EXPECT_EQ(log.start_epoch(), 2);
  EXPECT_TRUE(log.read(2, 10).empty());
  ASSERT_EQ(log.read(3, 10).size(), 2u);
  EXPECT_EQ(log.read(3, 10)[0].offset, 3);
  // Epoch 2 continues past the log start; epoch 1 is only in the snapshot.
  EXPECT_EQ(log.end_offset_for_epoch(2), (offset_and_epoch{4, 2}));
  EXPECT_EQ(log.end_offset_for_epoch(1), (offset_and_epoch{3, 2}));  // falls back to the snapshot id
  EXPECT_EQ(log.end_offset_for_epoch(3), (offset_and_epoch{5, 3}));
  log.truncate_to(3);
  EXPECT_EQ(log.end_offset(), 3);
  EXPECT_EQ(log.last_fetched_epoch(), 2);  // the snapshot's epoch when no entry is left
  const log_entry next{3, 4, entry_type::data, {}};
  log.append(std::span<const log_entry>(&next, 1));
  EXPECT_EQ(log.end_offset_for_epoch(3), (offset_and_epoch{3, 2}));
}

TEST(memory_raft_log_snapshots, install_replaces_the_log) {
  memory_raft_log log;
  fill(log, {1, 1, 1});
  ASSERT_TRUE(log.install_snapshot({10, 4}, payload));
  EXPECT_EQ(log.start_offset(), 10);
  EXPECT_EQ(log.end_offset(), 10);
  EXPECT_EQ(log.last_fetched_epoch(), 4);
  EXPECT_EQ(log.latest_snapshot(), (offset_and_epoch{10, 4}));
  EXPECT_EQ(log.read_snapshot({10, 4}), payload);
  EXPECT_EQ(log.end_offset_for_epoch(4), (offset_and_epoch{10, 4}));
  EXPECT_EQ(log.end_offset_for_epoch(9), (offset_and_epoch{10, 4}));
  const log_entry next{10, 5, entry_type::data, {}};
  log.append(std::span<const log_entry>(&next, 1));
  EXPECT_EQ(log.end_offset(), 11);
  EXPECT_EQ(log.end_offset_for_epoch(5), (offset_and_epoch{11, 5}));
}

// --- replica ---

// A single voter leads epoch 1 at once and commits what it appends.
struct single_leader {
  memory_raft_log log;
  replica raft{config_for(1, {1}, 7), log, std::nullopt, 0};

  single_leader() {
    EXPECT_EQ(raft.current_role(), role::leader);
    std::vector<std::vector<uint8_t>> records(5, std::vector<uint8_t>{1});
    EXPECT_TRUE(raft.append(records).ok());  // offsets 1-5 after the leader_change entry at 0
    raft.on_log_flushed(log.end_offset());
    raft.take_effects();
  }
};

TEST(raft_snapshots, create_snapshot_only_of_the_committed_prefix) {
  single_leader l;
  ASSERT_EQ(l.raft.high_watermark(), 6);
  EXPECT_FALSE(l.raft.create_snapshot({0, 0}, payload));  // holds nothing
  EXPECT_FALSE(l.raft.create_snapshot({7, 1}, payload));  // above the high watermark
  EXPECT_FALSE(l.raft.create_snapshot({4, 0}, payload));  // wrong epoch
  EXPECT_TRUE(l.raft.create_snapshot({4, 1}, payload));
  EXPECT_TRUE(l.raft.create_snapshot({4, 1}, payload));  // held already
  EXPECT_EQ(l.log.latest_snapshot(), (offset_and_epoch{4, 1}));
  EXPECT_EQ(l.log.start_offset(), 0);
  l.raft.delete_before_snapshot();
  EXPECT_EQ(l.log.start_offset(), 4);
  EXPECT_FALSE(l.raft.create_snapshot({3, 1}, payload));  // before the entries held
  EXPECT_TRUE(l.raft.create_snapshot({6, 1}, payload));
}

// KIP-1166 (Fetch v18): a caught-up fetch is parked until entries arrive or the high watermark moves, unless
// the replica says its high watermark is behind the leader's (KafkaRaftClient's isHighWatermarkUpdated).
TEST(raft_replication, a_fetch_from_a_replica_behind_the_high_watermark_is_answered_at_once) {
  single_leader l;
  ASSERT_EQ(l.raft.high_watermark(), 6);
  auto answers = [&](int64_t replica_high_watermark) {
    fetch_request request{2, 1, 6, 1, 500};
    request.high_watermark = replica_high_watermark;
    l.raft.on_message(2, raft_message{9, request});
    return sent<fetch_response>(l.raft.take_effects()).size();
  };
  const int64_t not_sent = std::numeric_limits<int64_t>::max();  // Fetch v17 and older
  EXPECT_EQ(answers(not_sent), 1u);  // the first fetch: the replica has not been sent the high watermark
  EXPECT_EQ(answers(not_sent), 0u);  // parked
  EXPECT_EQ(answers(6), 0u);         // parked: the replica has the leader's high watermark
  EXPECT_EQ(answers(5), 1u);         // answered: the replica says its high watermark is behind
  EXPECT_EQ(answers(-1), 1u);        // not known yet
}

TEST(raft_snapshots, the_leader_answers_a_fetch_below_its_log_start_with_its_snapshot) {
  single_leader l;
  ASSERT_TRUE(l.raft.create_snapshot({4, 1}, payload));
  l.raft.delete_before_snapshot();

  auto fetch = [&](int64_t offset, int32_t last_epoch) {
    l.raft.on_message(2, raft_message{9, fetch_request{2, 1, offset, last_epoch, 0}});
    const auto responses = sent<fetch_response>(l.raft.take_effects());
    EXPECT_EQ(responses.size(), 1u);
    return responses.at(0).second;
  };
  const fetch_response below = fetch(0, 0);
  EXPECT_EQ(below.error_code, error_code::none);
  EXPECT_EQ(below.snapshot_id, (offset_and_epoch{4, 1}));
  EXPECT_TRUE(below.records.empty());
  EXPECT_EQ(below.high_watermark, 6);
  EXPECT_EQ(fetch(3, 1).snapshot_id, (offset_and_epoch{4, 1}));
  // At the log start with another epoch: its log diverges inside the snapshot (Kafka's rule).
  EXPECT_EQ(fetch(4, 0).snapshot_id, (offset_and_epoch{4, 1}));
  const fetch_response at_start = fetch(4, 1);
  EXPECT_FALSE(at_start.snapshot_id);
  ASSERT_EQ(at_start.records.size(), 2u);
  EXPECT_EQ(at_start.records[0].offset, 4);
  // The progress of a replica answered with a snapshot does not move.
  for (const replica_progress& p : l.raft.progress()) {
    if (p.replica_id == 2) {
      EXPECT_EQ(p.log_end_offset, 4);
    }
  }
}

TEST(raft_snapshots, the_leader_serves_fetch_snapshot_chunks) {
  single_leader l;
  ASSERT_TRUE(l.raft.create_snapshot({4, 1}, payload));
  auto ask = [&](fetch_snapshot_request request) {
    l.raft.on_message(2, raft_message{9, request});
    const auto responses = sent<fetch_snapshot_response>(l.raft.take_effects());
    EXPECT_EQ(responses.size(), 1u);
    return responses.at(0).second;
  };
  const fetch_snapshot_response first = ask({2, 1, {4, 1}, 0, 4});
  EXPECT_EQ(first.error_code, error_code::none);
  EXPECT_EQ(first.snapshot_id, (offset_and_epoch{4, 1}));
  EXPECT_EQ(first.size, 10);
  EXPECT_EQ(first.position, 0);
  EXPECT_EQ(first.bytes, std::vector<uint8_t>(payload.begin(), payload.begin() + 4));
  EXPECT_EQ(first.current_leader.leader_id, 1);
  EXPECT_EQ(first.current_leader.leader_epoch, 1);
  const fetch_snapshot_response last = ask({2, 1, {4, 1}, 8, 4});
  EXPECT_EQ(last.position, 8);
  EXPECT_EQ(last.bytes, std::vector<uint8_t>(payload.begin() + 8, payload.end()));

  EXPECT_EQ(ask({2, 1, {4, 1}, 10, 4}).error_code, error_code::position_out_of_range);
  EXPECT_EQ(ask({2, 1, {4, 1}, -1, 4}).error_code, error_code::position_out_of_range);
  EXPECT_EQ(ask({2, 1, {5, 1}, 0, 4}).error_code, error_code::snapshot_not_found);
  EXPECT_EQ(ask({2, 0, {4, 1}, 0, 4}).error_code, error_code::fenced_leader_epoch);
  EXPECT_EQ(ask({2, 2, {4, 1}, 0, 4}).error_code, error_code::unknown_leader_epoch);
}

TEST(raft_snapshots, a_non_leader_refuses_fetch_snapshot) {
  memory_raft_log log;
  replica r(config_for(1, {1, 2, 3}, 7), log, quorum_state{3, 2, no_voter}, 0);
  r.take_effects();
  r.on_message(2, raft_message{9, fetch_snapshot_request{2, 3, {4, 1}, 0, 4}});
  const auto responses = sent<fetch_snapshot_response>(r.take_effects());
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_EQ(responses[0].second.error_code, error_code::not_leader_or_follower);
  EXPECT_EQ(responses[0].second.current_leader.leader_id, 2);
}

// An observer whose log is behind the leader's log start downloads the snapshot in chunks of
// fetch_snapshot_max_bytes, installs it, and replicates on from its end.
TEST(raft_snapshots, a_follower_fetches_the_snapshot_in_chunks_and_installs_it) {
  single_leader l;
  ASSERT_TRUE(l.raft.create_snapshot({4, 1}, payload));
  l.raft.delete_before_snapshot();

  memory_raft_log follower_log;
  fill(follower_log, {1});  // offset 0 only: behind the leader's log start (4)
  raft_config config = config_for(2, {1}, 7);
  config.fetch_snapshot_max_bytes = 3;
  replica follower(config, follower_log, std::nullopt, 0);

  std::deque<outbound_message> to_leader;
  std::vector<fetch_snapshot_request> chunk_requests;
  std::optional<offset_and_epoch> installed;
  bool installed_before_records = false;
  auto collect_follower = [&] {
    effects e = follower.take_effects();
    if (e.snapshot_installed) {
      EXPECT_FALSE(installed);
      installed = e.snapshot_installed;
      installed_before_records = follower_log.end_offset() == 4;
    }
    for (auto& m : e.messages) {
      EXPECT_EQ(m.destination, 1);
      if (const auto* r = std::get_if<fetch_snapshot_request>(&m.message.body)) chunk_requests.push_back(*r);
      to_leader.push_back(std::move(m));
    }
  };
  collect_follower();
  for (int i = 0; i < 100 && !to_leader.empty(); ++i) {
    const outbound_message request = to_leader.front();
    to_leader.pop_front();
    l.raft.on_message(2, request.message);
    for (auto& m : l.raft.take_effects().messages) {
      if (m.destination == 2) follower.on_message(1, m.message);
      collect_follower();
    }
    if (follower_log.end_offset() == l.log.end_offset() && follower.high_watermark() == 6) break;
  }

  ASSERT_EQ(installed, (offset_and_epoch{4, 1}));
  EXPECT_TRUE(installed_before_records);
  EXPECT_EQ(follower_log.read_snapshot({4, 1}), payload);
  EXPECT_EQ(follower_log.start_offset(), 4);
  EXPECT_EQ(follower_log.end_offset(), 6);
  EXPECT_EQ(follower_log.entries(), l.log.entries());
  EXPECT_EQ(follower.high_watermark(), 6);
  EXPECT_EQ(follower.current_role(), role::follower);
  // 10 bytes in chunks of at most 3: positions 0, 3, 6, 9.
  ASSERT_EQ(chunk_requests.size(), 4u);
  for (size_t i = 0; i < chunk_requests.size(); ++i) {
    EXPECT_EQ(chunk_requests[i].position, static_cast<int64_t>(3 * i));
    EXPECT_EQ(chunk_requests[i].max_bytes, 3);
    EXPECT_EQ(chunk_requests[i].snapshot_id, (offset_and_epoch{4, 1}));
    EXPECT_EQ(chunk_requests[i].current_leader_epoch, 1);
  }
}

// Snapshot 8-1 ({1, 2, 3}) in one chunk from leader 1 in epoch 1.
fetch_snapshot_response whole_snapshot_8_1() {
  fetch_snapshot_response whole;
  whole.snapshot_id = {8, 1};
  whole.size = 3;
  whole.position = 0;
  whole.bytes = {1, 2, 3};
  whole.current_leader = {1, 1};
  return whole;
}

// What a follower shows once snapshot 8-1 ({1, 2, 3}) is installed: the effects of that step (the install,
// the high watermark at its end, a Fetch from there) and its log starting at the snapshot.
void expect_installed_8_1(const effects& e, const memory_raft_log& log) {
  EXPECT_EQ(e.snapshot_installed, (offset_and_epoch{8, 1}));
  EXPECT_EQ(e.high_watermark, 8);
  EXPECT_EQ(log.start_offset(), 8);
  EXPECT_EQ(log.read_snapshot({8, 1}), (std::vector<uint8_t>{1, 2, 3}));
  ASSERT_EQ(e.messages.size(), 1u);
  const auto* next = std::get_if<fetch_request>(&e.messages[0].message.body);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->fetch_offset, 8);
  EXPECT_EQ(next->last_fetched_epoch, 1);
}

// A chunk that does not continue the download makes the follower start over with a Fetch; a completed
// download installs the snapshot, moves the high watermark to its end (above what the leader's last Fetch
// answer said) and fetching goes on from there.
TEST(raft_snapshots, a_chunk_at_the_wrong_position_restarts_with_a_fetch) {
  raft_config config = config_for(2, {1, 2, 3}, 7);
  memory_raft_log log2;
  replica f2(config, log2, quorum_state{1, 1, no_voter}, 0);
  effects e = f2.take_effects();
  ASSERT_EQ(e.messages.size(), 1u);
  const int64_t correlation = e.messages[0].message.correlation_id;
  fetch_response with_snapshot;
  with_snapshot.current_leader = {1, 1};
  with_snapshot.high_watermark = 2;
  with_snapshot.snapshot_id = offset_and_epoch{8, 1};
  f2.on_message(1, raft_message{correlation, with_snapshot});
  e = f2.take_effects();
  ASSERT_EQ(e.messages.size(), 1u);
  const auto* chunk_request = std::get_if<fetch_snapshot_request>(&e.messages[0].message.body);
  ASSERT_TRUE(chunk_request);
  EXPECT_EQ(chunk_request->snapshot_id, (offset_and_epoch{8, 1}));
  EXPECT_EQ(chunk_request->position, 0);
  EXPECT_EQ(chunk_request->max_bytes, 1024 * 1024);  // the default chunk

  fetch_snapshot_response wrong;
  wrong.snapshot_id = {8, 1};
  wrong.size = 10;
  wrong.position = 3;  // not where the download stands
  wrong.bytes = {1, 2, 3};
  wrong.current_leader = {1, 1};
  f2.on_message(1, raft_message{e.messages[0].message.correlation_id, wrong});
  e = f2.take_effects();
  EXPECT_FALSE(e.snapshot_installed);
  EXPECT_TRUE(e.messages.empty());  // backing off
  f2.tick(1000);
  e = f2.take_effects();
  ASSERT_EQ(e.messages.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<fetch_request>(e.messages[0].message.body));

  // A whole snapshot in one chunk installs it; the high watermark becomes its end.
  with_snapshot.high_watermark = 2;
  f2.on_message(1, raft_message{e.messages[0].message.correlation_id, with_snapshot});
  e = f2.take_effects();
  ASSERT_EQ(e.messages.size(), 1u);
  const fetch_snapshot_response whole = whole_snapshot_8_1();
  f2.on_message(1, raft_message{e.messages[0].message.correlation_id, whole});
  expect_installed_8_1(f2.take_effects(), log2);
}

// With glue_stores_snapshots the downloaded snapshot goes to the glue (effects::snapshot_to_store) and the
// follower sends nothing and installs nothing until snapshot_stored(): installed then, fetching on from its
// end; a store that failed starts over with a Fetch; an answer for a download the follower left is refused.
TEST(raft_snapshots, the_glue_stores_a_downloaded_snapshot_before_the_follower_installs_it) {
  raft_config config = config_for(2, {1, 2, 3}, 7);
  config.glue_stores_snapshots = true;
  memory_raft_log log2;
  replica f2(config, log2, quorum_state{1, 1, no_voter}, 0);
  effects e = f2.take_effects();
  ASSERT_EQ(e.messages.size(), 1u);
  fetch_response with_snapshot;
  with_snapshot.current_leader = {1, 1};
  with_snapshot.high_watermark = 2;
  with_snapshot.snapshot_id = offset_and_epoch{8, 1};
  const fetch_snapshot_response whole = whole_snapshot_8_1();
  // A Fetch answered with the snapshot id, then the snapshot in one chunk: handed to the glue.
  auto download = [&](int64_t fetch_correlation) {
    f2.on_message(1, raft_message{fetch_correlation, with_snapshot});
    effects asked = f2.take_effects();
    EXPECT_EQ(asked.messages.size(), 1u);
    if (asked.messages.empty()) return effects{};
    f2.on_message(1, raft_message{asked.messages[0].message.correlation_id, whole});
    return f2.take_effects();
  };

  e = download(e.messages[0].message.correlation_id);
  ASSERT_TRUE(e.snapshot_to_store);
  EXPECT_EQ(e.snapshot_to_store->id, (offset_and_epoch{8, 1}));
  EXPECT_EQ(e.snapshot_to_store->payload, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_FALSE(e.snapshot_installed);
  EXPECT_TRUE(e.messages.empty());
  EXPECT_EQ(log2.start_offset(), 0);  // the log is untouched meanwhile
  // Nothing is fetched while the glue stores it, and no tick is due before the fetch timeout.
  f2.tick(500);
  EXPECT_TRUE(f2.take_effects().messages.empty());
  EXPECT_GE(f2.next_deadline_ms(), 2000);

  // The store failed: the download starts over with a Fetch.
  EXPECT_FALSE(f2.snapshot_stored({8, 1}, false));
  e = f2.take_effects();
  EXPECT_FALSE(e.snapshot_installed);
  if (e.messages.empty()) {
    f2.tick(1000);
    e = f2.take_effects();
  }
  ASSERT_EQ(e.messages.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<fetch_request>(e.messages[0].message.body));

  // Stored: installed, the high watermark at its end, fetching on from there.
  e = download(e.messages[0].message.correlation_id);
  ASSERT_TRUE(e.snapshot_to_store);
  log2.store_snapshot(e.snapshot_to_store->id, e.snapshot_to_store->payload);
  EXPECT_FALSE(f2.snapshot_stored({9, 1}, true));  // not the one it waits for
  EXPECT_TRUE(f2.snapshot_stored({8, 1}, true));
  expect_installed_8_1(f2.take_effects(), log2);
  EXPECT_FALSE(f2.snapshot_stored({8, 1}, true));  // nothing waits for it any more
}

}  // namespace
}  // namespace mala::raft
