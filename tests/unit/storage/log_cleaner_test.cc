// One cleaning round end to end on a real partition log: snapshot on the "shard", clean_log on another
// thread, swap back; the log then reads the compacted view (latest value per key, offsets increasing, the
// active segment untouched), its files reload after a restart, tombstones go after their delete horizon, a
// producer's last batch stays, and a round is discarded when the log changed under it.
#include "mala/storage/log_cleaner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "mala/protocol/record_batch.h"
#include "mala/storage/partition_log.h"

namespace mala::storage {
namespace {

namespace fs = std::filesystem;
namespace proto = mala::protocol;

constexpr int64_t t0 = 1'700'000'000'000;
constexpr int64_t day = 86'400'000;

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

struct kv {
  std::string key;
  std::optional<std::string> value;  // nullopt: a tombstone
};

struct read_record {
  int64_t offset;
  std::string key;
  std::optional<std::string> value;
};

class log_cleaner_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = fs::temp_directory_path() / ("mala-log-cleaner-test-" + std::to_string(std::random_device{}()));
    _dir = _root / "positions-0";
    fs::create_directories(_root);
    _config.cleanup = cleanup_policy::compact;
    _config.segment_bytes = 600;  // a few batches per segment
    _config.file_delete_delay_ms = 0;
    _config.min_cleanable_dirty_ratio = 0.01;
    _log = open();
  }
  void TearDown() override {
    _log.reset();
    fs::remove_all(_root);
  }

  std::unique_ptr<partition_log> open() {
    log_open_options o;
    o.clean_shutdown = true;
    o.clock_ms = [this] { return _now; };
    auto log = partition_log::open(_dir, {"positions", 0}, _config, std::move(o));
    EXPECT_TRUE(log.ok()) << (log.ok() ? "" : log.error().message);
    return log.ok() ? std::move(*log) : nullptr;
  }

  void append(const std::vector<kv>& records, int64_t producer_id = -1) {
    proto::record_batch_builder b;
    if (producer_id >= 0) b.producer(producer_id, 0, _sequence);
    for (const auto& r : records) {
      std::optional<std::span<const uint8_t>> v;
      if (r.value) v = bytes_of(*r.value);
      b.add(_now, bytes_of(r.key), v);
    }
    _sequence += static_cast<int32_t>(records.size());
    auto bytes = b.build();
    auto appended = _log->append_as_leader(bytes, 0);
    ASSERT_TRUE(appended.ok()) << appended.error().message;
  }

  // Updates of `keys` keys, `rounds` times each, one batch per round of 5 keys.
  void write_updates(int keys, int rounds) {
    for (int round = 0; round < rounds; ++round) {
      for (int k = 0; k < keys; k += 5) {
        std::vector<kv> batch;
        for (int j = k; j < std::min(keys, k + 5); ++j)
          batch.push_back({"bus-" + std::to_string(j), "pos-" + std::to_string(round)});
        append(batch);
      }
    }
  }

  std::vector<read_record> read_all(const partition_log& log) {
    std::vector<read_record> out;
    int64_t offset = log.log_start_offset();
    while (offset < log.log_end_offset()) {
      auto r = log.read(offset, 1 << 20, log.log_end_offset(), true);
      EXPECT_TRUE(r.ok());
      if (!r.ok() || !r->data) break;
      auto bytes = r->data->file->read(r->data->position, r->data->size);
      EXPECT_TRUE(bytes.ok());
      proto::batch_splitter splitter(*bytes);
      int64_t next = offset;
      while (auto b = splitter.next()) {
        proto::record_batch_view view(*b);
        EXPECT_TRUE(view.ok());
        std::vector<uint8_t> buffer;
        auto reader = view.records(buffer);
        while (auto rec = reader.next()) {
          read_record x{view.offset_of(*rec), std::string(rec->key->begin(), rec->key->end()), std::nullopt};
          if (rec->value) x.value = std::string(rec->value->begin(), rec->value->end());
          out.push_back(x);
        }
        next = view.header().next_offset();
      }
      if (next == offset) break;
      offset = next;
    }
    return out;
  }

