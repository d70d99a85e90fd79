// One cleaning round end to end on a real partition log: snapshot on the "shard", clean_log on another
// thread, swap back; the log then reads the compacted view (latest value per key, offsets increasing, the
// active segment untouched), its files reload after a restart, tombstones go after their delete horizon, a
// producer's last batch stays, and a round is discarded when the log changed under it. Transactions: aborted
// data goes, markers go once no data of theirs is left and their delete horizon passed, an ABORT marker that
// stays keeps its .txnindex entry, nothing past the last stable offset is cleaned, and a read_committed
// reader sees the latest committed value of every key before and after cleaning.
#include "mala/storage/log_cleaner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "mala/protocol/record_batch.h"
#include "mala/storage/file_worker.h"
#include "mala/storage/partition_log.h"
#include "mala/storage/txn_marker.h"

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
    o.worker = _worker;
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

  // Calls fn(view) for every batch of the log, in order.
  template <typename Fn>
  void for_each_batch(const partition_log& log, Fn fn) {
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
        fn(view, *b);
        next = view.header().next_offset();
      }
      if (next == offset) break;
      offset = next;
    }
  }

  // Every record (control records included, with their marker key).
  std::vector<read_record> read_all(const partition_log& log) {
    std::vector<read_record> out;
    for_each_batch(log, [&](proto::record_batch_view& view, std::span<const uint8_t>) {
      std::vector<uint8_t> buffer;
      auto reader = view.records(buffer);
      while (auto rec = reader.next()) {
        read_record x{view.offset_of(*rec), std::string(rec->key->begin(), rec->key->end()), std::nullopt};
        if (rec->value) x.value = std::string(rec->value->begin(), rec->value->end());
        out.push_back(x);
      }
    });
    return out;
  }

  std::vector<proto::record_batch_header> headers() {
    std::vector<proto::record_batch_header> out;
    for_each_batch(*_log, [&](proto::record_batch_view& view, std::span<const uint8_t>) {
      out.push_back(view.header());
    });
    return out;
  }

  // The latest value of every key as a read_committed consumer sees the log (the Java consumer's rule: the
  // fetch's aborted transactions make their producer's transactional batches invisible from their first
  // offset until the producer's ABORT marker; control batches are never returned).
  std::map<std::string, std::optional<std::string>> read_committed() {
    std::map<std::string, std::optional<std::string>> latest;
    auto aborted = _log->collect_aborted_transactions(_log->log_start_offset(), _log->log_end_offset());
    EXPECT_TRUE(aborted.ok());
    if (!aborted.ok()) return latest;
    std::sort(aborted->begin(), aborted->end(),
              [](const aborted_txn& a, const aborted_txn& b) { return a.first_offset < b.first_offset; });
    size_t next = 0;
    std::set<int64_t> aborting;
    for_each_batch(*_log, [&](proto::record_batch_view& view, std::span<const uint8_t> bytes) {
      const auto& h = view.header();
      if (h.is_control()) {
        auto marker = decode_txn_marker_batch(bytes);
        if (marker && !marker->is_commit()) aborting.erase(h.producer_id);
        return;
      }
      if (h.is_transactional()) {
        for (; next < aborted->size() && (*aborted)[next].first_offset <= h.last_offset(); ++next)
          aborting.insert((*aborted)[next].producer_id);
        if (aborting.contains(h.producer_id)) return;
      }
      std::vector<uint8_t> buffer;
      auto reader = view.records(buffer);
      while (auto rec = reader.next()) {
        std::optional<std::string> value;
        if (rec->value) value = std::string(rec->value->begin(), rec->value->end());
        latest[std::string(rec->key->begin(), rec->key->end())] = value;
      }
    });
    return latest;
  }

  // A transactional batch of `producer_id`; its base offset.
  int64_t append_txn(int64_t producer_id, const std::vector<kv>& records, int16_t epoch = 0) {
    proto::record_batch_builder b;
    int32_t& sequence = _sequences[producer_id];
    b.producer(producer_id, epoch, sequence).transactional();
    for (const auto& r : records) {
      std::optional<std::span<const uint8_t>> v;
      if (r.value) v = bytes_of(*r.value);
      b.add(_now, bytes_of(r.key), v);
    }
    sequence += static_cast<int32_t>(records.size());
    auto bytes = b.build();
    auto appended = _log->append_as_leader(bytes, 0);
    EXPECT_TRUE(appended.ok()) << appended.error().message;
    return appended.ok() ? appended->first_offset : -1;
  }

  // Ends the transaction of `producer_id` that started at `first_offset` with a marker (as a partition leader
  // does: an abort also goes to the .txnindex); the marker's offset.
  int64_t end_txn(int64_t producer_id, bool commit, int64_t first_offset, int16_t epoch = 0) {
    auto bytes = encode_txn_marker_batch({.producer_id = producer_id,
                                          .producer_epoch = epoch,
                                          .type = commit ? txn_marker_type::commit : txn_marker_type::abort,
                                          .coordinator_epoch = 0,
                                          .timestamp = _now});
    auto appended = _log->append_as_leader(bytes, 0);
    EXPECT_TRUE(appended.ok()) << appended.error().message;
    if (!appended.ok()) return -1;
    const int64_t offset = appended->first_offset;
    if (!commit) {
      EXPECT_TRUE(_log->append_aborted_txn({producer_id, first_offset, offset, offset + 1}).ok());
    }
    return offset;
  }

  // The control batches of `producer_id` below the dirty end of the last round.
  std::vector<proto::record_batch_header> markers_of(int64_t producer_id) {
    std::vector<proto::record_batch_header> out;
    for (const auto& h : headers()) {
      if (h.is_control() && h.producer_id == producer_id && h.base_offset < _next_dirty) out.push_back(h);
    }
    return out;
  }

  // A whole round: snapshot here, clean on another thread, swap here.
  result<cleaning_stats> clean(std::optional<int64_t> checkpoint = std::nullopt,
                               std::vector<int64_t> producer_last_offsets = {},
                               std::optional<int64_t> last_stable_offset = std::nullopt) {
    auto snapshot =
        _log->snapshot_for_cleaning(checkpoint, last_stable_offset.value_or(_log->log_end_offset()), _now,
                                    std::move(producer_last_offsets));
    if (!snapshot) return status::error(error_code::none, "nothing to clean");
    snapshot->producers_ending_with_marker = _ending_with_marker;
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

  std::vector<std::string> files_ending_with(std::string_view suffix) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(_dir)) {
      const std::string name = e.path().filename().string();
      if (name.ends_with(suffix)) out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path _root;
  fs::path _dir;
  log_config _config;
  std::shared_ptr<file_worker> _worker;  // none unless a test sets one before open()
  int64_t _now = t0;
  int32_t _sequence = 0;
  std::unique_ptr<partition_log> _log;
  key_offset_map _map{1 << 20};
  filter_buffers _buffers;
  int64_t _next_dirty = -1;
  std::map<int64_t, int32_t> _sequences;  // of transactional producers
  std::vector<producer_marker_epoch> _ending_with_marker;
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
  // The refused groups are left to the caller, which deletes them off the shard.
  EXPECT_FALSE(cleaned->groups.empty());
  EXPECT_FALSE(no_cleaner_files_left());
  discard_cleaned(*cleaned);
  EXPECT_TRUE(no_cleaner_files_left());
  const auto after = read_all(*_log);
  EXPECT_EQ(after.size(), before.size());
}

