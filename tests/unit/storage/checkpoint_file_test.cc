#include "mala/storage/checkpoint_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace mala::storage {
namespace {

namespace fs = std::filesystem;

class checkpoint_file_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = fs::temp_directory_path() / ("mala-checkpoint-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_root);
  }
  void TearDown() override { fs::remove_all(_root); }
  static void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }
  static std::string read_text(const fs::path& path) {
    std::ifstream in(path);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }
  fs::path _root;
};

TEST_F(checkpoint_file_test, write_file_atomically_replaces_contents_and_leaves_no_temp_file) {
  auto path = _root / "file";
  ASSERT_TRUE(write_file_atomically(path, "first").ok());
  ASSERT_TRUE(write_file_atomically(path, "second").ok());
  EXPECT_EQ(read_text(path), "second");
  EXPECT_FALSE(fs::exists(_root / "file.tmp"));
}

TEST_F(checkpoint_file_test, write_file_atomically_reports_missing_directory) {
  auto st = write_file_atomically(_root / "missing" / "file", "x");
  EXPECT_EQ(st.code, error_code::kafka_storage_error);
  EXPECT_NE(st.message.find("missing"), std::string::npos);
}

TEST_F(checkpoint_file_test, offset_checkpoint_round_trip_in_kafka_format) {
  auto path = _root / "recovery-point-offset-checkpoint";
  offset_checkpoint offsets{{{"orders", 0}, 42}, {{"orders", 1}, 7}, {{"my-topic-2", 3}, 0}};
  ASSERT_TRUE(write_offset_checkpoint(path, offsets).ok());
  EXPECT_EQ(read_text(path), "0\n3\nmy-topic-2 3 0\norders 0 42\norders 1 7\n");
  auto read = read_offset_checkpoint(path);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, offsets);
}

TEST_F(checkpoint_file_test, missing_and_empty_checkpoints_are_empty) {
  auto missing = read_offset_checkpoint(_root / "nothing");
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->empty());
  write_text(_root / "empty", "");
  auto empty = read_offset_checkpoint(_root / "empty");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  write_text(_root / "zero", "0\n0\n");
  auto zero = read_epoch_checkpoint(_root / "zero");
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->empty());
}

TEST_F(checkpoint_file_test, reads_kafka_written_whitespace_variants) {
  write_text(_root / "cp", "0\r\n2\r\nt  0\t5\r\nt 1 6\r\n");
  auto read = read_offset_checkpoint(_root / "cp");
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->at(topic_partition{"t", 0}), 5);
  EXPECT_EQ(read->at(topic_partition{"t", 1}), 6);
}

TEST_F(checkpoint_file_test, malformed_checkpoints_are_errors_naming_path_and_line) {
  struct bad_case {
    std::string text;
    std::string expect;
  };
  for (const auto& c : std::vector<bad_case>{{"x\n0\n", "line 1"},
                                             {"1\n0\n", "version 1"},
                                             {"0\nabc\n", "line 2"},
                                             {"0\n1\nt 0\n", "line 3"},
                                             {"0\n2\nt 0 1\nt 1 x\n", "line 4"},
                                             {"0\n2\nt 0 1\n", "expected 2"},
                                             {"0\n1\nt 0 1\nt 1 2\n", "expected 1"}}) {
    auto path = _root / "bad";
    write_text(path, c.text);
    auto read = read_offset_checkpoint(path);
    ASSERT_FALSE(read.ok()) << c.text;
    EXPECT_EQ(read.error().code, error_code::kafka_storage_error);
    EXPECT_NE(read.error().message.find(c.expect), std::string::npos) << read.error().message;
    EXPECT_NE(read.error().message.find(path.string()), std::string::npos) << read.error().message;
  }
}

TEST_F(checkpoint_file_test, epoch_checkpoint_round_trip) {
  auto path = _root / "leader-epoch-checkpoint";
  std::vector<epoch_entry> entries{{0, 0}, {2, 100}, {5, 250}};
  ASSERT_TRUE(write_epoch_checkpoint(path, entries).ok());
  EXPECT_EQ(read_text(path), "0\n3\n0 0\n2 100\n5 250\n");
  auto read = read_epoch_checkpoint(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, entries);
  write_text(path, "0\n1\n3 x\n");
  EXPECT_FALSE(read_epoch_checkpoint(path).ok());
}

TEST_F(checkpoint_file_test, partition_metadata_round_trip) {
  auto none = read_partition_metadata(_root);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto id = uuid::random();
  ASSERT_TRUE(write_partition_metadata(_root, id).ok());
  EXPECT_EQ(read_text(_root / "partition.metadata"), "version: 0\ntopic_id: " + id.to_string() + "\n");
  auto read = read_partition_metadata(_root);
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ(**read, id);
}

TEST_F(checkpoint_file_test, malformed_partition_metadata_is_an_error) {
  for (const std::string text : {"", "version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n", "version: 0\n",
                                 "version: 0\ntopic_id: not-a-uuid\n", "topic_id: x\nversion: 0\n"}) {
    write_text(_root / "partition.metadata", text);
    auto read = read_partition_metadata(_root);
    ASSERT_FALSE(read.ok()) << text;
    EXPECT_NE(read.error().message.find("partition.metadata"), std::string::npos);
  }
}

}  // namespace
}  // namespace mala::storage
