// partition_raft_log: the raft_log on storage::partition_log (__cluster_metadata-0). It must answer exactly
// as memory_raft_log does (checked entry by entry and against a random sequence of appends and truncations),
// store one v2 batch per entry stamped with the entry's epoch (leader_change as a LEADER_CHANGE control
// batch), keep everything across a reopen (the leader epoch cache included), read the multi-record batches
// the single-voter controller log writes, and carry a single-voter replica across a restart together with the
// quorum-state file.
#include "mala/raft/partition_raft_log.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/raft/quorum_state_file.h"
#include "mala/raft/replica.h"
#include "mala/storage/metadata_partition.h"

namespace mala::raft {
namespace {

namespace fs = std::filesystem;

class partition_raft_log_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _dir = fs::temp_directory_path() /
           ("mala-partition-raft-log-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_dir);
  }
  void TearDown() override { fs::remove_all(_dir); }

  std::unique_ptr<partition_raft_log> open() {
    partition_raft_log_options o;
    o.clock_ms = [] { return int64_t{1'700'000'000'000}; };
    auto log = partition_raft_log::open(_dir, o);
    EXPECT_TRUE(log.ok()) << (log.ok() ? "" : log.error().message);
    return log.ok() ? std::move(*log) : nullptr;
  }

  static log_entry entry(const raft_log& log, int32_t epoch, entry_type type = entry_type::data) {
    log_entry e{log.end_offset(), epoch, type, {}};
    if (type == entry_type::data) e.payload = {static_cast<uint8_t>(log.end_offset()), 0xab};
    return e;
  }
  static void fill(raft_log& log, const std::vector<int32_t>& epochs) {
    for (int32_t epoch : epochs) {
      const log_entry e = entry(log, epoch);
      log.append(std::span<const log_entry>(&e, 1));
    }
  }

  fs::path _dir;
};

TEST_F(partition_raft_log_test, empty_log) {
  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->start_offset(), 0);
  EXPECT_EQ(log->end_offset(), 0);
  EXPECT_EQ(log->last_fetched_epoch(), 0);
  EXPECT_EQ(log->end_offset_for_epoch(0), (offset_and_epoch{0, 0}));
  EXPECT_EQ(log->end_offset_for_epoch(7), (offset_and_epoch{0, 0}));
  EXPECT_TRUE(log->read(0, 10).empty());
  EXPECT_EQ(log->dir(), storage::metadata_partition_dir(_dir));
  EXPECT_TRUE(log->flush().ok());
}