bool wait_until_idle(const file_worker& worker) {
  for (int i = 0; i < 1000 && worker.pending() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return worker.pending() == 0;
}

TEST_F(log_cleaner_test, with_a_file_worker_the_swap_changes_the_log_at_once_and_renames_off_the_shard) {
  _log.reset();
  _worker = std::make_shared<file_worker>();
  _log = open();
  write_updates(20, 6);
  const auto before = read_all(*_log);
  auto round = [&]() -> result<cleaned_log> {
    auto snapshot = _log->snapshot_for_cleaning(std::nullopt, _log->log_end_offset(), _now, {});
    if (!snapshot) return status::error(error_code::none, "nothing to clean");
    return clean_log(*snapshot, _now, _map, _buffers);
  };
  // The worker held up, so that the renames wait.
  std::promise<void> release;
  auto hold = [&] {
    release = {};
    _worker->post([f = release.get_future().share()] { f.wait(); });
  };

  // 1. The shard's swap renames nothing: the log has the new segments in memory, the files keep their names.
  hold();
  auto cleaned = round();
  ASSERT_TRUE(cleaned.ok()) << cleaned.error().message;
  const auto files_cleaned = files_ending_with(".log.cleaned");
  ASSERT_FALSE(files_cleaned.empty());
  ASSERT_TRUE(_log->replace_with_cleaned(*cleaned).ok());
  EXPECT_EQ(cleaned->swap_renames.size(), files_cleaned.size());
  EXPECT_EQ(files_ending_with(".log.cleaned"), files_cleaned);
  EXPECT_TRUE(files_ending_with(".deleted").empty());
  // 2. The caller's thread runs them: the new segments under their final names, the old ones .deleted.
  std::thread caller([&] {
    for (auto& renames : cleaned->swap_renames) EXPECT_TRUE(renames->finish().ok());
  });
  caller.join();
  EXPECT_TRUE(no_cleaner_files_left());
  EXPECT_FALSE(files_ending_with(".log.deleted").empty());
  const auto after = read_all(*_log);
  EXPECT_LT(after.size(), before.size());
  release.set_value();
  ASSERT_TRUE(wait_until_idle(*_worker));

  // 3. A segment that needs its files by name before anyone ran the renames runs them itself, in order:
  // a read opens a new segment's .log (the cleaner released its descriptor). Segments left empty by the
  // round are not opened by a read.
  write_updates(20, 3);
  hold();
  cleaned = round();
  ASSERT_TRUE(cleaned.ok()) << cleaned.error().message;
  ASSERT_TRUE(_log->replace_with_cleaned(*cleaned).ok());
  const auto waiting = files_ending_with(".log.cleaned");
  EXPECT_EQ(waiting.size(), cleaned->swap_renames.size());
  const auto compacted = read_all(*_log);
  EXPECT_LT(files_ending_with(".log.cleaned").size(), waiting.size());
  EXPECT_TRUE(files_ending_with(".swap").empty());
  for (auto& renames : cleaned->swap_renames) EXPECT_TRUE(renames->finish().ok());
  release.set_value();
  ASSERT_TRUE(wait_until_idle(*_worker));

  // What a restart loads is the same log.
  _log.reset();
  _log = open();
  auto reloaded = read_all(*_log);
  ASSERT_EQ(reloaded.size(), compacted.size());
  for (size_t i = 0; i < reloaded.size(); ++i) {
    EXPECT_EQ(reloaded[i].offset, compacted[i].offset);
    EXPECT_EQ(reloaded[i].value, compacted[i].value);
  }
}

TEST_F(log_cleaner_test, a_corrupt_batch_stops_the_round_without_touching_the_log) {
  write_updates(20, 6);
  auto snapshot = _log->snapshot_for_cleaning(std::nullopt, _log->log_end_offset(), _now, {});
  ASSERT_TRUE(snapshot.has_value());
  // Flip a byte inside the second segment's first batch records (CRC-covered).
  const auto& victim = snapshot->segments[1];
  {
    std::fstream f(victim.path, std::ios::in | std::ios::out | std::ios::binary);
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

// Only the keys a test wrote in transactions (k*), as a read_committed reader sees them.
std::map<std::string, std::optional<std::string>> only_txn_keys(
    const std::map<std::string, std::optional<std::string>>& all) {
  std::map<std::string, std::optional<std::string>> out;
  for (const auto& [key, value] : all) {
    if (key.starts_with("k")) out[key] = value;
  }
  return out;
}

TEST_F(log_cleaner_test, aborted_data_goes_and_read_committed_sees_the_latest_committed_values) {
  _config.delete_retention_ms = day;
  _log->update_config(_config);
  const int64_t first = append_txn(1, {{"k0", "c1"}, {"k1", "c1"}, {"k2", "c1"}});
  end_txn(1, true, first);
  // Producer 2 overwrites committed keys, in two batches, and aborts.
  const int64_t aborted = append_txn(2, {{"k0", "a2"}, {"k1", "a2"}});
  append_txn(2, {{"k2", "a2"}});
  end_txn(2, false, aborted);
  const int64_t second = append_txn(1, {{"k1", "c3"}});
  end_txn(1, true, second);
  // Producer 3 commits k3, which a plain write then supersedes: its marker has no data left after a round.
  const int64_t third = append_txn(3, {{"k3", "c4"}});
  end_txn(3, true, third);
  append({{"k3", "plain"}});
  write_updates(10, 6);  // pushes it all out of the active segment

  const std::map<std::string, std::optional<std::string>> committed{
      {"k0", "c1"}, {"k1", "c3"}, {"k2", "c1"}, {"k3", "plain"}};
  ASSERT_EQ(only_txn_keys(read_committed()), committed);

  ASSERT_TRUE(clean().ok());
  EXPECT_EQ(only_txn_keys(read_committed()), committed);
  for (const auto& r : read_all(*_log)) EXPECT_NE(r.value, std::optional<std::string>("a2")) << r.offset;
  // This round saw the aborted data: the ABORT marker stays, listed in the .txnindex. The markers of
  // producers 1 and 3 stay too (this round saw their data).
  ASSERT_EQ(markers_of(2).size(), 1u);
  EXPECT_FALSE(markers_of(2)[0].has_delete_horizon());
  auto listed = _log->collect_aborted_transactions(0, _log->log_end_offset());
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].producer_id, 2);
  EXPECT_EQ((*listed)[0].first_offset, aborted);
  EXPECT_EQ(markers_of(1).size(), 2u);
  EXPECT_EQ(markers_of(3).size(), 1u);

  // The next round finds no data of producer 2's or producer 3's transaction: their markers get a delete
  // horizon a day away and stay until then; the aborted transaction is no longer listed.
  write_updates(10, 3);
  ASSERT_TRUE(clean(_next_dirty).ok());
  ASSERT_EQ(markers_of(2).size(), 1u);
  EXPECT_TRUE(markers_of(2)[0].has_delete_horizon());
  EXPECT_EQ(markers_of(2)[0].base_timestamp, _now + day);
  ASSERT_EQ(markers_of(3).size(), 1u);
  EXPECT_TRUE(markers_of(3)[0].has_delete_horizon());
  listed = _log->collect_aborted_transactions(0, _log->log_end_offset());
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  EXPECT_EQ(only_txn_keys(read_committed()), committed);

  _now += day / 2;  // before the horizon
  write_updates(10, 3);
  ASSERT_TRUE(clean(_next_dirty).ok());
  EXPECT_EQ(markers_of(2).size(), 1u);
  EXPECT_EQ(markers_of(3).size(), 1u);

  _now += day;  // past it
  write_updates(10, 3);
  ASSERT_TRUE(clean(_next_dirty).ok());
  EXPECT_TRUE(markers_of(2).empty());
  EXPECT_TRUE(markers_of(3).empty());
  // Producer 1's committed values are still in the log: both its markers stay.
  EXPECT_EQ(markers_of(1).size(), 2u);
  EXPECT_EQ(only_txn_keys(read_committed()), committed);
}

TEST_F(log_cleaner_test, the_snapshot_reads_no_file_on_the_shard_and_the_cleaner_thread_finds_the_aborts) {
  const int64_t aborted = append_txn(2, {{"k0", "a2"}, {"k1", "a2"}});
  end_txn(2, false, aborted);
  write_updates(10, 6);
  // After a restart the .txnindex entries were read when the log opened: they travel with the snapshot.
  _log.reset();
  _log = open();
  auto snapshot = _log->snapshot_for_cleaning(std::nullopt, _log->log_end_offset(), _now, {});
  ASSERT_TRUE(snapshot.has_value());
  EXPECT_TRUE(snapshot->aborted_txns.empty());
  ASSERT_FALSE(snapshot->txn_indexes.empty());
  for (const auto& index : snapshot->txn_indexes) EXPECT_TRUE(index.entries.has_value()) << index.path;
  // An index the log could not read when it opened travels as its path: the cleaner thread reads the file.
  auto by_path = *snapshot;
  for (auto& index : by_path.txn_indexes) index.entries.reset();
  for (auto* s : {&*snapshot, &by_path}) {
    ASSERT_TRUE(prepare_snapshot_files(*s).ok());
    ASSERT_EQ(s->aborted_txns.size(), 1u);
    EXPECT_EQ(s->aborted_txns[0].producer_id, 2);
    EXPECT_EQ(s->aborted_txns[0].first_offset, aborted);
    for (const auto& segment : s->segments) EXPECT_NE(segment.file, nullptr);
  }
  auto cleaned = clean_log(*snapshot, _now, _map, _buffers);
  ASSERT_TRUE(cleaned.ok()) << cleaned.error().message;
  ASSERT_TRUE(_log->replace_with_cleaned(*cleaned).ok());
  for (const auto& r : read_all(*_log)) EXPECT_NE(r.value, std::optional<std::string>("a2")) << r.offset;
}

TEST_F(log_cleaner_test, an_abort_marker_stays_with_its_index_entry_in_a_group_spanning_segments) {
  const int64_t aborted = append_txn(2, {{"k0", "a2"}, {"k1", "a2"}});
  write_updates(10, 3);  // the abort marker lands segments later
  const int64_t marker = end_txn(2, false, aborted);
  ASSERT_LT(_log->segment_count(), 100u);
  write_updates(10, 6);
  const size_t segments_before = _log->segment_count();
  ASSERT_GT(segments_before, 4u);
  _config.segment_bytes = 1 << 20;  // the closed segments clean into one
  _log->update_config(_config);
  ASSERT_TRUE(clean().ok());
  ASSERT_EQ(_log->segment_count(), 2u);
  for (const auto& r : read_all(*_log)) EXPECT_NE(r.value, std::optional<std::string>("a2")) << r.offset;
  ASSERT_EQ(markers_of(2).size(), 1u);
  EXPECT_EQ(markers_of(2)[0].base_offset, marker);
  const aborted_txn expected{2, aborted, marker, marker + 1};
  auto listed = _log->collect_aborted_transactions(0, _log->log_end_offset());
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0], expected);
  // In the cleaned segment's file, and so after a restart.
  EXPECT_EQ(fs::file_size(_dir / "00000000000000000000.txnindex"), aborted_txn_entry_size);
  _log.reset();
  _log = open();
  listed = _log->collect_aborted_transactions(0, _log->log_end_offset());
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0], expected);
}

