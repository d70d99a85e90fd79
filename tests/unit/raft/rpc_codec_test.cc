// The Raft messages as Kafka RPCs: every request through encode -> bytes -> generated decode ->
// from_protocol, every response through to_protocol -> generated encode -> decode_raft_response; Fetch
// records with data and leader_change entries in the on-disk framing; top-level errors (cluster id,
// topic/partition); truncated and corrupt bodies and records refused; FetchSnapshot (KIP-630) both ways and
// Fetch's SnapshotId.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "mala/protocol/messages/leader_change_message.h"
#include "mala/protocol/record_batch.h"
#include "mala/protocol/wire.h"
#include "mala/raft/rpc_codec.h"
#include "mala/raft/voter_set.h"

namespace mala::raft {
namespace {

const std::string cluster = "MkU3OEVBNTcwNTJENDM2Qg";

template <typename Message>
Message decode_as(const std::vector<uint8_t>& body, int16_t version) {
  Message m;
  protocol::wire_reader r(body);
  EXPECT_EQ(m.decode(r, version), protocol::decode_status::ok);
  EXPECT_EQ(r.remaining(), 0u);
  return m;
}

template <typename Message>
std::vector<uint8_t> encode(const Message& m, int16_t version) {
  std::vector<uint8_t> out;
  protocol::wire_writer w(out);
  m.encode(w, version);
  return out;
}

// encode_raft_request, then the server's view of the bytes.
template <typename ProtocolRequest>
raft_message_body server_side(const raft_message_body& body, int16_t expect_key, int16_t expect_version) {
  auto enc = encode_raft_request(raft_message{7, body}, 1, cluster);
  EXPECT_TRUE(enc.ok()) << (enc.ok() ? "" : enc.error().message);
  EXPECT_EQ(enc->api_key, expect_key);
  EXPECT_EQ(enc->api_version, expect_version);
  EXPECT_EQ(enc->request_header_version, 2);
  EXPECT_EQ(enc->response_header_version, 1);
  auto decoded = decode_as<ProtocolRequest>(enc->body, enc->api_version);
  EXPECT_EQ(decoded.cluster_id, cluster);
  if constexpr (requires { decoded.replica_state; }) {
    auto m = from_protocol(decoded, enc->api_version, cluster);
    EXPECT_TRUE(m.ok());
    return *m;
  } else {
    auto m = from_protocol(decoded, cluster);
    EXPECT_TRUE(m.ok());
    return *m;
  }
}

TEST(rpc_codec, metadata_topic_id_is_kafkas) {
  EXPECT_EQ(metadata_topic_id().to_string(), "AAAAAAAAAAAAAAAAAAAAAQ");
}

TEST(rpc_codec, vote_request_round_trip) {
  vote_request v{5, 2, 3, 4, 120, false};
  auto back = server_side<protocol::vote_request>(v, 52, vote_api_version);
  ASSERT_TRUE(std::holds_alternative<vote_request>(back));
  const auto& got = std::get<vote_request>(back);
  EXPECT_EQ(got.candidate_epoch, 5);
  EXPECT_EQ(got.candidate_id, 2);
  EXPECT_EQ(got.voter_id, 3);
  EXPECT_EQ(got.last_offset_epoch, 4);
  EXPECT_EQ(got.last_offset, 120);
  EXPECT_FALSE(got.pre_vote);
}

TEST(rpc_codec, pre_vote_needs_vote_v2) {
  vote_request v{5, 2, 3, 4, 120, true};
  auto enc = encode_raft_request(raft_message{1, v}, 2, cluster);
  if (vote_api_version >= 2) {
    ASSERT_TRUE(enc.ok());
    auto back = from_protocol(decode_as<protocol::vote_request>(enc->body, enc->api_version), cluster);
    ASSERT_TRUE(back.ok());
    EXPECT_TRUE(std::get<vote_request>(*back).pre_vote);
  } else {
    ASSERT_FALSE(enc.ok());
    EXPECT_EQ(enc.error().code, error_code::unsupported_version);
  }
}

TEST(rpc_codec, begin_quorum_epoch_request_round_trip) {
  auto back = server_side<protocol::begin_quorum_epoch_request>(begin_quorum_epoch_request{3, 1, 9}, 53, 1);
  const auto& got = std::get<begin_quorum_epoch_request>(back);
  EXPECT_EQ(got.voter_id, 3);
  EXPECT_EQ(got.leader_id, 1);
  EXPECT_EQ(got.leader_epoch, 9);
}

TEST(rpc_codec, begin_quorum_epoch_carries_leader_endpoints) {
  const raft_endpoint ep{"CONTROLLER", "node1.example", 9093};
  auto enc = encode_raft_request(raft_message{1, begin_quorum_epoch_request{3, 1, 9}}, 1, cluster, {&ep, 1});
  ASSERT_TRUE(enc.ok());
  auto p = decode_as<protocol::begin_quorum_epoch_request>(enc->body, 1);
  ASSERT_EQ(p.leader_endpoints.size(), 1u);
  EXPECT_EQ(p.leader_endpoints[0].name, "CONTROLLER");
  EXPECT_EQ(p.leader_endpoints[0].host, "node1.example");
  EXPECT_EQ(p.leader_endpoints[0].port, 9093);
  EXPECT_TRUE(p.topics[0].partitions[0].voter_directory_id.is_zero());
}

TEST(rpc_codec, end_quorum_epoch_request_round_trip) {
  auto back = server_side<protocol::end_quorum_epoch_request>(end_quorum_epoch_request{1, 9, {3, 2}}, 54, 1);
  const auto& got = std::get<end_quorum_epoch_request>(back);
  EXPECT_EQ(got.leader_id, 1);
  EXPECT_EQ(got.leader_epoch, 9);
  EXPECT_EQ(got.preferred_successors, (std::vector<int32_t>{3, 2}));
}

TEST(rpc_codec, fetch_request_round_trip) {
  fetch_request request{2, 9, 1000, 8, 500};
  request.high_watermark = 990;
  auto enc = encode_raft_request(raft_message{1, request}, 2, cluster);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->api_key, 1);
  EXPECT_EQ(enc->api_version, 18);
  auto p = decode_as<protocol::fetch_request>(enc->body, 18);
  EXPECT_EQ(p.replica_state.replica_id, 2);
  EXPECT_EQ(p.max_bytes, raft_fetch_max_bytes);
  ASSERT_EQ(p.topics.size(), 1u);
  EXPECT_EQ(p.topics[0].topic_id, metadata_topic_id());
  auto back = from_protocol(p, 18, cluster);
  ASSERT_TRUE(back.ok());
  const auto& got = std::get<fetch_request>(*back);
  EXPECT_EQ(got.replica_id, 2);
  EXPECT_EQ(got.current_leader_epoch, 9);
  EXPECT_EQ(got.fetch_offset, 1000);
  EXPECT_EQ(got.last_fetched_epoch, 8);
  EXPECT_EQ(got.max_wait_ms, 500);
  EXPECT_EQ(got.high_watermark, 990);  // v18 (KIP-1166)
  // A v17 fetch (Kafka before 4.1) carries no high watermark: never treated as behind.
  auto v17 = from_protocol(p, 17, cluster);
  ASSERT_TRUE(v17.ok());
  EXPECT_EQ(std::get<fetch_request>(*v17).high_watermark, std::numeric_limits<int64_t>::max());
}

TEST(rpc_codec, responses_are_not_requests) {
  auto enc = encode_raft_request(raft_message{1, vote_response{}}, 1, cluster);
  ASSERT_FALSE(enc.ok());
  EXPECT_EQ(enc.error().code, error_code::invalid_request);
}

TEST(rpc_codec, vote_response_round_trip) {
  for (bool pre_vote : {false, true}) {
    vote_response v{error_code::fenced_leader_epoch, 3, 7, true, pre_vote};
    auto bytes = encode(to_protocol(v), vote_api_version);
    auto back = decode_raft_response(52, vote_api_version, bytes, pre_vote);
    ASSERT_TRUE(back.ok()) << back.error().message;
    const auto& got = std::get<vote_response>(*back);
    EXPECT_EQ(got.error_code, error_code::fenced_leader_epoch);
    EXPECT_EQ(got.leader_id, 3);
    EXPECT_EQ(got.leader_epoch, 7);
    EXPECT_TRUE(got.vote_granted);
    EXPECT_EQ(got.pre_vote, pre_vote);
  }
}

TEST(rpc_codec, begin_and_end_quorum_epoch_responses_round_trip) {
  auto b = decode_raft_response(
      53, 1, encode(to_protocol(begin_quorum_epoch_response{error_code::none, 2, 4}), 1), false);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(std::get<begin_quorum_epoch_response>(*b).leader_id, 2);
  EXPECT_EQ(std::get<begin_quorum_epoch_response>(*b).leader_epoch, 4);
  auto e = decode_raft_response(
      54, 1, encode(to_protocol(end_quorum_epoch_response{error_code::not_leader_or_follower, -1, 6}), 1),
      false);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(std::get<end_quorum_epoch_response>(*e).error_code, error_code::not_leader_or_follower);
  EXPECT_EQ(std::get<end_quorum_epoch_response>(*e).leader_id, -1);
  EXPECT_EQ(std::get<end_quorum_epoch_response>(*e).leader_epoch, 6);
}

fetch_response sample_fetch_response() {
  fetch_response f;
  f.error_code = error_code::none;
  f.high_watermark = 12;
  f.diverging_epoch = {-1, -1};
  f.current_leader = {1, 3};
  f.records.push_back(log_entry{10, 2, entry_type::data, {1, 2, 3}});
  f.records.push_back(log_entry{11, 3, entry_type::leader_change, {}});
  f.records.push_back(log_entry{12, 3, entry_type::data, std::vector<uint8_t>(1000, 0x5a)});
  f.records.push_back(log_entry{13, 3, entry_type::data, {}});
  return f;
}

TEST(rpc_codec, fetch_response_round_trip_with_records) {
  const fetch_response f = sample_fetch_response();
  auto p = to_protocol(f, 1'700'000'000'000);
  ASSERT_TRUE(p.ok()) << p.error().message;
  auto bytes = encode(p->message, 17);
  auto back = decode_raft_response(1, 17, bytes, false);
  ASSERT_TRUE(back.ok()) << back.error().message;
  const auto& got = std::get<fetch_response>(*back);
  EXPECT_EQ(got.error_code, error_code::none);
  EXPECT_EQ(got.high_watermark, 12);
  EXPECT_EQ(got.diverging_epoch.epoch, -1);
  EXPECT_EQ(got.current_leader.leader_id, 1);
  EXPECT_EQ(got.current_leader.leader_epoch, 3);
  ASSERT_EQ(got.records.size(), 4u);
  EXPECT_EQ(got.records[0], f.records[0]);
  EXPECT_EQ(got.records[2], f.records[2]);
  EXPECT_EQ(got.records[3], f.records[3]);
  // The empty leader_change payload went out as an encoded LeaderChangeMessage naming the current leader.
  EXPECT_EQ(got.records[1].offset, 11);
  EXPECT_EQ(got.records[1].epoch, 3);
  EXPECT_EQ(got.records[1].type, entry_type::leader_change);
  protocol::leader_change_message lcm;
  protocol::wire_reader r(got.records[1].payload);
  ASSERT_EQ(lcm.decode(r, 0), protocol::decode_status::ok);
  EXPECT_EQ(lcm.leader_id, 1);
}

TEST(rpc_codec, fetch_records_use_the_on_disk_framing) {
  auto batches = entries_to_batches(sample_fetch_response().records, 5, {1, 3});
  ASSERT_TRUE(batches.ok());
  protocol::batch_splitter splitter(*batches);
  int n = 0;
  while (auto span = splitter.next()) {
    protocol::record_batch_view batch(*span);
    ASSERT_TRUE(batch.ok());
    EXPECT_EQ(batch.record_count(), 1);
    EXPECT_EQ(batch.base_offset(), 10 + n);
    EXPECT_EQ(batch.header().partition_leader_epoch, n == 0 ? 2 : 3);
    EXPECT_EQ(batch.is_control(), n == 1);
    for (const auto& rec : batch.records()) {
      if (n == 1) {
        ASSERT_TRUE(rec.key.has_value());
        EXPECT_EQ(std::vector<uint8_t>(rec.key->begin(), rec.key->end()), (std::vector<uint8_t>{0, 0, 0, 2}));
      } else {
        EXPECT_FALSE(rec.key.has_value()) << "metadata records have a null key";
      }
    }
    ++n;
  }
  EXPECT_TRUE(splitter.ok());
  EXPECT_EQ(n, 4);
}

TEST(rpc_codec, a_batch_of_several_records_reads_as_entries) {
  protocol::record_batch_builder b;
  b.base_offset(20).partition_leader_epoch(4);
  const std::vector<uint8_t> v1{1}, v2{2};
  b.add(0, std::nullopt, std::span<const uint8_t>(v1));
  b.add(0, std::nullopt, std::span<const uint8_t>(v2));
  auto entries = entries_from_batches(b.build());
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 2u);
  // One batch is one write: only its last record ends it.
  EXPECT_EQ((*entries)[0], (log_entry{20, 4, entry_type::data, v1, /*batch_end=*/false}));
  EXPECT_EQ((*entries)[1], (log_entry{21, 4, entry_type::data, v2, /*batch_end=*/true}));
  // Records before the fetch offset are dropped.
  auto from21 = entries_from_batches(b.build(), 21);
  ASSERT_TRUE(from21.ok());
  ASSERT_EQ(from21->size(), 1u);
  EXPECT_EQ((*from21)[0].offset, 21);
}

