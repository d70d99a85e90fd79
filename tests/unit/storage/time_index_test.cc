#include "mala/storage/time_index.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

namespace mala::storage {
namespace {

namespace fs = std::filesystem;

class time_index_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _dir = fs::temp_directory_path() / ("mala-time-index-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_dir);
    _path = _dir / "00000000000000000100.timeindex";
  }
  void TearDown() override { fs::remove_all(_dir); }

  std::unique_ptr<time_index> open(int32_t max_size, bool writable = true) {
    auto r = time_index::open(_path, 100, max_size, writable);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r.value()) : nullptr;
  }
  void write_raw(const std::vector<uint8_t>& bytes) {
    std::ofstream out(_path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  static void put_entry(std::vector<uint8_t>& bytes, int64_t timestamp, int32_t relative) {
    for (int shift = 56; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<uint8_t>(static_cast<uint64_t>(timestamp) >> shift));
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<uint8_t>(static_cast<uint32_t>(relative) >> shift));
  }

  fs::path _dir;
  fs::path _path;
};

TEST_F(time_index_test, new_index_is_preallocated_and_empty) {
  auto index = open(1000);
  EXPECT_EQ(fs::file_size(_path), 996u);  // 83 entries of 12 bytes
  EXPECT_EQ(index->max_entries(), 83);
  EXPECT_EQ(index->entries(), 0);
  EXPECT_EQ(index->lookup(0), (timestamp_offset{-1, 100}));
  EXPECT_EQ(index->lookup(1'000'000), (timestamp_offset{-1, 100}));
  EXPECT_FALSE(index->last_entry());
  EXPECT_TRUE(index->sanity_check().ok());
}

TEST_F(time_index_test, lookup_finds_the_largest_timestamp_at_or_below_the_target) {
  auto index = open(1200);
  ASSERT_TRUE(index->maybe_append(1000, 105).ok());
  ASSERT_TRUE(index->maybe_append(2000, 110).ok());
  ASSERT_TRUE(index->maybe_append(3000, 120).ok());
  EXPECT_EQ(index->lookup(999), (timestamp_offset{-1, 100}));     // before the first entry
  EXPECT_EQ(index->lookup(1000), (timestamp_offset{1000, 105}));  // exact
  EXPECT_EQ(index->lookup(1500), (timestamp_offset{1000, 105}));  // between
  EXPECT_EQ(index->lookup(3000), (timestamp_offset{3000, 120}));
  EXPECT_EQ(index->lookup(9000), (timestamp_offset{3000, 120}));  // after the last
  EXPECT_EQ(index->entry(1), (timestamp_offset{2000, 110}));
  EXPECT_EQ(index->last_entry(), (timestamp_offset{3000, 120}));
}

TEST_F(time_index_test, lookup_matches_a_linear_scan_on_random_entries) {
  auto index = open(12 * 3001);
  std::mt19937_64 rng(11);
  std::vector<timestamp_offset> entries;
  int64_t timestamp = 1'700'000'000'000;
  int64_t offset = 100;
  for (int i = 0; i < 3000; ++i) {
    timestamp += 1 + static_cast<int64_t>(rng() % 1000);
    offset += static_cast<int64_t>(rng() % 20);
    ASSERT_TRUE(index->maybe_append(timestamp, offset).ok());
    entries.push_back({timestamp, offset});
  }
  for (int i = 0; i < 20000; ++i) {
    const int64_t target = 1'700'000'000'000 + static_cast<int64_t>(rng() % 1'600'000) - 1000;
    timestamp_offset expected{-1, 100};
    for (const auto& e : entries) {
      if (e.timestamp <= target) expected = e;
    }
    ASSERT_EQ(index->lookup(target), expected) << "target " << target;
  }
}

TEST_F(time_index_test, only_larger_timestamps_are_appended) {
  auto index = open(1200);
  ASSERT_TRUE(index->maybe_append(-1, 100).ok());  // no timestamp: nothing to index
  EXPECT_EQ(index->entries(), 0);
  ASSERT_TRUE(index->maybe_append(1000, 105).ok());
  ASSERT_TRUE(index->maybe_append(1000, 106).ok());  // equal: ignored (the roll/close re-append)
  ASSERT_TRUE(index->maybe_append(900, 107).ok());   // smaller: ignored
  EXPECT_EQ(index->entries(), 1);
  EXPECT_FALSE(index->maybe_append(2000, 104).ok());  // a larger timestamp at a smaller offset is a bug
  EXPECT_FALSE(index->maybe_append(2000, 100 + (int64_t{1} << 31)).ok());
  ASSERT_TRUE(index->maybe_append(2000, 105).ok());  // the same offset may carry a larger timestamp
  EXPECT_EQ(index->entries(), 2);
}

TEST_F(time_index_test, the_last_slot_is_reserved_for_the_roll_entry) {
  auto index = open(36);  // three slots
  ASSERT_TRUE(index->maybe_append(1000, 101).ok());
  ASSERT_TRUE(index->maybe_append(2000, 102).ok());
  EXPECT_TRUE(index->is_full());
  EXPECT_FALSE(index->maybe_append(3000, 103).ok());
  ASSERT_TRUE(index->maybe_append(3000, 103, true).ok());
  EXPECT_EQ(index->entries(), 3);
}

TEST_F(time_index_test, the_roll_entry_grows_a_trimmed_index_by_one_slot) {
  auto index = open(1200);
  ASSERT_TRUE(index->maybe_append(1000, 101).ok());
  ASSERT_TRUE(index->trim_to_entries().ok());
  EXPECT_EQ(fs::file_size(_path), 12u);
  ASSERT_TRUE(index->maybe_append(5000, 109, true).ok());
  EXPECT_EQ(fs::file_size(_path), 24u);
  EXPECT_EQ(index->last_entry(), (timestamp_offset{5000, 109}));
}

TEST_F(time_index_test, truncate_to_drops_entries_at_or_above_the_offset) {
  auto index = open(1200);
  ASSERT_TRUE(index->maybe_append(1000, 105).ok());
  ASSERT_TRUE(index->maybe_append(2000, 110).ok());
  ASSERT_TRUE(index->maybe_append(3000, 120).ok());
  index->truncate_to(121);
  EXPECT_EQ(index->entries(), 3);
  index->truncate_to(111);
  EXPECT_EQ(index->entries(), 2);
  index->truncate_to(110);
  EXPECT_EQ(index->entries(), 1);
  EXPECT_EQ(index->last_entry(), (timestamp_offset{1000, 105}));
  ASSERT_TRUE(index->maybe_append(1500, 106).ok());  // appends continue after the new last entry
  index->truncate_to(50);
  EXPECT_EQ(index->entries(), 0);
  EXPECT_EQ(index->lookup(5000), (timestamp_offset{-1, 100}));
}

TEST_F(time_index_test, trim_reopen_and_resize_round_trip) {
  {
    auto index = open(1200);
    ASSERT_TRUE(index->maybe_append(1000, 105).ok());
    ASSERT_TRUE(index->maybe_append(2000, 110).ok());
    ASSERT_TRUE(index->trim_to_entries().ok());
    EXPECT_EQ(fs::file_size(_path), 24u);
  }
  {
    auto index = open(1200, false);
    EXPECT_EQ(index->entries(), 2);
    EXPECT_TRUE(index->is_full());
    ASSERT_TRUE(index->resize(1200).ok());
    EXPECT_EQ(fs::file_size(_path), 1200u);
    EXPECT_FALSE(index->is_full());
    ASSERT_TRUE(index->maybe_append(3000, 111).ok());
    ASSERT_TRUE(index->flush().ok());
  }
  auto index = open(1200, false);  // untrimmed, as after a crash
  EXPECT_EQ(index->entries(), 3);
  EXPECT_EQ(index->last_entry(), (timestamp_offset{3000, 111}));
}

TEST_F(time_index_test, reopening_an_untrimmed_index_keeps_a_zero_first_entry) {
  {
    auto index = open(1200);
    ASSERT_TRUE(index->maybe_append(0, 100).ok());  // timestamp 0 at the base offset: all zero bytes
    ASSERT_TRUE(index->maybe_append(7, 102).ok());
  }
  auto index = open(1200, false);
  EXPECT_EQ(index->entries(), 2);
  EXPECT_EQ(index->entry(0), (timestamp_offset{0, 100}));
  EXPECT_EQ(index->lookup(5), (timestamp_offset{0, 100}));
}

TEST_F(time_index_test, sanity_check_detects_corrupt_files) {
  {
    std::vector<uint8_t> bytes;
    put_entry(bytes, 2000, 5);
    put_entry(bytes, 1000, 6);  // last timestamp below the first
    write_raw(bytes);
    auto s = open(1200, false)->sanity_check();
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.code, error_code::corrupt_message);
  }
  {
    std::vector<uint8_t> bytes;
    put_entry(bytes, 1000, -3);  // offset below the base offset
    write_raw(bytes);
    EXPECT_FALSE(open(1200, false)->sanity_check().ok());
  }
  {
    std::vector<uint8_t> bytes;
    put_entry(bytes, 1000, 5);
    bytes.resize(bytes.size() + 5, 0xff);  // not a multiple of 12
    write_raw(bytes);
    EXPECT_FALSE(open(1200, false)->sanity_check().ok());
  }
  {
    std::vector<uint8_t> bytes;
    put_entry(bytes, 1000, 5);
    put_entry(bytes, 2000, 5);
    write_raw(bytes);
    EXPECT_TRUE(open(1200, false)->sanity_check().ok());
  }
}

}  // namespace
}  // namespace mala::storage
