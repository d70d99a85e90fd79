// quorum_state_file: Kafka's FileQuorumStateStore format (QuorumStateData JSON + data_version) round trips,
// files Kafka writes (versions 0 and 1) are read, the write is atomic (no temp file left), and a corrupt or
// incomplete file is refused with an error naming the file rather than read as "no vote".
#include "mala/raft/quorum_state_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace mala::raft {
namespace {

namespace fs = std::filesystem;

class quorum_state_file_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _dir = fs::temp_directory_path() / ("mala-quorum-state-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_dir);
  }
  void TearDown() override { fs::remove_all(_dir); }

  void put(const std::string& text) {
    std::ofstream(_dir / quorum_state_file_name, std::ios::binary | std::ios::trunc) << text;
  }
  std::string contents() {
    std::ifstream in(_dir / quorum_state_file_name, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path _dir;
};

TEST_F(quorum_state_file_test, missing_file_is_a_fresh_node) {
  const auto file = quorum_state_file::in_dir(_dir);
  auto read = file.read();
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(*read);
}

TEST_F(quorum_state_file_test, round_trip_in_kafkas_version_0_format) {
  const auto file = quorum_state_file::in_dir(_dir, {1, 2, 3});
  const quorum_state voted{7, no_leader, 2};
  ASSERT_TRUE(file.write(voted).ok());
  EXPECT_EQ(contents(),
            "{\"clusterId\":\"\",\"leaderId\":-1,\"leaderEpoch\":7,\"votedId\":2,\"appliedOffset\":0,"
            "\"currentVoters\":[{\"voterId\":1},{\"voterId\":2},{\"voterId\":3}],\"data_version\":0}");
  auto read = file.read();
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, voted);
  const quorum_state led{8, 3, 3};
  ASSERT_TRUE(file.write(led).ok());
  read = file.read();
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, led);
  EXPECT_FALSE(fs::exists(_dir / "quorum-state.tmp"));
}

TEST_F(quorum_state_file_test, reads_files_kafka_writes) {
  put("{\"clusterId\":\"\",\"leaderId\":1,\"leaderEpoch\":2,\"votedId\":-1,\"appliedOffset\":0,"
      "\"currentVoters\":[],\"data_version\":0}");
  auto read = quorum_state_file::in_dir(_dir).read();
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, (quorum_state{2, 1, no_voter}));
  // Version 1 (KIP-853), pretty-printed over one line, with a trailing newline and unknown fields.
  put("{ \"leaderId\": -1, \"leaderEpoch\": 5, \"votedId\": 1, \"votedDirectoryId\": "
      "\"J8aAPcfLQt2bqs1JT_rMgQ\","
      " \"currentVoters\": null, \"extra\": {\"a\": [1, 2.5e3, true]}, \"data_version\": 1 }\n");
  read = quorum_state_file::in_dir(_dir).read();
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, (quorum_state{5, no_leader, 1}));
}

TEST_F(quorum_state_file_test, corrupt_files_are_refused_with_the_file_named) {
  const std::string valid_tail = "\"leaderEpoch\":2,\"votedId\":-1,\"data_version\":0}";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"", "expected a JSON object"},
      {"\x01\x02garbage", "expected a JSON object"},
      {"{\"leaderId\":1,\"leaderEpoch\":2,\"votedId\":-1,\"data_version\":0", "expected ',' or '}'"},
      {"{\"leaderId\":1,\"leaderEpoch\":2,\"votedId\":-1}", "missing field data_version"},
      {"{\"leaderId\":1,\"leaderEpoch\":2,\"votedId\":-1,\"data_version\":2}", "data_version out of range"},
      {"{\"leaderEpoch\":2,\"votedId\":-1,\"data_version\":0}", "missing field leaderId"},
      {"{\"leaderId\":\"1\"," + valid_tail, "leaderId is not an integer"},
      {"{\"leaderId\":1.5," + valid_tail, "leaderId is not an integer"},
      {"{\"leaderId\":-2," + valid_tail, "leaderId out of range"},
      {"{\"leaderId\":1,\"leaderEpoch\":4294967296,\"votedId\":-1,\"data_version\":0}",
       "leaderEpoch out of range"},
      {"{\"leaderId\":1,\"leaderEpoch\":99999999999999999999,\"votedId\":-1,\"data_version\":0}",
       "number out of range"},
      {"{\"leaderId\":1," + valid_tail + "x", "trailing characters"},
      {"[1,2]", "expected a JSON object"},
  };
  for (const auto& [text, why] : cases) {
    put(text);
    auto read = quorum_state_file::in_dir(_dir).read();
    ASSERT_FALSE(read.ok()) << text;
    EXPECT_EQ(read.error().code, error_code::kafka_storage_error);
    EXPECT_NE(read.error().message.find((_dir / "quorum-state").string()), std::string::npos)
        << read.error().message;
    EXPECT_NE(read.error().message.find(why), std::string::npos) << text << " -> " << read.error().message;
  }
}

TEST_F(quorum_state_file_test, encode_and_parse_agree_on_every_field) {
  for (const quorum_state s : {quorum_state{}, quorum_state{1, 1, 1}, quorum_state{2147483647, 5, no_voter},
                               quorum_state{3, no_leader, 9}}) {
    auto parsed = parse_quorum_state(encode_quorum_state(s, {}), "test");
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    EXPECT_EQ(*parsed, s);
  }
}

}  // namespace
}  // namespace mala::raft