TEST(rpc_codec, a_write_of_several_entries_is_one_batch_on_the_wire) {
  const std::vector<log_entry> entries{{30, 5, entry_type::data, {1}, /*batch_end=*/false},
                                       {31, 5, entry_type::data, {2}, false},
                                       {32, 5, entry_type::data, {3}, true},
                                       {33, 5, entry_type::data, {4}, true},
                                       {34, 6, entry_type::leader_change, {}, true},
                                       {35, 6, entry_type::data, {5}, false},
                                       {36, 6, entry_type::data, {6}, true}};
  auto batches = entries_to_batches(entries, 5, {1, 6});
  ASSERT_TRUE(batches.ok());
  protocol::batch_splitter splitter(*batches);
  std::vector<std::pair<int64_t, int64_t>> ranges;  // base offset, next offset of each batch
  while (auto span = splitter.next()) {
    protocol::record_batch_view batch(*span);
    ASSERT_TRUE(batch.ok());
    ranges.emplace_back(batch.base_offset(), batch.header().next_offset());
  }
  EXPECT_EQ(ranges, (std::vector<std::pair<int64_t, int64_t>>{{30, 33}, {33, 34}, {34, 35}, {35, 37}}));
  auto back = entries_from_batches(*batches);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ((*back)[i].offset, entries[i].offset);
    EXPECT_EQ((*back)[i].batch_end, entries[i].batch_end) << "offset " << entries[i].offset;
    if (entries[i].type == entry_type::data) {
      EXPECT_EQ((*back)[i].payload, entries[i].payload);
    }
  }
}

