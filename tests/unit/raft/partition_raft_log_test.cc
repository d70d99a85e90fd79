// partition_raft_log: the raft_log on storage::partition_log (__cluster_metadata-0). It must answer exactly
// as memory_raft_log does (checked entry by entry and against a random sequence of appends and truncations),
// store one v2 batch per entry stamped with the entry's epoch (leader_change as a LEADER_CHANGE control
// batch), keep everything across a reopen (the leader epoch cache included), read the multi-record batches
// the unit tests' stand-in metadata log writes, and carry a single-voter replica across a restart together
// with the quorum-state file.
#include "mala/raft/partition_raft_log.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/raft/quorum_state_file.h"
#include "mala/raft/replica.h"
#include "mala/raft/voter_set.h"
#include "mala/storage/file_worker.h"
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
  EXPECT_EQ(log->read(1, 10), (std::vector<log_entry>{{1, 2, entry_type::data, b, /*batch_end=*/false},
                                                      {2, 2, entry_type::data, c, /*batch_end=*/true}}));
  EXPECT_EQ(log->read(0, 2).size(), 2u);
}

TEST_F(partition_raft_log_test, a_write_is_one_batch_and_keeps_its_boundaries_across_a_reopen) {
  {
    auto log = open();
    ASSERT_TRUE(log);
    const std::vector<log_entry> entries{{0, 1, entry_type::leader_change, {}, true},
                                         {1, 1, entry_type::data, {1}, false},
                                         {2, 1, entry_type::data, {2}, false},
                                         {3, 1, entry_type::data, {3}, true},
                                         {4, 1, entry_type::data, {4}, true}};
    log->append(entries);
    ASSERT_TRUE(log->flush().ok());
    EXPECT_EQ(log->read(0, 10), entries);
    // Three batches for five entries: the control batch, the write of three, the write of one.
    auto read = log->partition().read(0, 1 << 20, log->end_offset(), true);
    ASSERT_TRUE(read.ok() && read->data);
    auto bytes = read->data->file->read(read->data->position, read->data->size);
    ASSERT_TRUE(bytes.ok());
    protocol::batch_splitter splitter(*bytes);
    int batches = 0;
    while (splitter.next()) ++batches;
    EXPECT_EQ(batches, 3);
  }
  auto log = open();
  ASSERT_TRUE(log);
  const auto back = log->read(1, 10);
  ASSERT_EQ(back.size(), 4u);
  EXPECT_FALSE(back[0].batch_end);
  EXPECT_FALSE(back[1].batch_end);
  EXPECT_TRUE(back[2].batch_end);
  EXPECT_TRUE(back[3].batch_end);
}

// KIP-853: a KRaftVersionRecord and a VotersRecord written as one control batch (Kafka's leader writes them
// so) read back with their types and values, after a reopen too.
TEST_F(partition_raft_log_test, kraft_version_and_voters_records_round_trip) {
  const std::vector<voter_info> voters{{1, uuid::random(), "CONTROLLER", {"a", 9093}}};
  const auto records = voter_set_control_records(voters);
  const std::vector<log_entry> entries{{0, 1, entry_type::leader_change, {}, true},
                                       {1, 1, entry_type::kraft_version, records[0].value, false},
                                       {2, 1, entry_type::voters, records[1].value, true},
                                       {3, 1, entry_type::data, {7}, true}};
  {
    auto log = open();
    ASSERT_TRUE(log);
    log->append(entries);
    ASSERT_TRUE(log->flush().ok());
    EXPECT_EQ(log->read(0, 10), entries);
  }
  auto log = open();
  ASSERT_TRUE(log);
  const auto back = log->read(0, 10);
  ASSERT_EQ(back, entries);
  auto decoded = decode_voters_record(back[2].payload);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, voters);
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
      r.on_log_flushed(log.end_offset());
      EXPECT_TRUE(r.take_effects().log_operations.empty());
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

// --- Snapshots (KIP-630)