  // A whole round: snapshot here, clean on another thread, swap here.
  result<cleaning_stats> clean(std::optional<int64_t> checkpoint = std::nullopt,
                               std::vector<int64_t> producer_last_offsets = {}) {
    auto snapshot = _log->snapshot_for_cleaning(checkpoint, _log->log_end_offset(), _now,
                                                std::move(producer_last_offsets));
    if (!snapshot) return status::error(error_code::none, "nothing to clean");
    result<cleaned_log> cleaned = status::error(error_code::unknown_server_error, "not run");
    std::thread worker([&] { cleaned = clean_log(*snapshot, _now, _map, _buffers); });
    worker.join();
    if (!cleaned) return cleaned.error();
    _next_dirty = cleaned->next_dirty_offset;
    if (auto st = _log->replace_with_cleaned(*cleaned); !st.ok()) return st;
    return cleaned->stats;
  }

  bool no_cleaner_files_left() const {
    for (const auto& e : fs::directory_iterator(_dir)) {
      const std::string name = e.path().filename().string();
      if (name.ends_with(".cleaned") || name.ends_with(".swap")) return false;
    }
    return true;
  }

  fs::path _root;
  fs::path _dir;
  log_config _config;
  int64_t _now = t0;
  int32_t _sequence = 0;
  std::unique_ptr<partition_log> _log;
  key_offset_map _map{1 << 20};
  filter_buffers _buffers;
  int64_t _next_dirty = -1;
};

TEST_F(log_cleaner_test, a_round_leaves_the_latest_value_of_every_key_below_the_active_segment) {
  write_updates(20, 6);  // 120 records, 24 batches
  const int64_t end = _log->log_end_offset();
  const size_t segments_before = _log->segment_count();
  ASSERT_GT(segments_before, 4u);
  // Groups of cleaned segments up to segment.bytes merge into one (the active segment keeps rolling at 600).
  _config.segment_bytes = 1 << 20;
  _log->update_config(_config);
  auto stats = clean();
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_GT(stats->records_removed, 0);
  EXPECT_EQ(_log->segment_count(), 2u);  // the closed segments merged into one, and the active one
  EXPECT_EQ(_log->log_end_offset(), end);
  EXPECT_TRUE(no_cleaner_files_left());

  auto records = read_all(*_log);
  std::map<std::string, std::string> latest;
  int64_t previous = -1;
  std::map<std::string, int> seen;
  for (const auto& r : records) {
    EXPECT_GT(r.offset, previous);
    previous = r.offset;
    latest[r.key] = *r.value;
    ++seen[r.key];
  }
  ASSERT_EQ(latest.size(), 20u);
  for (const auto& [key, value] : latest) EXPECT_EQ(value, "pos-5") << key;
  // Below the dirty end each key appears once, with the latest value the round saw.
  std::map<std::string, int> cleaned_copies;
  for (const auto& r : records) {
    if (r.offset < _next_dirty) ++cleaned_copies[r.key];
  }
  EXPECT_EQ(cleaned_copies.size(), 20u);
  for (const auto& [key, copies] : cleaned_copies) EXPECT_EQ(copies, 1) << key;

  // The swapped files are what a restart loads.
  _log.reset();
  _log = open();
  auto reloaded = read_all(*_log);
  ASSERT_EQ(reloaded.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(reloaded[i].offset, records[i].offset);
    EXPECT_EQ(reloaded[i].value, records[i].value);
  }
}

TEST_F(log_cleaner_test, a_tombstone_stays_until_its_delete_horizon_then_goes) {
  _config.delete_retention_ms = day;
  _log->update_config(_config);
  write_updates(10, 3);
  append({{"bus-3", std::nullopt}});
  write_updates(10, 3);  // pushes the tombstone out of the active segment
  // bus-3 is rewritten after its tombstone by write_updates; delete it once more at the end of clean data.
  append({{"bus-7", std::nullopt}});
  write_updates(5, 4);  // keys 0..4 only: bus-7's tombstone is the latest record of its key

  ASSERT_TRUE(clean().ok());
  auto has = [&](const std::string& key, bool tombstone) {
    for (const auto& r : read_all(*_log))
      if (r.key == key && r.offset < _next_dirty && r.value.has_value() != tombstone) return true;
    return false;
  };
  EXPECT_TRUE(has("bus-7", true));    // kept, with a horizon a day away
  EXPECT_FALSE(has("bus-7", false));  // its older values are gone
  EXPECT_FALSE(has("bus-3", true));   // superseded by later updates

  _now += day + 1;
  write_updates(5, 4);
  ASSERT_TRUE(clean(_next_dirty).ok());
  EXPECT_FALSE(has("bus-7", true));  // past its horizon
}