TEST(rpc_codec, corrupt_records_are_refused) {
  auto batches = entries_to_batches(sample_fetch_response().records, 5, {1, 3});
  ASSERT_TRUE(batches.ok());
  // A flipped byte in a record: the CRC no longer matches.
  auto flipped = *batches;
  flipped[protocol::batch_layout::records + 3] ^= 0xff;
  auto r1 = entries_from_batches(flipped);
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.error().code, error_code::corrupt_message);
  // A batch length too small for a header.
  auto short_len = *batches;
  short_len[8] = short_len[9] = short_len[10] = 0;
  short_len[11] = 3;
  EXPECT_FALSE(entries_from_batches(short_len).ok());
  // Offsets going backwards.
  std::vector<log_entry> backwards{{5, 1, entry_type::data, {1}}, {4, 1, entry_type::data, {2}}};
  auto back = entries_to_batches(backwards, 0);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(entries_from_batches(*back).ok());
  // A control record a Raft log does not hold (SNAPSHOT_HEADER).
  protocol::record_batch_builder b;
  b.control().base_offset(0).partition_leader_epoch(1);
  const std::vector<uint8_t> key{0, 0, 0, 3}, value{0};
  b.add(0, std::span<const uint8_t>(key), std::span<const uint8_t>(value));
  EXPECT_FALSE(entries_from_batches(b.build()).ok());
  // Every cut of a valid record set either reads a prefix of its entries or is refused; never more.
  for (size_t cut = 0; cut < batches->size(); ++cut) {
    auto r = entries_from_batches(std::span<const uint8_t>(batches->data(), cut));
    if (r.ok()) {
      EXPECT_LT(r->size(), 4u);
    }
  }
}