class partition_raft_log_snapshot_test : public partition_raft_log_test {
 protected:
  // The metadata partition with segments small enough that a few entries fill one.
  std::unique_ptr<partition_raft_log> open_small_segments(
      std::shared_ptr<storage::file_worker> worker = nullptr) {
    storage::log_config config = storage::metadata_log_config();
    config.segment_bytes = 300;
    storage::log_open_options options;
    options.clock_ms = [] { return int64_t{1'700'000'000'000}; };
    options.worker = std::move(worker);
    auto log = storage::partition_log::open(storage::metadata_partition_dir(_dir),
                                            {std::string(storage::metadata_topic_name), 0}, config, options);
    EXPECT_TRUE(log.ok()) << (log.ok() ? "" : log.error().message);
    if (!log.ok()) return nullptr;
    partition_raft_log_options o;
    o.clock_ms = [] { return int64_t{1'700'000'000'000}; };
    return std::make_unique<partition_raft_log>(std::move(*log), o);
  }
  fs::path partition_dir() const { return storage::metadata_partition_dir(_dir); }
  static std::vector<uint8_t> payload(uint8_t seed, size_t n = 100) {
    std::vector<uint8_t> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(seed + i);
    return out;
  }
  std::vector<std::string> files_ending(std::string_view suffix) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(partition_dir())) {
      const std::string name = e.path().filename().string();
      if (name.ends_with(suffix)) out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

TEST(snapshot_file_name_test, is_kafkas_name_and_parses_back) {
  EXPECT_EQ(snapshot_file_name({123, 2}), "00000000000000000123-0000000002.checkpoint");
  auto parsed = parse_snapshot_file_name("00000000000000000123-0000000002.checkpoint");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->id, (offset_and_epoch{123, 2}));
  EXPECT_FALSE(parsed->partial);
  EXPECT_FALSE(parsed->deleted);
  parsed = parse_snapshot_file_name("00000000000000000123-0000000002.checkpoint.part");
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(parsed->partial);
  parsed = parse_snapshot_file_name("00000000000000000123-0000000002.checkpoint.deleted");
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(parsed->deleted);
  for (const char* bad :
       {"123-2.checkpoint", "0000000000000000012x-0000000002.checkpoint",
        "00000000000000000123_0000000002.checkpoint", "00000000000000000123-0000000002.snapshot",
        "99999999999999999999-0000000002.checkpoint", "00000000000000000123-9999999999.checkpoint",
        "00000000000000000123-0000000002.checkpoint.tmp", "leader-epoch-checkpoint"}) {
    EXPECT_FALSE(parse_snapshot_file_name(bad)) << bad;
  }
}

// raft_node syncs the metadata log on its blocking thread: flush_work() hands out every segment not synced
// yet and, after a roll (which no longer syncs the directory itself), the directory; mark_flushed() then
// moves the recovery point. Nothing new: nothing to sync.
TEST_F(partition_raft_log_snapshot_test,
       flush_work_hands_out_the_unsynced_segments_and_the_rolled_directory) {
  auto log = open_small_segments();
  ASSERT_TRUE(log);
  fill(*log, std::vector<int32_t>(12, 1));
  ASSERT_GT(log->partition().segment_count(), 1u);  // rolled
  auto work = log->flush_work();
  ASSERT_TRUE(work.ok()) << work.error().message;
  EXPECT_EQ(work->end_offset, log->end_offset());
  // Every segment, the leader-epoch checkpoint (written unsynced when epoch 1 began) and the directory.
  EXPECT_EQ(work->files.size(), log->partition().segment_count() + 2);
  EXPECT_EQ(std::count_if(work->files.begin(), work->files.end(),
                          [&](const auto& f) { return f->path() == partition_dir(); }),
            1);
  EXPECT_EQ(
      std::count_if(work->files.begin(), work->files.end(),
                    [&](const auto& f) { return f->path() == partition_dir() / "leader-epoch-checkpoint"; }),
      1);
  std::thread syncer([&] {
    for (const auto& f : work->files) EXPECT_TRUE(f->sync().ok()) << f->path();
  });
  syncer.join();
  log->mark_flushed(work->end_offset);
  EXPECT_EQ(log->partition().recovery_point(), log->end_offset());

  auto nothing = log->flush_work();
  ASSERT_TRUE(nothing.ok());
  EXPECT_TRUE(nothing->files.empty());
  // One entry at a time: the active segment alone is handed out, with the directory when the entry rolled.
  bool saw_roll = false;
  bool saw_append = false;
  for (int i = 0; i < 20; ++i) {
    const size_t segments = log->partition().segment_count();
    fill(*log, {1});
    const bool rolled = log->partition().segment_count() > segments;
    auto one = log->flush_work();
    ASSERT_TRUE(one.ok());
    ASSERT_EQ(one->files.size(), rolled ? 2u : 1u);  // after a roll: the new segment and the directory
    EXPECT_EQ(one->files.back()->path() == partition_dir(), rolled);
    for (const auto& f : one->files) EXPECT_TRUE(f->sync().ok());
    log->mark_flushed(one->end_offset);
    (rolled ? saw_roll : saw_append) = true;
  }
  EXPECT_TRUE(saw_roll);
  EXPECT_TRUE(saw_append);
}