TEST_F(log_cleaner_test, nothing_at_or_past_the_last_stable_offset_is_cleaned) {
  write_updates(10, 3);
  const int64_t open_txn = append_txn(4, {{"bus-1", "open"}});  // no marker yet: undecided
  write_updates(10, 6);
  const auto before = read_all(*_log);
  ASSERT_TRUE(clean(std::nullopt, {}, open_txn).ok());
  EXPECT_LE(_next_dirty, open_txn);
  // Every record from the segment holding the open transaction on is as it was.
  std::vector<read_record> kept_before;
  std::vector<read_record> kept_after;
  for (const auto& r : before)
    if (r.offset >= _next_dirty) kept_before.push_back(r);
  for (const auto& r : read_all(*_log))
    if (r.offset >= _next_dirty) kept_after.push_back(r);
  ASSERT_EQ(kept_after.size(), kept_before.size());
  for (size_t i = 0; i < kept_before.size(); ++i) {
    EXPECT_EQ(kept_after[i].offset, kept_before[i].offset);
    EXPECT_EQ(kept_after[i].value, kept_before[i].value);
  }
  bool open_record_kept = false;
  for (const auto& r : read_all(*_log)) open_record_kept |= r.offset == open_txn && r.value == "open";
  EXPECT_TRUE(open_record_kept);
}