TEST(rpc_codec, truncated_response_bodies_are_refused) {
  std::vector<std::pair<int16_t, std::vector<uint8_t>>> bodies;
  bodies.emplace_back(
      52, encode(to_protocol(vote_response{error_code::none, 1, 2, true, false}), vote_api_version));
  bodies.emplace_back(53, encode(to_protocol(begin_quorum_epoch_response{error_code::none, 1, 2}), 1));
  bodies.emplace_back(54, encode(to_protocol(end_quorum_epoch_response{error_code::none, 1, 2}), 1));
  auto f = to_protocol(sample_fetch_response(), 0);
  ASSERT_TRUE(f.ok());
  bodies.emplace_back(1, encode(f->message, 17));
  for (const auto& [key, body] : bodies) {
    const int16_t version = key == 1 ? 17 : key == 52 ? vote_api_version : 1;
    ASSERT_TRUE(decode_raft_response(key, version, body, false).ok());
    for (size_t cut = 0; cut < body.size(); ++cut) {
      auto r = decode_raft_response(key, version, std::span<const uint8_t>(body.data(), cut), false);
      EXPECT_FALSE(r.ok()) << "api " << key << " cut at " << cut;
    }
    auto longer = body;
    longer.push_back(0);
    EXPECT_FALSE(decode_raft_response(key, version, longer, false).ok()) << "api " << key << " trailing byte";
  }
}