TEST_F(partition_raft_log_snapshot_test, write_read_and_latest) {
  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_FALSE(log->latest_snapshot());
  fill(*log, {1, 1, 2, 2, 3});
  EXPECT_TRUE(log->write_snapshot({3, 2}, payload(1)));
  EXPECT_EQ(log->latest_snapshot(), (offset_and_epoch{3, 2}));
  EXPECT_EQ(log->read_snapshot({3, 2}), payload(1));
  EXPECT_FALSE(log->read_snapshot({3, 1}));
  EXPECT_FALSE(log->read_snapshot({4, 2}));
  EXPECT_TRUE(fs::exists(partition_dir() / "00000000000000000003-0000000002.checkpoint"));
  EXPECT_TRUE(files_ending(".part").empty());
  // Entries stay until delete_before.
  EXPECT_EQ(log->start_offset(), 0);
  EXPECT_EQ(log->read(0, 10).size(), 5u);
  // An id whose epoch is not the epoch of the entry before it, or past the log end, is refused.
  EXPECT_FALSE(log->write_snapshot({4, 3}, payload(2)));
  EXPECT_FALSE(log->write_snapshot({6, 3}, payload(2)));
  // The same id again is already there.
  EXPECT_TRUE(log->write_snapshot({3, 2}, payload(9)));
  EXPECT_EQ(log->read_snapshot({3, 2}), payload(1));
  // Newer snapshots: the newest and the one before are kept, older ones go.
  EXPECT_TRUE(log->write_snapshot({4, 2}, payload(3)));
  EXPECT_TRUE(log->write_snapshot({5, 3}, payload(4)));
  EXPECT_EQ(log->latest_snapshot(), (offset_and_epoch{5, 3}));
  EXPECT_EQ(log->snapshots(), (std::vector<offset_and_epoch>{{4, 2}, {5, 3}}));
  EXPECT_EQ(files_ending(".checkpoint"),
            (std::vector<std::string>{"00000000000000000004-0000000002.checkpoint",
                                      "00000000000000000005-0000000003.checkpoint"}));
  EXPECT_FALSE(log->read_snapshot({3, 2}));
  EXPECT_EQ(log->read_snapshot({5, 3}), payload(4));
  // A snapshot older than the latest is refused.
  EXPECT_FALSE(log->write_snapshot({2, 1}, payload(5)));
  // An empty payload is a valid (opaque) snapshot.
  EXPECT_TRUE(log->write_snapshot({5, 3}, {}));
}