TEST_F(log_cleaner_test, a_producers_last_batch_stays_even_when_all_its_records_are_superseded) {
  append({{"bus-1", "a"}}, /*producer_id=*/77);
  const int64_t producer_last = _log->log_end_offset() - 1;
  write_updates(10, 8);
  ASSERT_TRUE(clean(std::nullopt, {producer_last}).ok());
  auto snapshot = _log->read(0, 1 << 20, _log->log_end_offset(), true);
  ASSERT_TRUE(snapshot.ok() && snapshot->data);
  auto bytes = snapshot->data->file->read(snapshot->data->position, snapshot->data->size);
  ASSERT_TRUE(bytes.ok());
  proto::batch_splitter splitter(*bytes);
  auto first = splitter.next();
  ASSERT_TRUE(first.has_value());
  auto h = proto::parse_batch_header(*first);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->producer_id, 77);
  EXPECT_EQ(h->base_offset, producer_last);
  EXPECT_EQ(h->record_count, 0);  // emptied: the value was superseded, the producer's fields live on
}

TEST_F(log_cleaner_test, a_round_is_discarded_when_the_log_changed_under_it) {
  write_updates(20, 6);
  auto snapshot = _log->snapshot_for_cleaning(std::nullopt, _log->log_end_offset(), _now, {});
  ASSERT_TRUE(snapshot.has_value());
  auto cleaned = clean_log(*snapshot, _now, _map, _buffers);
  ASSERT_TRUE(cleaned.ok()) << cleaned.error().message;
  ASSERT_FALSE(cleaned->groups.empty());
  // A follower truncation into the cleaned range.
  ASSERT_TRUE(_log->truncate_to(snapshot->segments[1].base_offset + 1).ok());
  const auto before = read_all(*_log);
  auto st = _log->replace_with_cleaned(*cleaned);
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(_log->is_offline());
  EXPECT_TRUE(no_cleaner_files_left());
  const auto after = read_all(*_log);
  EXPECT_EQ(after.size(), before.size());
}

TEST_F(log_cleaner_test, a_corrupt_batch_stops_the_round_without_touching_the_log) {
  write_updates(20, 6);
  auto snapshot = _log->snapshot_for_cleaning(std::nullopt, _log->log_end_offset(), _now, {});
  ASSERT_TRUE(snapshot.has_value());
  // Flip a byte inside the second segment's first batch records (CRC-covered).
  const auto& victim = snapshot->segments[1];
  {
    std::fstream f(victim.file->path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(70);
    f.put('\x7f');
  }
  auto cleaned = clean_log(*snapshot, _now, _map, _buffers);
  ASSERT_FALSE(cleaned.ok());
  EXPECT_EQ(cleaned.error().code, error_code::corrupt_message);
  EXPECT_TRUE(no_cleaner_files_left());
}

TEST_F(log_cleaner_test, a_map_smaller_than_the_dirty_keys_cleans_in_several_rounds) {
  key_offset_map small(key_offset_map::bytes_per_entry * 12, 1.0);  // 12 keys a round
  write_updates(40, 4);
  std::optional<int64_t> checkpoint;
  int rounds = 0;
  for (; rounds < 20; ++rounds) {
    auto snapshot = _log->snapshot_for_cleaning(checkpoint, _log->log_end_offset(), _now, {});
    if (!snapshot) break;
    auto cleaned = clean_log(*snapshot, _now, small, _buffers);
    ASSERT_TRUE(cleaned.ok()) << cleaned.error().message;
    EXPECT_LE(small.size(), 12u);
    checkpoint = cleaned->next_dirty_offset;
    ASSERT_TRUE(_log->replace_with_cleaned(*cleaned).ok());
  }
  EXPECT_GT(rounds, 1);
  std::map<std::string, std::string> latest;
  for (const auto& r : read_all(*_log)) latest[r.key] = *r.value;
  ASSERT_EQ(latest.size(), 40u);
  for (const auto& [key, value] : latest) EXPECT_EQ(value, "pos-3") << key;
}

}  // namespace
}  // namespace mala::storage