TEST(rpc_codec, top_level_errors_and_wrong_partitions) {
  // The server refuses another cluster and another topic or partition at top level.
  auto enc = encode_raft_request(raft_message{1, vote_request{5, 2, 3, 4, 120, false}}, 2, "another-cluster");
  ASSERT_TRUE(enc.ok());
  auto vote = decode_as<protocol::vote_request>(enc->body, enc->api_version);
  auto refused = from_protocol(vote, cluster);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, error_code::inconsistent_cluster_id);
  vote.cluster_id.reset();  // no cluster id: accepted, as Kafka does
  EXPECT_TRUE(from_protocol(vote, cluster).ok());
  vote.topics[0].partitions[0].partition_index = 1;
  auto wrong = from_protocol(vote, cluster);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, error_code::invalid_request);

  auto fetch_enc = encode_raft_request(raft_message{1, fetch_request{2, 9, 0, 0, 0}}, 2, cluster);
  auto fetch = decode_as<protocol::fetch_request>(fetch_enc->body, 17);
  fetch.topics[0].topic_id = uuid::random();
  auto wrong_topic = from_protocol(fetch, 17, cluster);
  ASSERT_FALSE(wrong_topic.ok());
  EXPECT_EQ(wrong_topic.error().code, error_code::invalid_request);

  // The client sees a top-level error as an error status.
  auto answer = top_level_error_response<protocol::vote_response>(error_code::inconsistent_cluster_id);
  auto decoded = decode_raft_response(52, vote_api_version, encode(answer, vote_api_version), false);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.error().code, error_code::inconsistent_cluster_id);
  auto fetch_answer = top_level_error_response<protocol::fetch_response>(error_code::invalid_request);
  auto fetch_decoded = decode_raft_response(1, 17, encode(fetch_answer, 17), false);
  ASSERT_FALSE(fetch_decoded.ok());
  EXPECT_EQ(fetch_decoded.error().code, error_code::invalid_request);
  // A partition answer for another partition is refused too.
  auto other = to_protocol(vote_response{});
  other.topics[0].partitions[0].partition_index = 3;
  EXPECT_FALSE(decode_raft_response(52, vote_api_version, encode(other, vote_api_version), false).ok());
}