// The two halves raft_node uses to keep snapshot I/O off its thread: the file written from anywhere, then
// adopted (checked against the log as write_snapshot does); and FetchSnapshot's ranged reads.
TEST_F(partition_raft_log_snapshot_test, a_file_written_elsewhere_is_adopted_and_read_in_chunks) {
  auto log = open();
  ASSERT_TRUE(log);
  fill(*log, {1, 1, 2, 2, 3});
  const auto bytes = payload(1, 5000);
  ASSERT_TRUE(partition_raft_log::write_snapshot_file_in(partition_dir(), {4, 2}, bytes).ok());
  EXPECT_FALSE(log->latest_snapshot());  // written, not taken yet
  ASSERT_TRUE(log->adopt_snapshot_file({4, 2}));
  EXPECT_EQ(log->latest_snapshot(), (offset_and_epoch{4, 2}));
  EXPECT_EQ(log->read_snapshot({4, 2}), bytes);
  EXPECT_TRUE(files_ending(".part").empty());

  auto first = log->read_snapshot_chunk({4, 2}, 0, 4096);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->size, static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(first->bytes, std::vector<uint8_t>(bytes.begin(), bytes.begin() + 4096));
  auto rest = log->read_snapshot_chunk({4, 2}, 4096, 4096);
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->bytes, std::vector<uint8_t>(bytes.begin() + 4096, bytes.end()));
  auto past = log->read_snapshot_chunk({4, 2}, static_cast<int64_t>(bytes.size()), 4096);
  ASSERT_TRUE(past);
  EXPECT_TRUE(past->bytes.empty());
  EXPECT_EQ(past->size, static_cast<int64_t>(bytes.size()));
  EXPECT_FALSE(log->read_snapshot_chunk({3, 2}, 0, 10));

  // An id the log refuses (the entry before it has another epoch): the file is removed.
  ASSERT_TRUE(partition_raft_log::write_snapshot_file_in(partition_dir(), {5, 2}, payload(2)).ok());
  EXPECT_FALSE(log->adopt_snapshot_file({5, 2}));
  EXPECT_FALSE(fs::exists(partition_dir() / "00000000000000000005-0000000002.checkpoint"));
  EXPECT_EQ(log->latest_snapshot(), (offset_and_epoch{4, 2}));
}

TEST_F(partition_raft_log_snapshot_test, reopen_finds_the_snapshot) {
  {
    auto log = open();
    ASSERT_TRUE(log);
    fill(*log, {1, 1, 2, 2});
    ASSERT_TRUE(log->write_snapshot({2, 1}, payload(1)));
    ASSERT_TRUE(log->write_snapshot({4, 2}, payload(2, 5000)));
    ASSERT_TRUE(log->close().ok());
  }
  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->latest_snapshot(), (offset_and_epoch{4, 2}));
  EXPECT_EQ(log->snapshots(), (std::vector<offset_and_epoch>{{2, 1}, {4, 2}}));
  EXPECT_EQ(log->read_snapshot({4, 2}), payload(2, 5000));
  EXPECT_EQ(log->read_snapshot({2, 1}), payload(1));
  EXPECT_EQ(log->end_offset(), 4);
  EXPECT_EQ(log->last_fetched_epoch(), 2);
}

