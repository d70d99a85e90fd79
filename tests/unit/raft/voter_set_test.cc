// KIP-853 voter sets in the metadata log: the bootstrap checkpoint's layout (Kafka's RecordsSnapshotWriter:
// header, KRaftVersionRecord, VotersRecord in the first control batch, the footer alone), reading the voter
// set back from a snapshot, and the --initial-controllers syntax.
#include "mala/raft/voter_set.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/storage/metadata_partition.h"

namespace mala::raft {
namespace {

std::vector<voter_info> three_voters() {
  return {
      {1, *uuid::parse("4RspKMKtQmuz0jTYBfO7Bg"), "CONTROLLER", {"node-1", 9093}},
      {2, uuid{}, "CONTROLLER", {"node-2", 9093}},
      {3, *uuid::parse("Cvw4bKKMTE2y4ElMCkK2UQ"), "CONTROLLER", {"10.0.0.3", 19093}},
  };
}

TEST(voter_set, the_bootstrap_checkpoint_is_kafkas_layout_and_reads_back) {
  const auto voters = three_voters();
  auto payload = bootstrap_checkpoint(voters, 1'700'000'000'000);
  ASSERT_TRUE(payload.ok());
  protocol::batch_splitter splitter(*payload);
  std::vector<std::vector<int16_t>> types;
  std::vector<int64_t> base_offsets;
  std::vector<uint8_t> scratch;
  while (auto span = splitter.next()) {
    protocol::record_batch_view batch(*span);
    ASSERT_TRUE(batch.ok());
    EXPECT_TRUE(batch.is_control());
    EXPECT_EQ(batch.header().partition_leader_epoch, 0);
    base_offsets.push_back(batch.base_offset());
    auto& t = types.emplace_back();
    for (const auto& r : batch.records(scratch)) t.push_back(*storage::control_record_type(*r.key));
  }
  ASSERT_TRUE(splitter.ok());
  EXPECT_EQ(types, (std::vector<std::vector<int16_t>>{{3, 5, 6}, {4}}));
  EXPECT_EQ(base_offsets, (std::vector<int64_t>{0, 3}));

  auto read = voter_set_in_snapshot(*payload);
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ(**read, voters);
}

TEST(voter_set, the_kraft_records_carry_version_one_and_every_voter) {
  const auto voters = three_voters();
  const auto records = voter_set_control_records(voters);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(storage::control_record_type(records[0].key), kraft_version_control_type);
  // MessageUtil.toByteBuffer (no version prefix): Version (0) and KRaftVersion (1), then no tags, as Kafka
  // 4.4 wrote it when it upgraded a static quorum (below).
  EXPECT_EQ(records[0].value, (std::vector<uint8_t>{0, 0, 0, 1, 0}));
  EXPECT_EQ(storage::control_record_type(records[1].key), kraft_voters_control_type);
  auto back = decode_voters_record(records[1].value);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, voters);
}

std::vector<uint8_t> from_hex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

// The VotersRecord Kafka 4.4 appended when `kafka-features upgrade --feature kraft.version=1` upgraded a
// static quorum of one Kafka and two Mala voters (taken from its __cluster_metadata-0 segment): Mala reads
// it. And the values Mala wrote before 2026-12-07, with an extra int16 version prefix, still read back.
TEST(voter_set, kafkas_voters_record_and_malas_older_framing_both_decode) {
  const auto kafkas = from_hex(
      "000004000000018ffaab30335e943fbb8136ab9d7429b0020b434f4e54524f4c4c45520a3132372e302e302e3185ef00000000"
      "010000"
      "000000021a9b72a3fe25b41bb0ae4f053b973a19020b434f4e54524f4c4c45520a3132372e302e302e31b9e100000000010000"
      "000000"
      "0330b5f8d73d604fc4f31d0f528db6efb5020b434f4e54524f4c4c45520a3132372e302e302e31e2a70000000001000000");
  auto voters = decode_voters_record(kafkas);
  ASSERT_TRUE(voters.ok()) << voters.error().message;
  ASSERT_EQ(voters->size(), 3u);
  EXPECT_EQ((*voters)[0].id, 1);
  EXPECT_EQ((*voters)[0].listener_name, "CONTROLLER");
  EXPECT_EQ((*voters)[0].endpoint.host, "127.0.0.1");
  EXPECT_EQ((*voters)[0].endpoint.port, 0x85ef);
  EXPECT_EQ((*voters)[2].id, 3);
  EXPECT_FALSE((*voters)[2].directory_id.is_zero());
  EXPECT_EQ(encode_voters_record(*voters), kafkas);  // and Mala writes the same bytes

  std::vector<uint8_t> older = {0, 0};
  older.insert(older.end(), kafkas.begin(), kafkas.end());
  auto again = decode_voters_record(older);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *voters);
  auto cut = kafkas;
  cut.pop_back();
  EXPECT_FALSE(decode_voters_record(cut).ok());
}

TEST(voter_set, a_snapshot_without_kraft_records_has_no_voter_set_and_garbage_is_refused) {
  auto empty = voter_set_in_snapshot({});
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());
  auto payload = bootstrap_checkpoint(three_voters(), 0);
  ASSERT_TRUE(payload.ok());
  std::vector<uint8_t> cut(payload->begin(), payload->end() - 3);
  EXPECT_FALSE(voter_set_in_snapshot(cut).ok());
  std::vector<uint8_t> flipped = *payload;
  flipped[70] ^= 0x40;  // inside the first batch: its CRC no longer matches
  EXPECT_FALSE(voter_set_in_snapshot(flipped).ok());
}

TEST(voter_set, initial_controllers_take_kafkas_syntax_with_an_optional_directory_id) {
  auto parsed = parse_initial_controllers(
      "1@node-1:9093:4RspKMKtQmuz0jTYBfO7Bg,2@node-2:9093,3@[::1]:19093:Cvw4bKKMTE2y4ElMCkK2UQ",
      "CONTROLLER");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  const auto& v = parsed.value();
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0], (voter_info{1, *uuid::parse("4RspKMKtQmuz0jTYBfO7Bg"), "CONTROLLER", {"node-1", 9093}}));
  EXPECT_EQ(v[1], (voter_info{2, uuid{}, "CONTROLLER", {"node-2", 9093}}));
  EXPECT_EQ(v[2].id, 3);
  EXPECT_EQ(v[2].endpoint.port, 19093);
  EXPECT_EQ(v[2].directory_id, *uuid::parse("Cvw4bKKMTE2y4ElMCkK2UQ"));

  for (const char* bad : {"", "1@node-1", "1@node-1:9093,1@node-2:9093", "x@node:1", "1@node-1:9093:notauuid",
                          "1@node-1:9093,"}) {
    auto refused = parse_initial_controllers(bad, "CONTROLLER");
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.error().code, error_code::invalid_config) << bad;
  }
}

}  // namespace
}  // namespace mala::raft