// ---------------------------------------------------------------------------------------------------------
// Snapshots (KIP-630)

TEST(rpc_codec, fetch_snapshot_request_round_trip) {
  const auto body = server_side<protocol::fetch_snapshot_request>(
      fetch_snapshot_request{2, 9, {1234, 7}, 4096, 1024 * 1024}, 59, 1);
  const auto& got = std::get<fetch_snapshot_request>(body);
  EXPECT_EQ(got.replica_id, 2);
  EXPECT_EQ(got.current_leader_epoch, 9);
  EXPECT_EQ(got.snapshot_id, (offset_and_epoch{1234, 7}));
  EXPECT_EQ(got.position, 4096);
  EXPECT_EQ(got.max_bytes, 1024 * 1024);

  // The wire form: one topic __cluster_metadata, partition 0, MaxBytes the chunk size.
  auto enc =
      encode_raft_request(raft_message{1, fetch_snapshot_request{2, 9, {1234, 7}, 0, 100}}, 2, cluster);
  ASSERT_TRUE(enc.ok());
  auto p = decode_as<protocol::fetch_snapshot_request>(enc->body, 1);
  EXPECT_EQ(p.max_bytes, 100);
  ASSERT_EQ(p.topics.size(), 1u);
  EXPECT_EQ(p.topics[0].name, "__cluster_metadata");
  ASSERT_EQ(p.topics[0].partitions.size(), 1u);
  EXPECT_EQ(p.topics[0].partitions[0].partition, 0);
  EXPECT_EQ(p.topics[0].partitions[0].snapshot_id.end_offset, 1234);
  EXPECT_EQ(p.topics[0].partitions[0].snapshot_id.epoch, 7);
  // v0 decodes the same fields.
  auto v0 = encode(p, 0);
  auto p0 = decode_as<protocol::fetch_snapshot_request>(v0, 0);
  auto back0 = from_protocol(p0, cluster);
  ASSERT_TRUE(back0.ok());
  EXPECT_EQ(std::get<fetch_snapshot_request>(*back0).snapshot_id, (offset_and_epoch{1234, 7}));

  // Another cluster, another partition: refused at top level.
  p.cluster_id = "another-cluster";
  auto refused = from_protocol(p, cluster);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, error_code::inconsistent_cluster_id);
  p.cluster_id = cluster;
  p.topics[0].partitions[0].partition = 1;
  auto wrong = from_protocol(p, cluster);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, error_code::invalid_request);
}