TEST_F(partition_raft_log_snapshot_test, delete_before_drops_whole_segments_below_the_snapshot) {
  auto log = open_small_segments();
  ASSERT_TRUE(log);
  std::vector<int32_t> epochs;
  for (int i = 0; i < 30; ++i) epochs.push_back(i < 12 ? 1 : 2);
  fill(*log, epochs);
  ASSERT_TRUE(log->flush().ok());
  const size_t segments_before = log->partition().segment_count();
  ASSERT_GT(segments_before, 4u);
  ASSERT_TRUE(log->write_snapshot({20, 2}, payload(1)));
  log->delete_before(20);
  EXPECT_TRUE(log->failure().ok());
  EXPECT_EQ(log->start_offset(), 20);
  EXPECT_LT(log->partition().segment_count(), segments_before);
  EXPECT_EQ(log->end_offset(), 30);
  // Nothing below the start is served; from the start on everything is.
  EXPECT_TRUE(log->read(19, 10).empty());
  auto held = log->read(20, 100);
  ASSERT_EQ(held.size(), 10u);
  EXPECT_EQ(held.front().offset, 20);
  EXPECT_EQ(held.front().epoch, 2);
  EXPECT_EQ(log->last_fetched_epoch(), 2);
  // Epoch 1 ended before the start: the entries are gone, the snapshot at the start answers
  // (KafkaMetadataLog.endOffsetForEpoch).
  EXPECT_EQ(log->end_offset_for_epoch(1), (offset_and_epoch{20, 2}));
  EXPECT_EQ(log->end_offset_for_epoch(2), (offset_and_epoch{30, 2}));
  EXPECT_EQ(log->latest_snapshot(), (offset_and_epoch{20, 2}));
  // Appends continue.
  fill(*log, {3});
  EXPECT_EQ(log->end_offset(), 31);
  ASSERT_TRUE(log->flush().ok());

  // A snapshot at the log end and everything before it deleted: the log holds no entry, the snapshot gives
  // the epoch.
  ASSERT_TRUE(log->write_snapshot({31, 3}, payload(2)));
  log->delete_before(31);
  EXPECT_EQ(log->start_offset(), 31);
  EXPECT_EQ(log->end_offset(), 31);
  EXPECT_EQ(log->last_fetched_epoch(), 3);
  EXPECT_EQ(log->end_offset_for_epoch(3), (offset_and_epoch{31, 3}));
  EXPECT_EQ(log->end_offset_for_epoch(1), (offset_and_epoch{31, 3}));
  EXPECT_EQ(log->snapshots(), (std::vector<offset_and_epoch>{{31, 3}}));  // the one at 20 is below the start
  ASSERT_TRUE(log->close().ok());
  log.reset();

  // Reopened: the log starts at the first kept segment, at or below the snapshot, which is consistent.
  auto reopened = open_small_segments();
  ASSERT_TRUE(reopened);
  EXPECT_TRUE(reopened->failure().ok()) << reopened->failure().message;
  EXPECT_LE(reopened->start_offset(), 31);
  EXPECT_GT(reopened->start_offset(), 0);
  EXPECT_EQ(reopened->end_offset(), 31);
  EXPECT_EQ(reopened->latest_snapshot(), (offset_and_epoch{31, 3}));
  EXPECT_EQ(reopened->last_fetched_epoch(), 3);
}

TEST_F(partition_raft_log_snapshot_test, install_replaces_a_log_with_entries) {
  {
    auto log = open_small_segments();
    ASSERT_TRUE(log);
    fill(*log, {1, 1, 1, 2, 2, 2, 2, 2, 2, 2});
    ASSERT_TRUE(log->write_snapshot({3, 1}, payload(1)));
    ASSERT_TRUE(log->flush().ok());
    ASSERT_TRUE(log->install_snapshot({50, 4}, payload(7, 3000)));
    EXPECT_EQ(log->start_offset(), 50);
    EXPECT_EQ(log->end_offset(), 50);
    EXPECT_EQ(log->last_fetched_epoch(), 4);
    EXPECT_EQ(log->latest_snapshot(), (offset_and_epoch{50, 4}));
    EXPECT_EQ(log->snapshots(), (std::vector<offset_and_epoch>{{50, 4}}));
    EXPECT_EQ(log->read_snapshot({50, 4}), payload(7, 3000));
    EXPECT_FALSE(log->read_snapshot({3, 1}));
    EXPECT_TRUE(log->read(0, 10).empty());
    EXPECT_EQ(log->end_offset_for_epoch(2), (offset_and_epoch{50, 4}));
    EXPECT_EQ(log->end_offset_for_epoch(4), (offset_and_epoch{50, 4}));
    // The log continues after the snapshot.
    const log_entry e{50, 5, entry_type::leader_change, {}};
    log->append(std::span<const log_entry>(&e, 1));
    fill(*log, {5});
    EXPECT_EQ(log->end_offset(), 52);
    EXPECT_EQ(log->last_fetched_epoch(), 5);
    EXPECT_EQ(log->end_offset_for_epoch(4), (offset_and_epoch{50, 4}));
    EXPECT_EQ(log->end_offset_for_epoch(5), (offset_and_epoch{52, 5}));
    ASSERT_TRUE(log->close().ok());
  }
  auto log = open_small_segments();
  ASSERT_TRUE(log);
  EXPECT_TRUE(log->failure().ok()) << log->failure().message;
  EXPECT_EQ(log->start_offset(), 50);
  EXPECT_EQ(log->end_offset(), 52);
  EXPECT_EQ(log->latest_snapshot(), (offset_and_epoch{50, 4}));
  EXPECT_EQ(log->read(50, 10).size(), 2u);
}