TEST_F(partition_raft_log_test, append_and_read_round_trip) {
  auto log = open();
  ASSERT_TRUE(log);
  memory_raft_log expected;
  std::vector<log_entry> batch;
  batch.push_back(entry(*log, 1, entry_type::leader_change));
  batch.push_back({1, 1, entry_type::data, {1, 2, 3}});
  batch.push_back({2, 1, entry_type::data, {}});
  batch.push_back({3, 2, entry_type::leader_change, {9, 9}});  // a payload the glue encoded
  batch.push_back({4, 2, entry_type::data, std::vector<uint8_t>(10'000, 0x5a)});
  log->append(batch);
  expected.append(batch);
  EXPECT_EQ(log->end_offset(), 5);
  EXPECT_EQ(log->last_fetched_epoch(), 2);
  EXPECT_EQ(log->read(0, 100), expected.entries());
  EXPECT_EQ(log->read(1, 2), expected.read(1, 2));
  EXPECT_EQ(log->read(4, 100), expected.read(4, 100));
  EXPECT_TRUE(log->read(5, 100).empty());
  EXPECT_TRUE(log->flush().ok());
  EXPECT_TRUE(log->failure().ok());
}

TEST_F(partition_raft_log_test, one_batch_per_entry_stamped_with_its_epoch) {
  auto log = open();
  ASSERT_TRUE(log);
  std::vector<log_entry> entries{
      {0, 3, entry_type::leader_change, {}}, {1, 3, entry_type::data, {7}}, {2, 5, entry_type::data, {8}}};
  log->append(entries);
  auto read = log->partition().read(0, 1 << 20, log->end_offset(), true);
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(read->data);
  auto bytes = read->data->file->read(read->data->position, read->data->size);
  ASSERT_TRUE(bytes.ok());
  protocol::batch_splitter splitter(*bytes);
  std::vector<std::tuple<int64_t, int32_t, bool, int32_t>> batches;  // base offset, epoch, control, records
  while (auto span = splitter.next()) {
    protocol::record_batch_view batch(*span);
    ASSERT_TRUE(batch.ok());
    batches.emplace_back(batch.base_offset(), batch.header().partition_leader_epoch, batch.is_control(),
                         batch.record_count());
  }
  using t = std::tuple<int64_t, int32_t, bool, int32_t>;
  EXPECT_EQ(batches, (std::vector<t>{t{0, 3, true, 1}, t{1, 3, false, 1}, t{2, 5, false, 1}}));
  // The leader epoch cache learned both epochs.
  ASSERT_EQ(log->partition().epochs().entries().size(), 2u);
  EXPECT_EQ(log->partition().epochs().entries()[1], (storage::epoch_entry{5, 2}));
}

TEST_F(partition_raft_log_test, end_offset_for_epoch_is_the_end_of_the_largest_epoch_not_above) {
  auto log = open();
  ASSERT_TRUE(log);
  fill(*log, {1, 1, 3, 3, 4});
  EXPECT_EQ(log->last_fetched_epoch(), 4);
  EXPECT_EQ(log->end_offset_for_epoch(0), (offset_and_epoch{0, 0}));
  EXPECT_EQ(log->end_offset_for_epoch(1), (offset_and_epoch{2, 1}));
  EXPECT_EQ(log->end_offset_for_epoch(2), (offset_and_epoch{2, 1}));
  EXPECT_EQ(log->end_offset_for_epoch(3), (offset_and_epoch{4, 3}));
  EXPECT_EQ(log->end_offset_for_epoch(4), (offset_and_epoch{5, 4}));
  EXPECT_EQ(log->end_offset_for_epoch(9), (offset_and_epoch{5, 4}));
}

TEST_F(partition_raft_log_test, truncation_drops_entries_and_their_epochs) {
  auto log = open();
  ASSERT_TRUE(log);
  fill(*log, {1, 1, 3, 3, 4});
  log->truncate_to(3);
  EXPECT_EQ(log->end_offset(), 3);
  EXPECT_EQ(log->last_fetched_epoch(), 3);
  EXPECT_EQ(log->end_offset_for_epoch(4), (offset_and_epoch{3, 3}));
  log->truncate_to(2);
  EXPECT_EQ(log->last_fetched_epoch(), 1);
  EXPECT_EQ(log->end_offset_for_epoch(3), (offset_and_epoch{2, 1}));
  log->truncate_to(5);  // past the end: nothing
  EXPECT_EQ(log->end_offset(), 2);
  const log_entry e{2, 5, entry_type::leader_change, {}};
  log->append(std::span<const log_entry>(&e, 1));
  EXPECT_EQ(log->end_offset_for_epoch(4), (offset_and_epoch{2, 1}));
  EXPECT_EQ(log->end_offset_for_epoch(5), (offset_and_epoch{3, 5}));
  EXPECT_EQ(log->read(2, 10), (std::vector<log_entry>{e}));
  log->truncate_to(0);
  EXPECT_EQ(log->end_offset(), 0);
  EXPECT_EQ(log->last_fetched_epoch(), 0);
  EXPECT_EQ(log->end_offset_for_epoch(5), (offset_and_epoch{0, 0}));
  EXPECT_TRUE(log->flush().ok());
}

TEST_F(partition_raft_log_test, reopen_keeps_entries_and_epochs) {
  std::vector<log_entry> before;
  {
    auto log = open();
    ASSERT_TRUE(log);
    fill(*log, {1, 1, 2, 4, 4, 4});
    log->truncate_to(5);
    const log_entry e{5, 6, entry_type::leader_change, {}};
    log->append(std::span<const log_entry>(&e, 1));
    ASSERT_TRUE(log->flush().ok());
    before = log->read(0, 100);
    ASSERT_TRUE(log->close().ok());
  }
  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->end_offset(), 6);
  EXPECT_EQ(log->last_fetched_epoch(), 6);
  EXPECT_EQ(log->read(0, 100), before);
  EXPECT_EQ(log->end_offset_for_epoch(3), (offset_and_epoch{3, 2}));
  EXPECT_EQ(log->end_offset_for_epoch(5), (offset_and_epoch{5, 4}));
  EXPECT_EQ(log->end_offset_for_epoch(6), (offset_and_epoch{6, 6}));
}

TEST_F(partition_raft_log_test, reads_multi_record_batches_as_one_entry_per_record) {
  auto log = open();
  ASSERT_TRUE(log);
  // As controller::local_metadata_log writes them: several records in one batch.
  const std::vector<uint8_t> a{1}, b{2}, c{3};
  const storage::metadata_batch_record records[] = {{std::nullopt, a}, {std::nullopt, b}, {std::nullopt, c}};
  auto batch = storage::build_metadata_batch(records, 1, false);
  ASSERT_TRUE(batch.ok());
  ASSERT_TRUE(storage::append_metadata_batches(log->partition(), *batch, 2).ok());
  EXPECT_EQ(log->end_offset(), 3);
  EXPECT_EQ(log->last_fetched_epoch(), 2);
  EXPECT_EQ(log->read(1, 10),
            (std::vector<log_entry>{{1, 2, entry_type::data, b}, {2, 2, entry_type::data, c}}));
  EXPECT_EQ(log->read(0, 2).size(), 2u);
}

TEST_F(partition_raft_log_test, agrees_with_memory_raft_log_under_random_appends_and_truncations) {
  auto log = open();
  ASSERT_TRUE(log);
  memory_raft_log expected;
  std::mt19937 random(7);
  int32_t epoch = 1;
  for (int step = 0; step < 300; ++step) {
    if (random() % 4 == 0 && expected.end_offset() > 0) {
      const int64_t to = static_cast<int64_t>(random() % static_cast<uint32_t>(expected.end_offset() + 1));
      log->truncate_to(to);
      expected.truncate_to(to);
    } else {
      if (random() % 3 == 0) epoch += 1 + static_cast<int32_t>(random() % 2);
      std::vector<log_entry> entries;
      const int n = 1 + static_cast<int>(random() % 4);
      for (int i = 0; i < n; ++i) {
        const auto type = random() % 5 == 0 ? entry_type::leader_change : entry_type::data;
        std::vector<uint8_t> payload;
        if (type == entry_type::data) payload.assign(random() % 20, static_cast<uint8_t>(step));
        entries.push_back({expected.end_offset() + i, epoch, type, payload});
      }
      log->append(entries);
      expected.append(entries);
    }
    ASSERT_EQ(log->end_offset(), expected.end_offset()) << "step " << step;
    ASSERT_EQ(log->last_fetched_epoch(), expected.last_fetched_epoch()) << "step " << step;
    for (int32_t e = 0; e <= epoch + 1; ++e) {
      ASSERT_EQ(log->end_offset_for_epoch(e), expected.end_offset_for_epoch(e))
          << "step " << step << " epoch " << e;
    }
  }
  EXPECT_EQ(log->read(0, 10'000), expected.entries());
  ASSERT_TRUE(log->flush().ok());
}

TEST_F(partition_raft_log_test, single_voter_replica_survives_a_restart_on_storage) {
  raft_config config;
  config.node_id = 1;
  config.voters = {1};
  config.random_seed = 3;
  const fs::path partition_dir = storage::metadata_partition_dir(_dir);
  int32_t first_epoch = 0;
  int64_t end = 0;
  // Carries out a step's effects the way the glue does: quorum state, log flush, (no messages to send).
  auto apply = [&](replica& r, partition_raft_log& log, const quorum_state_file& file) {
    effects e = r.take_effects();
    if (e.quorum_state_to_persist) {
      ASSERT_TRUE(file.write(*e.quorum_state_to_persist).ok());
    }
    if (!e.log_operations.empty()) {
      ASSERT_TRUE(log.flush().ok());
    }
    EXPECT_TRUE(e.messages.empty());
  };
  {
    auto log = open();
    ASSERT_TRUE(log);
    const auto file = quorum_state_file::in_dir(log->dir(), config.voters);
    auto persisted = file.read();
    ASSERT_TRUE(persisted.ok());
    EXPECT_FALSE(*persisted);
    replica r(config, *log, *persisted, 0);
    apply(r, *log, file);
    ASSERT_EQ(r.current_role(), role::leader);
    first_epoch = r.epoch();
    auto appended = r.append({{1, 2}, {3}});
    ASSERT_TRUE(appended.ok());
    apply(r, *log, file);
    EXPECT_EQ(r.high_watermark(), log->end_offset());
    end = log->end_offset();
    EXPECT_EQ(end, 3);  // leader_change + two records
  }
  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->end_offset(), end);
  const auto file = quorum_state_file::in_dir(partition_dir, config.voters);
  auto persisted = file.read();
  ASSERT_TRUE(persisted.ok()) << persisted.error().message;
  ASSERT_TRUE(*persisted);
  EXPECT_EQ((*persisted)->leader_epoch, first_epoch);
  EXPECT_EQ((*persisted)->leader_id, 1);
  replica r(config, *log, *persisted, 10'000);
  apply(r, *log, file);
  for (int64_t now = 10'000; now < 20'000 && r.current_role() != role::leader; now += 100) {
    r.tick(now);
    apply(r, *log, file);
  }
  ASSERT_EQ(r.current_role(), role::leader);
  EXPECT_GT(r.epoch(), first_epoch);
  const auto entries = log->read(0, 100);
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[1].payload, (std::vector<uint8_t>{1, 2}));
  EXPECT_EQ(entries[2].payload, (std::vector<uint8_t>{3}));
  EXPECT_EQ(entries[3].type, entry_type::leader_change);
  EXPECT_EQ(entries[3].epoch, r.epoch());
}

}  // namespace
}  // namespace mala::raft
