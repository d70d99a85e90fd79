#include "mala/storage/offset_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

namespace mala::storage {
namespace {

namespace fs = std::filesystem;

class offset_index_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _dir = fs::temp_directory_path() / ("mala-offset-index-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_dir);
    _path = _dir / "00000000000000000100.index";
  }
  void TearDown() override { fs::remove_all(_dir); }

  std::unique_ptr<offset_index> open(int32_t max_size, bool writable = true, int64_t base = 100) {
    auto r = offset_index::open(_path, base, max_size, writable);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r.value()) : nullptr;
  }
  void write_raw(const std::vector<uint8_t>& bytes) {
    std::ofstream out(_path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  static void put_entry(std::vector<uint8_t>& bytes, int32_t relative, int32_t position) {
    for (int32_t v : {relative, position}) {
      for (int shift = 24; shift >= 0; shift -= 8)
        bytes.push_back(static_cast<uint8_t>(static_cast<uint32_t>(v) >> shift));
    }
  }

  fs::path _dir;
  fs::path _path;
};

TEST_F(offset_index_test, new_index_is_preallocated_to_whole_entries) {
  auto index = open(1001);
  EXPECT_EQ(fs::file_size(_path), 1000u);
  EXPECT_EQ(index->entries(), 0);
  EXPECT_EQ(index->max_entries(), 125);
  EXPECT_FALSE(index->is_full());
  EXPECT_FALSE(index->last_entry());
  EXPECT_EQ(index->base_offset(), 100);
  EXPECT_TRUE(index->sanity_check().ok());
}

TEST_F(offset_index_test, max_size_below_one_entry_is_a_config_error) {
  auto r = offset_index::open(_path, 100, 7, true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, error_code::invalid_config);
}

TEST_F(offset_index_test, lookup_on_an_empty_index_gives_the_segment_start) {
  auto index = open(1024);
  EXPECT_EQ(index->lookup(0), (offset_position{100, 0}));
  EXPECT_EQ(index->lookup(100), (offset_position{100, 0}));
  EXPECT_EQ(index->lookup(1'000'000), (offset_position{100, 0}));
}

TEST_F(offset_index_test, lookup_finds_the_largest_entry_at_or_below_the_target) {
  auto index = open(1024);
  ASSERT_TRUE(index->append(110, 1000).ok());
  ASSERT_TRUE(index->append(120, 2000).ok());
  ASSERT_TRUE(index->append(130, 3000).ok());
  EXPECT_EQ(index->lookup(50), (offset_position{100, 0}));      // below the base offset
  EXPECT_EQ(index->lookup(109), (offset_position{100, 0}));     // before the first entry
  EXPECT_EQ(index->lookup(110), (offset_position{110, 1000}));  // exact hits
  EXPECT_EQ(index->lookup(120), (offset_position{120, 2000}));
  EXPECT_EQ(index->lookup(130), (offset_position{130, 3000}));
  EXPECT_EQ(index->lookup(119), (offset_position{110, 1000}));  // between entries
  EXPECT_EQ(index->lookup(125), (offset_position{120, 2000}));
  EXPECT_EQ(index->lookup(131), (offset_position{130, 3000}));  // after the last
  EXPECT_EQ(index->lookup(int64_t{1} << 40), (offset_position{130, 3000}));
  EXPECT_EQ(index->entries(), 3);
  EXPECT_EQ(index->entry(1), (offset_position{120, 2000}));
  EXPECT_EQ(index->last_entry(), (offset_position{130, 3000}));
}

TEST_F(offset_index_test, lookup_matches_a_linear_scan_on_random_entries) {
  auto index = open(8 * 5000);
  std::mt19937_64 rng(7);
  std::vector<offset_position> entries;
  int64_t offset = 100;
  int64_t position = 0;
  for (int i = 0; i < 5000; ++i) {
    offset += 1 + static_cast<int64_t>(rng() % 50);
    position += 1 + static_cast<int64_t>(rng() % 5000);
    ASSERT_TRUE(index->append(offset, position).ok());
    entries.push_back({offset, position});
  }
  EXPECT_TRUE(index->is_full());
  for (int i = 0; i < 20000; ++i) {
    const int64_t target = 90 + static_cast<int64_t>(rng() % static_cast<uint64_t>(offset + 20));
    offset_position expected{100, 0};
    for (const auto& e : entries) {
      if (e.offset <= target) expected = e;
    }
    ASSERT_EQ(index->lookup(target), expected) << "target " << target;
  }
}

TEST_F(offset_index_test, append_rejects_bad_entries) {
  auto index = open(1024);
  EXPECT_FALSE(index->append(99, 0).ok());                        // below the base offset
  EXPECT_FALSE(index->append(100 + (int64_t{1} << 31), 0).ok());  // relative offset beyond int32
  EXPECT_FALSE(index->append(110, int64_t{1} << 31).ok());        // position beyond int32
  ASSERT_TRUE(index->append(110, 10).ok());
  EXPECT_FALSE(index->append(110, 20).ok());  // offsets must increase
  EXPECT_FALSE(index->append(105, 20).ok());
  EXPECT_EQ(index->entries(), 1);
  EXPECT_TRUE(index->append(100 + int64_t{INT32_MAX}, 20).ok());
}

TEST_F(offset_index_test, a_full_index_refuses_appends) {
  auto index = open(32);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(index->append(101 + i, i * 10).ok());
  EXPECT_TRUE(index->is_full());
  auto s = index->append(200, 100);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(index->entries(), 4);
}

TEST_F(offset_index_test, truncate_to_drops_entries_at_or_above_the_offset) {
  auto index = open(1024);
  for (int64_t o : {110, 120, 130}) ASSERT_TRUE(index->append(o, (o - 100) * 100).ok());
  index->truncate_to(200);  // above the last entry: no effect
  EXPECT_EQ(index->entries(), 3);
  index->truncate_to(125);
  EXPECT_EQ(index->entries(), 2);
  EXPECT_EQ(index->last_entry(), (offset_position{120, 2000}));
  index->truncate_to(120);
  EXPECT_EQ(index->entries(), 1);
  EXPECT_EQ(index->lookup(125), (offset_position{110, 1000}));
  ASSERT_TRUE(index->append(115, 1500).ok());  // appends continue from the new last entry
  index->truncate_to(0);
  EXPECT_EQ(index->entries(), 0);
  EXPECT_EQ(index->lookup(125), (offset_position{100, 0}));
  ASSERT_TRUE(index->append(101, 10).ok());
  index->truncate_all();
  EXPECT_EQ(index->entries(), 0);
}

TEST_F(offset_index_test, trim_reopen_and_resize_round_trip) {
  {
    auto index = open(1024);
    for (int64_t o : {110, 120, 130}) ASSERT_TRUE(index->append(o, (o - 100) * 100).ok());
    ASSERT_TRUE(index->trim_to_entries().ok());
    EXPECT_EQ(fs::file_size(_path), 24u);
    EXPECT_TRUE(index->is_full());
    EXPECT_EQ(index->lookup(125), (offset_position{120, 2000}));
  }
  {
    // A rolled segment's index: opened without growing, full.
    auto index = open(1024, false);
    EXPECT_EQ(fs::file_size(_path), 24u);
    EXPECT_EQ(index->entries(), 3);
    EXPECT_TRUE(index->is_full());
    EXPECT_TRUE(index->sanity_check().ok());
    // Becoming the active segment again.
    ASSERT_TRUE(index->resize(1024).ok());
    EXPECT_EQ(fs::file_size(_path), 1024u);
    EXPECT_EQ(index->entries(), 3);
    EXPECT_EQ(index->lookup(131), (offset_position{130, 3000}));
    ASSERT_TRUE(index->append(140, 4000).ok());
    ASSERT_TRUE(index->resize(8).ok());  // never below the entries
    EXPECT_EQ(fs::file_size(_path), 32u);
    ASSERT_TRUE(index->flush().ok());
  }
  {
    auto index = open(1024, true);  // writable: grown again
    EXPECT_EQ(fs::file_size(_path), 1024u);
    EXPECT_EQ(index->entries(), 4);
    EXPECT_EQ(index->last_entry(), (offset_position{140, 4000}));
  }
}

TEST_F(offset_index_test, reopening_an_untrimmed_index_counts_entries_up_to_the_last_non_zero_one) {
  {
    auto index = open(4096);
    ASSERT_TRUE(index->append(100, 0).ok());  // entry 0 is all zero: (relative 0, position 0)
    ASSERT_TRUE(index->append(150, 5000).ok());
    ASSERT_TRUE(index->append(160, 6000).ok());
    // No trim: as after a crash.
  }
  auto index = open(4096, false);
  EXPECT_EQ(fs::file_size(_path), 4096u);
  EXPECT_EQ(index->entries(), 3);
  EXPECT_EQ(index->entry(0), (offset_position{100, 0}));
  EXPECT_EQ(index->last_entry(), (offset_position{160, 6000}));
  ASSERT_TRUE(index->append(170, 7000).ok());
}

TEST_F(offset_index_test, a_trimmed_index_of_one_zero_entry_keeps_it) {
  {
    auto index = open(4096);
    ASSERT_TRUE(index->append(100, 0).ok());
    ASSERT_TRUE(index->trim_to_entries().ok());
  }
  auto index = open(4096, false);
  EXPECT_EQ(index->entries(), 1);
  EXPECT_EQ(index->last_entry(), (offset_position{100, 0}));
}

TEST_F(offset_index_test, truncated_entries_do_not_come_back_after_a_crash) {
  {
    auto index = open(4096);
    for (int64_t o : {110, 120, 130}) ASSERT_TRUE(index->append(o, (o - 100) * 100).ok());
    index->truncate_to(120);
  }
  auto index = open(4096, false);
  EXPECT_EQ(index->entries(), 1);
  EXPECT_EQ(index->last_entry(), (offset_position{110, 1000}));
}

TEST_F(offset_index_test, sanity_check_detects_corrupt_files) {
  {
    std::vector<uint8_t> bytes;
    put_entry(bytes, 10, 100);
    put_entry(bytes, 20, 200);
    bytes.push_back(1);  // not a multiple of 8
    write_raw(bytes);
    auto index = open(4096, false);
    auto s = index->sanity_check();
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.code, error_code::corrupt_message);
  }
  {
    std::vector<uint8_t> bytes;
    put_entry(bytes, 20, 100);
    put_entry(bytes, 10, 200);  // offsets going backwards
    write_raw(bytes);
    EXPECT_FALSE(open(4096, false)->sanity_check().ok());
  }
  {
    std::vector<uint8_t> bytes;
    put_entry(bytes, -5, 100);  // last offset below the base offset
    write_raw(bytes);
    EXPECT_FALSE(open(4096, false)->sanity_check().ok());
  }
  {
    std::vector<uint8_t> bytes;
    put_entry(bytes, 10, 300);
    put_entry(bytes, 20, 200);  // positions going backwards
    write_raw(bytes);
    EXPECT_FALSE(open(4096, false)->sanity_check().ok());
  }
  {
    std::vector<uint8_t> bytes;
    put_entry(bytes, 10, 100);
    put_entry(bytes, 20, 200);
    write_raw(bytes);
    auto index = open(4096, false);
    EXPECT_TRUE(index->sanity_check().ok());
    EXPECT_EQ(index->lookup(115), (offset_position{110, 100}));
  }
}

TEST_F(offset_index_test, rename_and_delete) {
  auto index = open(1024);
  ASSERT_TRUE(index->append(110, 10).ok());
  const fs::path renamed = _dir / "00000000000000000100.index.deleted";
  ASSERT_TRUE(index->rename_to(renamed).ok());
  EXPECT_EQ(index->path(), renamed);
  EXPECT_FALSE(fs::exists(_path));
  EXPECT_EQ(index->lookup(115), (offset_position{110, 10}));  // the mapping survives the rename
  ASSERT_TRUE(index->close_and_delete().ok());
  EXPECT_FALSE(fs::exists(renamed));
  EXPECT_EQ(index->entries(), 0);
}

}  // namespace
}  // namespace mala::storage