// The two halves raft_node uses for a snapshot fetched from the leader: the file written and synced from
// another thread, then installed without any file work on the log's thread; the older snapshot's file is
// deleted through the file work runner (the writing thread), not in place.
TEST_F(partition_raft_log_snapshot_test,
       a_stored_snapshot_is_installed_and_older_files_go_through_the_runner) {
  {
    auto log = open_small_segments();
    ASSERT_TRUE(log);
    std::vector<std::function<void()>> file_work;
    log->set_file_work_runner([&](std::function<void()> work) { file_work.push_back(std::move(work)); });
    fill(*log, {1, 1, 1, 2, 2, 2, 2, 2, 2, 2});
    ASSERT_TRUE(log->write_snapshot({3, 1}, payload(1)));
    ASSERT_TRUE(log->flush().ok());
    std::thread writer([&] {
      ASSERT_TRUE(partition_raft_log::write_snapshot_file_in(log->dir(), {60, 4}, payload(7, 3000)).ok());
    });
    writer.join();
    ASSERT_TRUE(log->install_stored_snapshot({60, 4}));
    EXPECT_EQ(log->start_offset(), 60);
    EXPECT_EQ(log->end_offset(), 60);
    EXPECT_EQ(log->last_fetched_epoch(), 4);
    EXPECT_EQ(log->snapshots(), (std::vector<offset_and_epoch>{{60, 4}}));
    EXPECT_EQ(log->read_snapshot({60, 4}), payload(7, 3000));
    // The older snapshot's file waits for the runner.
    EXPECT_TRUE(std::filesystem::exists(partition_dir() / snapshot_file_name({3, 1})));
    EXPECT_FALSE(file_work.empty());
    for (auto& work : file_work) work();
    EXPECT_FALSE(std::filesystem::exists(partition_dir() / snapshot_file_name({3, 1})));
    const log_entry e{60, 5, entry_type::leader_change, {}};
    log->append(std::span<const log_entry>(&e, 1));
    EXPECT_EQ(log->end_offset(), 61);
    ASSERT_TRUE(log->close().ok());
  }
  auto log = open_small_segments();
  ASSERT_TRUE(log);
  EXPECT_TRUE(log->failure().ok()) << log->failure().message;
  EXPECT_EQ(log->start_offset(), 60);
  EXPECT_EQ(log->end_offset(), 61);
  EXPECT_EQ(log->latest_snapshot(), (offset_and_epoch{60, 4}));
}