TEST_F(log_cleaner_test, a_producers_last_marker_stays_as_an_empty_batch) {
  _config.delete_retention_ms = 0;
  _log->update_config(_config);
  // Transactions v2: the marker bumps the epoch, so the producer's last entry is the marker.
  const int64_t first = append_txn(5, {{"k0", "c1"}});
  const int64_t marker = end_txn(5, true, first, /*epoch=*/1);
  append_txn(6, {{"k1", "c1"}});
  const int64_t other = end_txn(6, true, marker + 1);
  write_updates(10, 4);
  _ending_with_marker = {{5, 1}, {6, 1}};  // producer 6 went on to another epoch: its marker is not its last
  append({{"k0", "plain"}, {"k1", "plain"}});
  write_updates(10, 4);
  for (int round = 0; round < 3; ++round) {
    _now += 1000;
    write_updates(10, 2);
    ASSERT_TRUE(clean(round == 0 ? std::nullopt : std::optional<int64_t>(_next_dirty)).ok());
  }
  ASSERT_EQ(markers_of(5).size(), 1u);
  EXPECT_EQ(markers_of(5)[0].base_offset, marker);
  EXPECT_EQ(markers_of(5)[0].record_count, 0);
  EXPECT_TRUE(markers_of(6).empty()) << other;
}

}  // namespace
}  // namespace mala::storage