TEST(rpc_codec, fetch_snapshot_response_round_trip) {
  for (int16_t version : {int16_t{0}, int16_t{1}}) {
    fetch_snapshot_response r;
    r.snapshot_id = {1234, 7};
    r.size = 10000;
    r.position = 4096;
    r.bytes = {1, 2, 3, 4, 5};
    r.current_leader = {1, 9};
    auto p = to_protocol(r);
    auto bytes = encode(p.message, version);
    auto back = decode_raft_response(59, version, bytes, false);
    ASSERT_TRUE(back.ok()) << back.error().message;
    const auto& got = std::get<fetch_snapshot_response>(*back);
    EXPECT_EQ(got.error_code, error_code::none);
    EXPECT_EQ(got.snapshot_id, (offset_and_epoch{1234, 7}));
    EXPECT_EQ(got.size, 10000);
    EXPECT_EQ(got.position, 4096);
    EXPECT_EQ(got.bytes, r.bytes);
    EXPECT_EQ(got.current_leader.leader_id, 1);
    EXPECT_EQ(got.current_leader.leader_epoch, 9);
    // Every truncation is refused.
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      EXPECT_FALSE(decode_raft_response(59, version, std::span<const uint8_t>(bytes.data(), cut), false).ok())
          << "v" << version << " cut at " << cut;
    }
  }
  // A partition error travels with the leader it names.
  fetch_snapshot_response error;
  error.error_code = error_code::snapshot_not_found;
  error.snapshot_id = {5, 1};
  error.current_leader = {3, 4};
  auto back = decode_raft_response(59, 1, encode(to_protocol(error).message, 1), false);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::get<fetch_snapshot_response>(*back).error_code, error_code::snapshot_not_found);
  EXPECT_EQ(std::get<fetch_snapshot_response>(*back).current_leader.leader_id, 3);
  EXPECT_TRUE(std::get<fetch_snapshot_response>(*back).bytes.empty());
  // A top-level error, or an answer for another partition, is an error status.
  auto top = top_level_error_response<protocol::fetch_snapshot_response>(error_code::invalid_request);
  auto top_decoded = decode_raft_response(59, 1, encode(top, 1), false);
  ASSERT_FALSE(top_decoded.ok());
  EXPECT_EQ(top_decoded.error().code, error_code::invalid_request);
  auto other = to_protocol(error);
  other.message.topics[0].partitions[0].index = 2;
  EXPECT_FALSE(decode_raft_response(59, 1, encode(other.message, 1), false).ok());
}

TEST(rpc_codec, fetch_response_carries_the_snapshot_id) {
  fetch_response f;
  f.high_watermark = 40;
  f.current_leader = {1, 3};
  f.snapshot_id = offset_and_epoch{30, 2};
  auto p = to_protocol(f, 0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->message.responses[0].partitions[0].snapshot_id.end_offset, 30);
  EXPECT_EQ(p->message.responses[0].partitions[0].snapshot_id.epoch, 2);
  auto back = decode_raft_response(1, 17, encode(p->message, 17), false);
  ASSERT_TRUE(back.ok()) << back.error().message;
  const auto& got = std::get<fetch_response>(*back);
  EXPECT_EQ(got.snapshot_id, (offset_and_epoch{30, 2}));
  EXPECT_EQ(got.high_watermark, 40);
  EXPECT_TRUE(got.records.empty());
  // Without one, the wire says -1/-1 and the message says nullopt.
  auto plain = to_protocol(sample_fetch_response(), 0);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->message.responses[0].partitions[0].snapshot_id.end_offset, -1);
  EXPECT_EQ(plain->message.responses[0].partitions[0].snapshot_id.epoch, -1);
  auto plain_back = decode_raft_response(1, 17, encode(plain->message, 17), false);
  ASSERT_TRUE(plain_back.ok());
  EXPECT_FALSE(std::get<fetch_response>(*plain_back).snapshot_id);
}

// KIP-853: KRaftVersionRecord and VotersRecord entries travel as control records of their own types, in one
// control batch with the write's other control records.
TEST(rpc_codec, kraft_control_records_round_trip) {
  const std::vector<voter_info> voters{{1, uuid::random(), "CONTROLLER", {"a", 9093}},
                                       {2, uuid::random(), "CONTROLLER", {"b", 9095}}};
  const auto records = voter_set_control_records(voters);
  std::vector<log_entry> entries{{0, 1, entry_type::leader_change, {}},
                                 {1, 1, entry_type::kraft_version, records[0].value, false},
                                 {2, 1, entry_type::voters, records[1].value},
                                 {3, 1, entry_type::data, {7}}};
  auto batches = entries_to_batches(entries, 0, {1, 1});
  ASSERT_TRUE(batches.ok()) << batches.error().message;
  auto back = entries_from_batches(*batches);
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->size(), 4u);
  EXPECT_EQ((*back)[1].type, entry_type::kraft_version);
  EXPECT_EQ((*back)[2].type, entry_type::voters);
  EXPECT_EQ((*back)[2].payload, records[1].value);
  auto decoded = decode_voters_record((*back)[2].payload);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, voters);
}

}  // namespace
}  // namespace mala::raft