TEST_F(partition_raft_log_snapshot_test, a_prepared_install_starts_the_log_with_the_workers_standby_segment) {
  auto worker = std::make_shared<storage::file_worker>();
  {
    auto log = open_small_segments(worker);
    ASSERT_TRUE(log);
    fill(*log, {1, 1, 1, 2});
    ASSERT_TRUE(log->flush().ok());
    const int64_t adopted = log->partition().standby_rolls();
    log->prepare_snapshot_install();
    for (int i = 0; i < 5000 && worker->pending() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(partition_raft_log::write_snapshot_file_in(log->dir(), {50, 3}, payload(5, 500)).ok());
    ASSERT_TRUE(log->install_stored_snapshot({50, 3}));
    EXPECT_EQ(log->partition().standby_rolls(), adopted + 1);  // no segment file made on this thread
    EXPECT_EQ(log->start_offset(), 50);
    EXPECT_EQ(log->end_offset(), 50);
    const log_entry e{50, 4, entry_type::leader_change, {}};
    log->append(std::span<const log_entry>(&e, 1));
    ASSERT_TRUE(log->flush().ok());
    ASSERT_TRUE(log->close().ok());
  }
  worker->stop();
  auto log = open_small_segments();
  ASSERT_TRUE(log);
  EXPECT_TRUE(log->failure().ok()) << log->failure().message;
  EXPECT_EQ(log->start_offset(), 50);
  EXPECT_EQ(log->end_offset(), 51);
  EXPECT_EQ(log->latest_snapshot(), (offset_and_epoch{50, 3}));
}

TEST_F(partition_raft_log_snapshot_test, a_log_behind_the_snapshot_restarts_at_its_end) {
  // A crash after an installed snapshot was stored and before the log was emptied.
  {
    auto log = open();
    ASSERT_TRUE(log);
    fill(*log, {1, 1, 1});
    ASSERT_TRUE(log->close().ok());
  }
  {
    std::ofstream f(partition_dir() / snapshot_file_name({40, 3}), std::ios::binary);
    f << "snapshot";
  }
  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->start_offset(), 40);
  EXPECT_EQ(log->end_offset(), 40);
  EXPECT_EQ(log->last_fetched_epoch(), 3);
  auto bytes = log->read_snapshot({40, 3});
  ASSERT_TRUE(bytes);
  EXPECT_EQ(std::string(bytes->begin(), bytes->end()), "snapshot");
}

TEST_F(partition_raft_log_snapshot_test, garbage_part_files_are_removed_and_ignored) {
  {
    auto log = open();
    ASSERT_TRUE(log);
    fill(*log, {1, 1, 1, 1});
    ASSERT_TRUE(log->write_snapshot({2, 1}, payload(1)));
    ASSERT_TRUE(log->close().ok());
  }
  // An interrupted write of a newer snapshot and a deletion that did not finish.
  {
    std::ofstream f(partition_dir() / (snapshot_file_name({4, 1}) + ".part"), std::ios::binary);
    f << "torn";
  }
  {
    std::ofstream f(partition_dir() / (snapshot_file_name({1, 1}) + ".deleted"), std::ios::binary);
    f << "old";
  }
  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->latest_snapshot(), (offset_and_epoch{2, 1}));
  EXPECT_FALSE(log->read_snapshot({4, 1}));
  EXPECT_TRUE(files_ending(".part").empty());
  EXPECT_TRUE(files_ending(".deleted").empty());
  EXPECT_EQ(log->end_offset(), 4);
}

TEST_F(partition_raft_log_snapshot_test, a_file_with_a_corrupt_snapshot_name_is_ignored) {
  {
    auto log = open();
    ASSERT_TRUE(log);
    fill(*log, {1, 1});
    ASSERT_TRUE(log->close().ok());
  }
  for (const char* name : {"123-1.checkpoint", "0000000000000000000x-0000000001.checkpoint",
                           "00000000000000000001-00000000001.checkpoint"}) {
    std::ofstream f(partition_dir() / name, std::ios::binary);
    f << "junk";
  }
  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_FALSE(log->latest_snapshot());
  EXPECT_EQ(log->end_offset(), 2);
  EXPECT_TRUE(fs::exists(partition_dir() / "123-1.checkpoint"));  // not ours to delete
}

TEST_F(partition_raft_log_snapshot_test, a_log_start_not_covered_by_a_snapshot_is_refused) {
  {
    auto log = open_small_segments();
    ASSERT_TRUE(log);
    std::vector<int32_t> epochs(20, 1);
    fill(*log, epochs);
    ASSERT_TRUE(log->write_snapshot({15, 1}, payload(1)));
    log->delete_before(15);
    ASSERT_GT(log->partition().segment_count(), 0u);
    ASSERT_TRUE(log->close().ok());
  }
  fs::remove(partition_dir() / snapshot_file_name({15, 1}));
  auto log = partition_raft_log::open(_dir);
  EXPECT_FALSE(log.ok());
}

}  // namespace
}  // namespace mala::raft
