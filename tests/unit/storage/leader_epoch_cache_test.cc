#include "mala/storage/leader_epoch_cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

namespace mala::storage {
namespace {

namespace fs = std::filesystem;

class leader_epoch_cache_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = fs::temp_directory_path() / ("mala-epoch-cache-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_root);
  }
  void TearDown() override { fs::remove_all(_root); }
  leader_epoch_cache load() {
    auto cache = leader_epoch_cache::load(_root);
    EXPECT_TRUE(cache.ok()) << cache.error().message;
    return cache.ok() ? std::move(*cache) : leader_epoch_cache{};
  }
  std::vector<epoch_entry> on_disk() {
    auto read = read_epoch_checkpoint(_root / "leader-epoch-checkpoint");
    EXPECT_TRUE(read.ok());
    return read.ok() ? *read : std::vector<epoch_entry>{};
  }
  fs::path _root;
};

using entries = std::vector<epoch_entry>;

TEST_F(leader_epoch_cache_test, empty_cache) {
  auto cache = load();
  EXPECT_TRUE(cache.entries().empty());
  EXPECT_FALSE(cache.latest().has_value());
  EXPECT_FALSE(cache.latest_epoch().has_value());
  EXPECT_FALSE(cache.epoch_for_offset(0).has_value());
  EXPECT_EQ(cache.end_offset_for_epoch(0, 10), (epoch_end_offset{-1, -1}));
}

TEST_F(leader_epoch_cache_test, assign_appends_in_memory_and_write_persists) {
  auto cache = load();
  ASSERT_TRUE(cache.assign(2, 6).ok());
  ASSERT_TRUE(cache.assign(3, 8).ok());
  EXPECT_EQ(cache.entries(), (entries{{2, 6}, {3, 8}}));
  EXPECT_TRUE(on_disk().empty());  // no file work per epoch: written with the log's next flush
  EXPECT_FALSE(cache.take_unsynced().has_value());
  ASSERT_TRUE(cache.write(file_sync::later).ok());
  EXPECT_EQ(on_disk(), cache.entries());
  EXPECT_TRUE(cache.take_unsynced().has_value());  // written unsynced: the flush that wrote it syncs it
  EXPECT_FALSE(cache.take_unsynced().has_value());
  ASSERT_TRUE(cache.write(file_sync::later).ok());  // unchanged: nothing written again
  EXPECT_FALSE(cache.take_unsynced().has_value());
  EXPECT_EQ(cache.latest(), (epoch_entry{3, 8}));
  EXPECT_EQ(cache.latest_epoch(), 3);
  auto reloaded = load();
  EXPECT_EQ(reloaded.entries(), cache.entries());
}

TEST_F(leader_epoch_cache_test, same_epoch_at_later_offset_is_ignored) {
  auto cache = load();
  ASSERT_TRUE(cache.assign(2, 6).ok());
  ASSERT_TRUE(cache.assign(2, 6).ok());
  ASSERT_TRUE(cache.assign(2, 10).ok());
  EXPECT_EQ(cache.entries(), (entries{{2, 6}}));
}

TEST_F(leader_epoch_cache_test, same_epoch_at_earlier_offset_replaces_it) {
  auto cache = load();
  ASSERT_TRUE(cache.assign(2, 6).ok());
  ASSERT_TRUE(cache.assign(2, 5).ok());
  EXPECT_EQ(cache.entries(), (entries{{2, 5}}));
}

TEST_F(leader_epoch_cache_test, assign_removes_conflicting_entries) {
  auto cache = load();
  ASSERT_TRUE(cache.assign(2, 6).ok());
  ASSERT_TRUE(cache.assign(3, 8).ok());
  ASSERT_TRUE(cache.assign(4, 11).ok());
  // A lower epoch: every entry with a larger or equal epoch goes.
  ASSERT_TRUE(cache.assign(3, 12).ok());
  EXPECT_EQ(cache.entries(), (entries{{2, 6}, {3, 12}}));
  // A larger epoch at a smaller offset: entries at or after that offset go.
  ASSERT_TRUE(cache.assign(5, 7).ok());
  EXPECT_EQ(cache.entries(), (entries{{2, 6}, {5, 7}}));
  ASSERT_TRUE(cache.assign(6, 0).ok());
  EXPECT_EQ(cache.entries(), (entries{{6, 0}}));
  ASSERT_TRUE(cache.sync().ok());
  EXPECT_EQ(on_disk(), cache.entries());
}

TEST_F(leader_epoch_cache_test, negative_values_are_rejected) {
  auto cache = load();
  EXPECT_FALSE(cache.assign(-1, 0).ok());
  EXPECT_FALSE(cache.assign(0, -1).ok());
  EXPECT_TRUE(cache.entries().empty());
}

TEST_F(leader_epoch_cache_test, end_offset_for_epoch_follows_kafka) {
  auto cache = load();
  ASSERT_TRUE(cache.assign(2, 6).ok());
  ASSERT_TRUE(cache.assign(4, 11).ok());
  ASSERT_TRUE(cache.assign(7, 20).ok());
  // UNDEFINED_EPOCH.
  EXPECT_EQ(cache.end_offset_for_epoch(-1, 30), (epoch_end_offset{-1, -1}));
  // The latest epoch ends at the log end offset.
  EXPECT_EQ(cache.end_offset_for_epoch(7, 30), (epoch_end_offset{7, 30}));
  // A known epoch ends where the next one starts.
  EXPECT_EQ(cache.end_offset_for_epoch(2, 30), (epoch_end_offset{2, 11}));
  EXPECT_EQ(cache.end_offset_for_epoch(4, 30), (epoch_end_offset{4, 20}));
  // An unknown epoch between known ones: the largest smaller epoch and the next start.
  EXPECT_EQ(cache.end_offset_for_epoch(3, 30), (epoch_end_offset{2, 11}));
  EXPECT_EQ(cache.end_offset_for_epoch(6, 30), (epoch_end_offset{4, 20}));
  // Below every epoch: the requested epoch and the first known start offset.
  EXPECT_EQ(cache.end_offset_for_epoch(1, 30), (epoch_end_offset{1, 6}));
  // Above every epoch.
  EXPECT_EQ(cache.end_offset_for_epoch(8, 30), (epoch_end_offset{-1, -1}));
}

TEST_F(leader_epoch_cache_test, epoch_for_offset) {
  auto cache = load();
  ASSERT_TRUE(cache.assign(2, 6).ok());
  ASSERT_TRUE(cache.assign(4, 11).ok());
  EXPECT_FALSE(cache.epoch_for_offset(5).has_value());
  EXPECT_EQ(cache.epoch_for_offset(6), 2);
  EXPECT_EQ(cache.epoch_for_offset(10), 2);
  EXPECT_EQ(cache.epoch_for_offset(11), 4);
  EXPECT_EQ(cache.epoch_for_offset(1000), 4);
}

TEST_F(leader_epoch_cache_test, truncate_from_end) {
  auto cache = load();
  ASSERT_TRUE(cache.assign(2, 6).ok());
  ASSERT_TRUE(cache.assign(3, 8).ok());
  ASSERT_TRUE(cache.assign(4, 11).ok());
  ASSERT_TRUE(cache.truncate_from_end(12).ok());
  EXPECT_EQ(cache.entries(), (entries{{2, 6}, {3, 8}, {4, 11}}));
  ASSERT_TRUE(cache.truncate_from_end(11).ok());
  EXPECT_EQ(cache.entries(), (entries{{2, 6}, {3, 8}}));
  ASSERT_TRUE(cache.sync().ok());
  EXPECT_EQ(on_disk(), cache.entries());
  ASSERT_TRUE(cache.truncate_from_end(7).ok());
  EXPECT_EQ(cache.entries(), (entries{{2, 6}}));
  ASSERT_TRUE(cache.truncate_from_end(-1).ok());  // undefined end offset: no-op
  EXPECT_EQ(cache.entries(), (entries{{2, 6}}));
  ASSERT_TRUE(cache.truncate_from_end(0).ok());
  EXPECT_TRUE(cache.entries().empty());
}

TEST_F(leader_epoch_cache_test, truncate_from_start) {
  auto cache = load();
  ASSERT_TRUE(cache.assign(2, 6).ok());
  ASSERT_TRUE(cache.assign(3, 8).ok());
  ASSERT_TRUE(cache.assign(4, 11).ok());
  ASSERT_TRUE(cache.truncate_from_start(5).ok());  // before the first entry: nothing changes
  EXPECT_EQ(cache.entries(), (entries{{2, 6}, {3, 8}, {4, 11}}));
  ASSERT_TRUE(cache.truncate_from_start(9).ok());
  EXPECT_EQ(cache.entries(), (entries{{3, 9}, {4, 11}}));
  ASSERT_TRUE(cache.truncate_from_start(11).ok());  // exclusive: the entry starting there stays
  EXPECT_EQ(cache.entries(), (entries{{4, 11}}));
  ASSERT_TRUE(cache.truncate_from_start(100).ok());
  EXPECT_EQ(cache.entries(), (entries{{4, 100}}));
  ASSERT_TRUE(cache.sync().ok());
  EXPECT_EQ(on_disk(), cache.entries());
}

TEST_F(leader_epoch_cache_test, clear_persists) {
  auto cache = load();
  ASSERT_TRUE(cache.assign(2, 6).ok());
  ASSERT_TRUE(cache.clear().ok());
  EXPECT_TRUE(cache.entries().empty());
  EXPECT_TRUE(load().entries().empty());
}

TEST_F(leader_epoch_cache_test, load_applies_assign_rules_to_non_monotonic_checkpoints) {
  ASSERT_TRUE(
      write_epoch_checkpoint(_root / "leader-epoch-checkpoint", {{1, 0}, {3, 10}, {2, 5}, {4, 4}}).ok());
  EXPECT_EQ(load().entries(), (entries{{1, 0}, {4, 4}}));
}

TEST_F(leader_epoch_cache_test, corrupt_checkpoint_fails_load) {
  {
    std::FILE* f = std::fopen((_root / "leader-epoch-checkpoint").c_str(), "w");
    std::fputs("0\n1\nbogus\n", f);
    std::fclose(f);
  }
  auto cache = leader_epoch_cache::load(_root);
  ASSERT_FALSE(cache.ok());
  EXPECT_NE(cache.error().message.find("leader-epoch-checkpoint"), std::string::npos);
}

}  // namespace
}  // namespace mala::storage
