#include "mala/storage/partition_log.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "mala/protocol/record_batch.h"
#include "mala/storage/checkpoint_file.h"

namespace mala::storage {
namespace {

namespace fs = std::filesystem;
namespace proto = mala::protocol;

constexpr int64_t start_ms = 1'700'000'000'000;

// A batch of `records` records with timestamps ts, ts+1, ... (or the given list) and `value_size`-byte
// values.
std::vector<uint8_t> make_batch(int records, int64_t ts = start_ms, size_t value_size = 10,
                                std::vector<int64_t> timestamps = {}) {
  proto::record_batch_builder builder;
  std::string value(value_size, 'v');
  for (int r = 0; r < records; ++r) {
    int64_t t = timestamps.empty() ? ts + r : timestamps[static_cast<size_t>(r)];
    builder.add(t, std::nullopt,
                std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
  }
  return builder.build();
}

std::vector<uint8_t> concat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

class partition_log_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = fs::temp_directory_path() / ("mala-partition-log-test-" + std::to_string(std::random_device{}()));
    _dir = _root / "orders-0";
    fs::create_directories(_root);
    _config.file_delete_delay_ms = 1000;
  }
  void TearDown() override { fs::remove_all(_root); }

  log_open_options options(bool clean = true, int64_t recovery_point = 0) {
    log_open_options o;
    o.clean_shutdown = clean;
    o.recovery_point = recovery_point;
    o.clock_ms = [this] { return _now; };
    return o;
  }

  // A log whose file work goes to `worker` (standby segments, deferred renames and trims).
  std::unique_ptr<partition_log> open_with_worker(std::shared_ptr<file_worker> worker) {
    auto o = options();
    o.worker = std::move(worker);
    return open(std::move(o));
  }

  std::unique_ptr<partition_log> open(log_open_options o) {
    auto log = partition_log::open(_dir, {"orders", 0}, _config, std::move(o));
    EXPECT_TRUE(log.ok()) << (log.ok() ? "" : log.error().message);
    return log.ok() ? std::move(*log) : nullptr;
  }
  std::unique_ptr<partition_log> open() { return open(options()); }

  static append_result append(partition_log& log, std::vector<uint8_t> bytes, int32_t epoch = 0) {
    auto r = log.append_as_leader(bytes, epoch);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : append_result{};
  }

  // The batches of a read, parsed back (each must still pass the CRC check).
  static std::vector<proto::record_batch_header> batches_of(const read_result& r) {
    std::vector<proto::record_batch_header> out;
    if (!r.data) return out;
    auto bytes = r.data->file->read(r.data->position, r.data->size);
    EXPECT_TRUE(bytes.ok());
    if (!bytes.ok()) return out;
    proto::batch_splitter splitter(*bytes);
    while (auto b = splitter.next()) {
      EXPECT_EQ(proto::validate_batch(*b), proto::batch_status::ok);
      out.push_back(*proto::parse_batch_header(*b));
    }
    EXPECT_TRUE(splitter.ok());
    return out;
  }

  read_result read_ok(const partition_log& log, int64_t offset, int32_t max_bytes = 1 << 20,
                      int64_t max_offset = std::numeric_limits<int64_t>::max(), bool min_one = true) {
    auto r = log.read(offset, max_bytes, max_offset, min_one);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : read_result{};
  }

  // Every batch from the log start to the end, read segment by segment.
  std::vector<proto::record_batch_header> read_all(const partition_log& log) {
    std::vector<proto::record_batch_header> out;
    int64_t offset = log.log_start_offset();
    while (offset < log.log_end_offset()) {
      auto batches = batches_of(read_ok(log, offset));
      if (batches.empty()) {
        ADD_FAILURE() << "no data at offset " << offset;
        break;
      }
      out.insert(out.end(), batches.begin(), batches.end());
      offset = batches.back().next_offset();
    }
    return out;
  }

  std::set<std::string> files_with_suffix(const std::string& suffix) const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(_dir)) {
      auto name = e.path().filename().string();
      if (name.ends_with(suffix)) out.insert(name);
    }
    return out;
  }

  fs::path _root;
  fs::path _dir;
  log_config _config;
  int64_t _now = start_ms;
};

// ---------------------------------------------------------------------------------------------------------------
// Appends and reads.

TEST_F(partition_log_test, new_log_is_empty) {
  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->log_start_offset(), 0);
  EXPECT_EQ(log->log_end_offset(), 0);
  EXPECT_EQ(log->segment_count(), 1u);
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000000.log"));
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000000.index"));
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000000.timeindex"));
  auto r = read_ok(*log, 0);
  EXPECT_FALSE(r.data.has_value());
  EXPECT_FALSE(log->find_offset_by_timestamp(0, 0).has_value());
  EXPECT_FALSE(log->find_offset_by_timestamp(max_timestamp_query, 0).has_value());
}

TEST_F(partition_log_test, append_assigns_offsets_and_stamps_without_breaking_crc) {
  auto log = open();
  auto first = make_batch(3);
  auto r1 = append(*log, first, 7);
  EXPECT_EQ(r1.first_offset, 0);
  EXPECT_EQ(r1.last_offset, 2);
  EXPECT_EQ(r1.batches, 1);
  EXPECT_EQ(r1.bytes, static_cast<int64_t>(first.size()));
  EXPECT_EQ(r1.log_append_time, -1);
  EXPECT_EQ(r1.max_timestamp, start_ms + 2);
  EXPECT_EQ(r1.offset_of_max_timestamp, 2);

  // Two batches in one request.
  auto r2 = append(*log, concat({make_batch(2), make_batch(4)}), 7);
  EXPECT_EQ(r2.first_offset, 3);
  EXPECT_EQ(r2.last_offset, 8);
  EXPECT_EQ(r2.batches, 2);
  EXPECT_EQ(log->log_end_offset(), 9);

  auto batches = read_all(*log);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].base_offset, 0);
  EXPECT_EQ(batches[1].base_offset, 3);
  EXPECT_EQ(batches[2].base_offset, 5);
  EXPECT_EQ(batches[2].last_offset(), 8);
  for (const auto& b : batches) EXPECT_EQ(b.partition_leader_epoch, 7);
  EXPECT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{7, 0}}));
}

TEST_F(partition_log_test, round_trip_across_many_segments) {
  _config.segment_bytes = 1024;
  _config.index_interval_bytes = 128;
  auto log = open();
  int64_t expected = 0;
  for (int i = 0; i < 60; ++i) {
    int records = 1 + i % 4;
    auto r = append(*log, make_batch(records, start_ms + i, 20));
    EXPECT_EQ(r.first_offset, expected);
    expected += records;
  }
  EXPECT_EQ(log->log_end_offset(), expected);
  EXPECT_GT(log->segment_count(), 3u);
  EXPECT_LE(log->size_bytes(), static_cast<int64_t>(log->segment_count()) * 1024);
  auto batches = read_all(*log);
  ASSERT_EQ(batches.size(), 60u);
  int64_t next = 0;
  for (const auto& b : batches) {
    EXPECT_EQ(b.base_offset, next);
    next = b.next_offset();
  }
  // Every offset, including those in the middle of a batch, reads from the batch holding it.
  for (int64_t offset = 0; offset < expected; ++offset) {
    auto got = batches_of(read_ok(*log, offset, 1));
    ASSERT_EQ(got.size(), 1u) << offset;
    EXPECT_LE(got[0].base_offset, offset);
    EXPECT_GE(got[0].last_offset(), offset);
  }
  // The segment files are named by base offset.
  EXPECT_EQ(files_with_suffix(".log").size(), log->segment_count());
}

TEST_F(partition_log_test, leader_epoch_is_assigned_when_it_increases) {
  auto log = open();
  append(*log, make_batch(2), 1);
  append(*log, make_batch(2), 1);
  append(*log, make_batch(2), 3);
  EXPECT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{1, 0}, {3, 4}}));
  EXPECT_EQ(log->epochs().end_offset_for_epoch(1, log->log_end_offset()), (epoch_end_offset{1, 4}));
}

TEST_F(partition_log_test, log_append_time_rewrites_timestamps_and_crc) {
  _config.log_append_time = true;
  _now = start_ms + 5000;
  auto log = open();
  auto r = append(*log, concat({make_batch(2, 10), make_batch(3, 20)}));
  EXPECT_EQ(r.log_append_time, _now);
  EXPECT_EQ(r.max_timestamp, _now);
  EXPECT_EQ(r.offset_of_max_timestamp, 0);
  auto batches = read_all(*log);
  ASSERT_EQ(batches.size(), 2u);
  for (const auto& b : batches) {
    EXPECT_EQ(b.timestamp_kind(), proto::timestamp_type::log_append_time);
    EXPECT_EQ(b.max_timestamp, _now);
  }
  auto found = log->find_offset_by_timestamp(_now, log->log_end_offset());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->offset, 0);
  EXPECT_EQ(found->timestamp, _now);
}

TEST_F(partition_log_test, create_time_max_timestamp_is_corrected_like_kafka) {
  auto log = open();
  auto batch = make_batch(3, 0, 10, {100, 300, 200});
  // A producer that wrote a wrong maxTimestamp (with a valid CRC).
  for (size_t i = 0; i < 8; ++i) batch[proto::batch_layout::max_timestamp + i] = 0;
  proto::rewrite_batch_crc(batch);
  auto r = append(*log, batch);
  EXPECT_EQ(r.max_timestamp, 300);
  EXPECT_EQ(r.offset_of_max_timestamp, 1);
  auto batches = read_all(*log);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].max_timestamp, 300);
}

TEST_F(partition_log_test, validation_errors_leave_the_log_unchanged) {
  _config.max_message_bytes = 400;
  _config.segment_bytes = 2000;
  auto log = open();
  append(*log, make_batch(1));
  const auto size_before = log->size_bytes();

  auto expect_error = [&](std::vector<uint8_t> bytes, error_code code) {
    auto original = bytes;
    auto r = log->append_as_leader(bytes, 0);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, code) << r.error().message;
    EXPECT_EQ(log->log_end_offset(), 1);
    EXPECT_EQ(log->size_bytes(), size_before);
    EXPECT_EQ(bytes, original) << "nothing may be stamped before every batch validated";
  };

  auto bad_crc = make_batch(2);
  bad_crc.back() ^= 0xff;
  expect_error(concat({make_batch(1), bad_crc}), error_code::corrupt_message);

  auto bad_magic = make_batch(2);
  bad_magic[proto::batch_layout::magic] = 1;
  expect_error(concat({make_batch(1), bad_magic}), error_code::corrupt_message);

  auto torn = make_batch(2);
  torn.resize(torn.size() - 3);
  expect_error(concat({make_batch(1), torn}), error_code::corrupt_message);

  auto bad_length = make_batch(2);
  bad_length[proto::batch_layout::batch_length + 3] = 10;  // smaller than a header
  expect_error(bad_length, error_code::corrupt_message);

  proto::record_batch_builder mismatched;
  mismatched.last_offset_delta(5);
  std::string v = "x";
  mismatched.add(1, std::nullopt, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), 1));
  mismatched.add(2, std::nullopt, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), 1));
  expect_error(concat({make_batch(1), mismatched.build()}), error_code::invalid_record);

  expect_error(concat({make_batch(1), make_batch(1, start_ms, 500)}), error_code::message_too_large);

  std::vector<uint8_t> many;
  for (int i = 0; i < 30; ++i) {
    auto b = make_batch(1, start_ms, 50);
    many.insert(many.end(), b.begin(), b.end());
  }
  ASSERT_GT(many.size(), 2000u);
  expect_error(many, error_code::record_list_too_large);

  // An empty request appends nothing.
  std::vector<uint8_t> empty;
  auto r = log->append_as_leader(empty, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->batches, 0);
  EXPECT_EQ(log->log_end_offset(), 1);
}

TEST_F(partition_log_test, follower_append_keeps_offsets_and_epochs) {
  _config.max_message_bytes = 50;  // replicas ignore it (the leader already accepted the batches)
  auto log = open();
  auto a = make_batch(2);
  proto::stamp_base_offset(a, 0);
  proto::stamp_partition_leader_epoch(a, 2);
  auto b = make_batch(3);
  proto::stamp_base_offset(b, 2);
  proto::stamp_partition_leader_epoch(b, 4);
  auto both = concat({a, b});
  auto r = log->append_as_follower(both);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->first_offset, 0);
  EXPECT_EQ(r->last_offset, 4);
  EXPECT_EQ(log->log_end_offset(), 5);
  EXPECT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{2, 0}, {4, 2}}));

  // Must continue exactly at the log end offset.
  auto c = make_batch(1);
  proto::stamp_base_offset(c, 7);
  auto gap = log->append_as_follower(c);
  EXPECT_FALSE(gap.ok());
  EXPECT_EQ(log->log_end_offset(), 5);
  auto d = make_batch(1);
  d.back() ^= 1;
  proto::stamp_base_offset(d, 5);
  auto corrupt = log->append_as_follower(d);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.error().code, error_code::corrupt_message);
}

// ---------------------------------------------------------------------------------------------------------------
// Rolling.

TEST_F(partition_log_test, rolls_by_size) {
  auto batch_size = static_cast<int32_t>(make_batch(1).size());
  _config.segment_bytes = batch_size * 3;
  auto log = open();
  for (int i = 0; i < 3; ++i) append(*log, make_batch(1));
  EXPECT_EQ(log->segment_count(), 1u);
  append(*log, make_batch(1));
  EXPECT_EQ(log->segment_count(), 2u);
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000003.log"));
  // The rolled segment's indexes were trimmed to their entries.
  EXPECT_EQ(fs::file_size(_dir / "00000000000000000000.index") % 8, 0u);
  EXPECT_LT(fs::file_size(_dir / "00000000000000000000.index"),
            static_cast<uintmax_t>(_config.segment_index_bytes));
}

TEST_F(partition_log_test, rolls_by_time) {
  _config.segment_ms = 1000;
  auto log = open();
  append(*log, make_batch(1, start_ms));
  _now += 500;
  append(*log, make_batch(1, start_ms + 500));
  EXPECT_EQ(log->segment_count(), 1u);
  _now += 1000;
  append(*log, make_batch(1, start_ms + 1500));
  EXPECT_EQ(log->segment_count(), 2u);
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000002.log"));
}

TEST_F(partition_log_test, rolls_when_an_index_is_full) {
  _config.index_interval_bytes = 1;  // an index entry for (nearly) every batch
  _config.segment_index_bytes = 4 * 12;
  auto log = open();
  for (int i = 0; i < 20; ++i) append(*log, make_batch(1, start_ms + i));
  EXPECT_GT(log->segment_count(), 2u);
  EXPECT_EQ(read_all(*log).size(), 20u);
}

// ---------------------------------------------------------------------------------------------------------------
// Read bounds.

TEST_F(partition_log_test, read_bounds) {
  auto log = open();
  append(*log, make_batch(2));  // 0-1
  append(*log, make_batch(3));  // 2-4
  append(*log, make_batch(1));  // 5
  const auto one = static_cast<int32_t>(make_batch(2).size());

  auto below = log->read(-1, 1000, 100, true);
  ASSERT_FALSE(below.ok());
  EXPECT_EQ(below.error().code, error_code::offset_out_of_range);
  auto above = log->read(7, 1000, 100, true);
  ASSERT_FALSE(above.ok());
  EXPECT_EQ(above.error().code, error_code::offset_out_of_range);

  auto at_end = read_ok(*log, 6);
  EXPECT_FALSE(at_end.data.has_value());
  EXPECT_EQ(at_end.log_end_offset, 6);
  EXPECT_EQ(at_end.log_start_offset, 0);

  // Middle of a batch: the whole batch.
  auto middle = batches_of(read_ok(*log, 3));
  ASSERT_EQ(middle.size(), 2u);
  EXPECT_EQ(middle[0].base_offset, 2);

  // max_offset (high watermark) stops before batches at or above it.
  auto bounded = batches_of(read_ok(*log, 0, 1 << 20, 5));
  ASSERT_EQ(bounded.size(), 2u);
  EXPECT_EQ(bounded.back().last_offset(), 4);
  EXPECT_FALSE(read_ok(*log, 5, 1 << 20, 5).data.has_value());
  EXPECT_FALSE(read_ok(*log, 0, 1 << 20, 0).data.has_value());

  // max_bytes: whole batches only; min_one_batch lets one oversized batch through.
  EXPECT_EQ(batches_of(read_ok(*log, 0, one)).size(), 1u);
  EXPECT_EQ(batches_of(read_ok(*log, 0, 1, std::numeric_limits<int64_t>::max(), true)).size(), 1u);
  EXPECT_FALSE(read_ok(*log, 0, 1, std::numeric_limits<int64_t>::max(), false).data.has_value());
}

TEST_F(partition_log_test, read_moves_to_the_next_segment) {
  auto batch_size = static_cast<int32_t>(make_batch(1).size());
  _config.segment_bytes = batch_size * 2;
  auto log = open();
  for (int i = 0; i < 6; ++i) append(*log, make_batch(1));
  ASSERT_EQ(log->segment_count(), 3u);
  // A read returns data from one segment at a time.
  auto first = batches_of(read_ok(*log, 0));
  ASSERT_EQ(first.size(), 2u);
  auto second = batches_of(read_ok(*log, 2));
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].base_offset, 2);
  // Truncating the middle of the log's history is not possible, but a segment may end before the next base
  // (a follower's gap); the read continues in the next segment.
  auto last = batches_of(read_ok(*log, 5));
  ASSERT_EQ(last.size(), 1u);
}

// ---------------------------------------------------------------------------------------------------------------
// ListOffsets.

TEST_F(partition_log_test, find_offset_by_timestamp) {
  auto batch_size = static_cast<int32_t>(make_batch(2, 0, 10, {0, 0}).size());
  _config.segment_bytes = batch_size * 2 + 8;  // timestamp deltas make some batches a byte or two larger
  auto log = open();
  append(*log, make_batch(2, 0, 10, {100, 150}), 1);  // 0-1
  append(*log, make_batch(2, 0, 10, {120, 400}), 1);  // 2-3  (max ts of the log)
  append(*log, make_batch(2, 0, 10, {200, 250}), 2);  // 4-5, second segment
  append(*log, make_batch(2, 0, 10, {300, 310}), 2);  // 6-7
  ASSERT_EQ(log->segment_count(), 2u);
  const int64_t leo = log->log_end_offset();

  auto earliest = log->find_offset_by_timestamp(earliest_timestamp, leo);
  ASSERT_TRUE(earliest);
  EXPECT_EQ(earliest->offset, 0);
  EXPECT_EQ(earliest->timestamp, -1);
  EXPECT_EQ(earliest->leader_epoch, 1);
  auto earliest_local = log->find_offset_by_timestamp(earliest_local_timestamp, leo);
  ASSERT_TRUE(earliest_local);
  EXPECT_EQ(earliest_local->offset, 0);

  auto latest = log->find_offset_by_timestamp(latest_timestamp, leo);
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->offset, 8);
  EXPECT_EQ(latest->leader_epoch, 2);
  EXPECT_EQ(log->find_offset_by_timestamp(latest_timestamp, 5)->offset, 5);  // bounded by the high watermark

  auto max_ts = log->find_offset_by_timestamp(max_timestamp_query, leo);
  ASSERT_TRUE(max_ts);
  EXPECT_EQ(max_ts->timestamp, 400);
  EXPECT_EQ(max_ts->offset, 3);
  EXPECT_EQ(max_ts->leader_epoch, 1);
  EXPECT_FALSE(log->find_offset_by_timestamp(max_timestamp_query, 3).has_value());

  // The first record with a timestamp >= the target (records, not batches, as Kafka answers).
  auto at = [&](int64_t ts) { return log->find_offset_by_timestamp(ts, leo); };
  EXPECT_EQ(at(0)->offset, 0);
  EXPECT_EQ(at(0)->timestamp, 100);
  EXPECT_EQ(at(101)->offset, 1);
  EXPECT_EQ(at(101)->timestamp, 150);
  EXPECT_EQ(at(151)->offset, 3);  // batch 2-3 has max 400; its first record (120) is too early
  EXPECT_EQ(at(151)->timestamp, 400);
  EXPECT_EQ(at(151)->leader_epoch, 1);
  EXPECT_EQ(at(300)->offset, 3);
  EXPECT_EQ(at(401).has_value(), false);
  // Above the bound: no answer.
  EXPECT_FALSE(log->find_offset_by_timestamp(151, 3).has_value());

  // Offsets below the log start offset are not answered.
  ASSERT_TRUE(log->increment_log_start_offset(4, leo).ok());
  EXPECT_EQ(at(0)->offset, 4);
  EXPECT_EQ(at(0)->timestamp, 200);
  EXPECT_EQ(log->find_offset_by_timestamp(earliest_timestamp, leo)->offset, 4);
  EXPECT_EQ(log->find_offset_by_timestamp(earliest_timestamp, leo)->leader_epoch, 2);
}

// ---------------------------------------------------------------------------------------------------------------
// Truncation.

TEST_F(partition_log_test, truncate_to_within_the_active_segment) {
  auto log = open();
  for (int i = 0; i < 5; ++i) append(*log, make_batch(2), i < 3 ? 1 : 2);  // epoch 2 starts at 6
  ASSERT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{1, 0}, {2, 6}}));
  ASSERT_TRUE(log->truncate_to(6).ok());
  EXPECT_EQ(log->log_end_offset(), 6);
  EXPECT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{1, 0}}));
  EXPECT_FALSE(read_ok(*log, 6).data.has_value());
  EXPECT_EQ(read_all(*log).size(), 3u);
  auto r = append(*log, make_batch(1), 3);
  EXPECT_EQ(r.first_offset, 6);
  // Truncating at or past the end changes nothing.
  ASSERT_TRUE(log->truncate_to(100).ok());
  EXPECT_EQ(log->log_end_offset(), 7);
}

TEST_F(partition_log_test, truncate_to_across_segments) {
  auto batch_size = static_cast<int32_t>(make_batch(2).size());
  _config.segment_bytes = batch_size * 2;
  auto log = open();
  for (int i = 0; i < 8; ++i) append(*log, make_batch(2), i / 2);  // epochs 0,0,1,1,2,2,3,3
  ASSERT_EQ(log->segment_count(), 4u);
  ASSERT_EQ(log->epochs().entries().size(), 4u);
  ASSERT_TRUE(log->truncate_to(6).ok());
  EXPECT_EQ(log->log_end_offset(), 6);
  EXPECT_EQ(log->segment_count(), 2u);
  EXPECT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{0, 0}, {1, 4}}));
  // The later segments are renamed for deletion and removed after file.delete.delay.ms.
  EXPECT_EQ(files_with_suffix(".log.deleted").size(), 2u);
  log->delete_expired_files(_now + 999);
  EXPECT_EQ(files_with_suffix(".log.deleted").size(), 2u);
  log->delete_expired_files(_now + 1000);
  EXPECT_TRUE(files_with_suffix(".deleted").empty());
  EXPECT_EQ(read_all(*log).size(), 3u);
  // Appends continue in the (formerly rolled) segment at 4.
  EXPECT_EQ(append(*log, make_batch(2), 5).first_offset, 6);
  EXPECT_EQ(log->segment_count(), 2u);
  EXPECT_EQ(read_all(*log).size(), 4u);
  EXPECT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{0, 0}, {1, 4}, {5, 6}}));

  // Truncating to the base of a segment keeps it, empty.
  ASSERT_TRUE(log->truncate_to(4).ok());
  EXPECT_EQ(log->log_end_offset(), 4);
  EXPECT_EQ(log->segment_count(), 2u);
}

TEST_F(partition_log_test, truncate_fully_and_start_at) {
  auto log = open();
  for (int i = 0; i < 3; ++i) append(*log, make_batch(2), 1);
  ASSERT_TRUE(log->truncate_fully_and_start_at(100).ok());
  EXPECT_EQ(log->log_start_offset(), 100);
  EXPECT_EQ(log->log_end_offset(), 100);
  EXPECT_EQ(log->segment_count(), 1u);
  EXPECT_TRUE(log->epochs().entries().empty());
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000100.log"));
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000000.log.deleted"));
  auto r = append(*log, make_batch(1), 2);
  EXPECT_EQ(r.first_offset, 100);
  auto below = log->read(50, 1000, 1000, true);
  ASSERT_FALSE(below.ok());
  EXPECT_EQ(below.error().code, error_code::offset_out_of_range);
  // Truncating below the first segment restarts there too.
  ASSERT_TRUE(log->truncate_to(50).ok());
  EXPECT_EQ(log->log_end_offset(), 50);
  EXPECT_EQ(log->log_start_offset(), 50);
}

// ---------------------------------------------------------------------------------------------------------------
// Retention.

class retention_test : public partition_log_test {
 protected:
  // Six segments of two single-record batches each: timestamps t0+0 .. t0+11 (segment i holds 2i, 2i+1).
  std::unique_ptr<partition_log> filled() {
    _batch_size = static_cast<int32_t>(make_batch(1).size());
    _config.segment_bytes = _batch_size * 2;
    auto log = open();
    for (int i = 0; i < 12; ++i) append(*log, make_batch(1, start_ms + i * 1000), 0);
    EXPECT_EQ(log->segment_count(), 6u);
    return log;
  }
  int32_t _batch_size = 0;
};

TEST_F(retention_test, by_time) {
  _config.retention_ms = 10'000;
  auto log = filled();
  // Segment 0 holds timestamps t0, t0+1s: at t0+11.5s only it is older than 10 s.
  auto removed = log->apply_retention(start_ms + 11'500, log->log_end_offset());
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1);
  EXPECT_EQ(log->log_start_offset(), 2);
  EXPECT_EQ(log->segment_count(), 5u);
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000000.log.deleted"));
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000000.index.deleted"));
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000000.timeindex.deleted"));
  EXPECT_FALSE(fs::exists(_dir / "00000000000000000000.log"));
  auto gone = log->read(0, 1000, 100, true);
  EXPECT_FALSE(gone.ok());
  // Far in the future everything but the active segment goes.
  removed = log->apply_retention(start_ms + 100'000, log->log_end_offset());
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 4);
  EXPECT_EQ(log->segment_count(), 1u);
  EXPECT_EQ(log->log_start_offset(), 10);
  // Delayed deletion.
  log->delete_expired_files(start_ms + 11'500 + 999);
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000000.log.deleted"));
  log->delete_expired_files(start_ms + 100'000 + 1000);
  EXPECT_TRUE(files_with_suffix(".deleted").empty());
}

TEST_F(retention_test, by_time_never_passes_the_high_watermark) {
  _config.retention_ms = 10'000;
  auto log = filled();
  auto removed = log->apply_retention(start_ms + 100'000, 5);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 2);  // segments 0 and 2 end below 5; segment 4 holds offset 5
  EXPECT_EQ(log->log_start_offset(), 4);
}

TEST_F(retention_test, by_size) {
  auto log = filled();
  const int64_t segment_size = 2 * _batch_size;
  log->update_config([&] {
    auto c = _config;
    c.retention_bytes = 3 * segment_size + 1;
    return c;
  }());
  auto removed = log->apply_retention(start_ms, log->log_end_offset());
  ASSERT_TRUE(removed.ok());
  // 6 segments, limit just over 3: removing 2 leaves 4 (still above), removing a third would go below.
  EXPECT_EQ(*removed, 2);
  EXPECT_EQ(log->segment_count(), 4u);
  EXPECT_EQ(log->log_start_offset(), 4);
  EXPECT_GE(log->size_bytes(), 3 * segment_size + 1);
}

TEST_F(retention_test, by_log_start_offset) {
  auto log = filled();
  auto bad = log->increment_log_start_offset(9, 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code, error_code::offset_out_of_range);
  ASSERT_TRUE(log->increment_log_start_offset(5, 12).ok());
  EXPECT_EQ(log->log_start_offset(), 5);
  EXPECT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{0, 5}}));
  auto removed = log->apply_retention(start_ms, 12);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 2);  // segments 0-1 and 2-3; segment 4 holds offset 5
  EXPECT_EQ(log->log_start_offset(), 5);
  auto read = log->read(4, 1000, 100, true);
  EXPECT_FALSE(read.ok());
  EXPECT_EQ(batches_of(read_ok(*log, 5)).front().base_offset, 5);
}

TEST_F(retention_test, unlimited_keeps_everything) {
  _config.retention_ms = -1;
  auto log = filled();
  auto removed = log->apply_retention(start_ms + 1'000'000'000, log->log_end_offset());
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 0);
  EXPECT_EQ(log->segment_count(), 6u);
}

// ---------------------------------------------------------------------------------------------------------------
// Flush policy.

// No fsync on the shard at a roll (issue 20): the roll makes a flush due whatever flush.* says (Kafka's
// roll schedules one), and that flush's work, run off the shard, syncs the segments, the file the roll
// listener wrote unsynced (the producer snapshot) and, last, the directory (the new segment's name).
TEST_F(partition_log_test, a_roll_makes_a_flush_due_that_syncs_the_listeners_file_and_the_directory) {
  auto batch_size = static_cast<int32_t>(make_batch(1).size());
  _config.segment_bytes = batch_size * 2;
  auto log = open();
  const fs::path written = _dir / "00000000000000000002.snapshot";
  log->set_roll_listener([&](int64_t base) -> std::optional<fs::path> {
    EXPECT_EQ(base, 2);
    std::ofstream(written) << "x";
    return written;
  });
  append(*log, make_batch(1));
  append(*log, make_batch(1));
  EXPECT_TRUE(log->flush_work(_now).empty());  // flush.messages and flush.ms: never
  append(*log, make_batch(1));                 // rolls
  ASSERT_EQ(log->segment_count(), 2u);
  auto work = log->flush_work(_now);
  // Both segments (nothing flushed yet), the snapshot, the leader-epoch checkpoint of the first batch's epoch
  // (written by its sync, off the shard), the directory.
  ASSERT_EQ(work.size(), 5u);
  EXPECT_EQ(work[2]->path(), written);
  EXPECT_EQ(work[3]->path(), _dir / "leader-epoch-checkpoint");
  EXPECT_EQ(work[4]->path(), _dir);
  for (const auto& f : work) EXPECT_TRUE(f->sync().ok()) << f->path();
  log->mark_flushed(3);
  EXPECT_EQ(log->recovery_point(), 3);
  EXPECT_TRUE(log->flush_work(_now).empty());
  // A file gone before its sync ran needs none.
  fs::remove(written);
  EXPECT_TRUE(work[2]->sync().ok());
}

TEST_F(partition_log_test, flush_by_message_count) {
  _config.flush_messages = 3;
  auto log = open();
  append(*log, make_batch(2));
  EXPECT_TRUE(log->flush_work(_now).empty());
  append(*log, make_batch(1));
  auto work = log->flush_work(_now);
  // The segment, and with it the leader-epoch checkpoint its first batch's epoch wrote unsynced and the
  // directory holding the checkpoint's new name.
  ASSERT_EQ(work.size(), 3u);
  EXPECT_EQ(work[1]->path(), _dir / "leader-epoch-checkpoint");
  EXPECT_EQ(work[2]->path(), _dir);
  for (const auto& f : work) EXPECT_TRUE(f->sync().ok()) << f->path();
  // Not handed out twice while it runs.
  EXPECT_TRUE(log->flush_work(_now).empty());
  EXPECT_EQ(log->recovery_point(), 0);
  log->mark_flushed(3);
  EXPECT_EQ(log->recovery_point(), 3);
  log->mark_flushed(2);
  EXPECT_EQ(log->recovery_point(), 3);
  // More batches of the same epoch: only the segment.
  append(*log, make_batch(3));
  ASSERT_EQ(log->flush_work(_now).size(), 1u);
}

// A sync of handed-out work that failed (reported by the caller that ran it off the shard) takes the log
// offline: the data it covered may never be durable, so nothing more is appended or flushed.
TEST_F(partition_log_test, a_failed_background_sync_takes_the_log_offline) {
  _config.flush_messages = 1;
  auto log = open();
  append(*log, make_batch(1));
  ASSERT_FALSE(log->flush_work(_now).empty());
  log->mark_failed(status::error(error_code::kafka_storage_error, "injected fsync failure"));
  EXPECT_TRUE(log->is_offline());
  log->mark_flushed(1);
  EXPECT_EQ(log->recovery_point(), 0);
  EXPECT_TRUE(log->flush_work(_now).empty());
}

TEST_F(partition_log_test, flush_by_time) {
  _config.flush_ms = 1000;
  auto log = open();
  append(*log, make_batch(1));
  EXPECT_TRUE(log->flush_work(_now + 999).empty());
  EXPECT_EQ(log->flush_work(_now + 1000).size(), 3u);  // the segment, the epoch checkpoint, the directory
  log->mark_flushed(log->log_end_offset());
  EXPECT_EQ(log->recovery_point(), 1);
  // Nothing new: nothing to do.
  EXPECT_TRUE(log->flush_work(_now + 5000).empty());
}

TEST_F(partition_log_test, flush_raises_the_recovery_point) {
  auto log = open();
  append(*log, make_batch(4));
  EXPECT_EQ(log->recovery_point(), 0);
  ASSERT_TRUE(log->flush().ok());
  EXPECT_EQ(log->recovery_point(), 4);
}

TEST_F(partition_log_test, a_background_flush_from_before_a_truncation_does_not_raise_the_recovery_point) {
  _config.flush_messages = 1;
  auto log = open();
  for (int i = 0; i < 3; ++i) append(*log, make_batch(2), 1);
  auto files = log->flush_work(_now);
  ASSERT_FALSE(files.empty());
  const int64_t upto = log->log_end_offset();
  const uint64_t token = log->flush_token();
  // Meanwhile (the syncs run on another thread): a truncation, and other batches at the cut offsets.
  ASSERT_TRUE(log->truncate_to(2).ok());
  auto again = make_batch(4);
  proto::stamp_base_offset(again, 2);
  proto::stamp_partition_leader_epoch(again, 2);
  ASSERT_TRUE(log->append_as_follower(again).ok());
  EXPECT_NE(log->flush_token(), token);
  log->mark_flushed_if_current(upto, token);
  EXPECT_EQ(log->recovery_point(), 0);  // the batches at 2..5 may not be synced
  // A flush handed out after the truncation counts.
  ASSERT_FALSE(log->flush_work(_now).empty());
  log->mark_flushed_if_current(log->log_end_offset(), log->flush_token());
  EXPECT_EQ(log->recovery_point(), 6);
}

// ---------------------------------------------------------------------------------------------------------------
// Reopening and recovery.

TEST_F(partition_log_test, reopen_after_clean_close_needs_no_scan) {
  auto batch_size = static_cast<int32_t>(make_batch(2).size());
  _config.segment_bytes = batch_size * 3;
  int64_t leo = 0;
  {
    auto log = open();
    for (int i = 0; i < 10; ++i) append(*log, make_batch(2), i < 5 ? 3 : 4);
    leo = log->log_end_offset();
    ASSERT_TRUE(log->close().ok());
  }
  auto log = open(options(true, 0));
  ASSERT_TRUE(log);
  EXPECT_FALSE(log->recovery_report().scanned);
  EXPECT_EQ(log->recovery_report().segments_scanned, 0);
  EXPECT_EQ(log->recovery_report().indexes_rebuilt, 0);
  EXPECT_EQ(log->log_end_offset(), leo);
  EXPECT_EQ(log->recovery_point(), leo);
  EXPECT_EQ(log->segment_count(), 4u);
  EXPECT_EQ(read_all(*log).size(), 10u);
  EXPECT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{3, 0}, {4, 10}}));
  EXPECT_EQ(append(*log, make_batch(1), 4).first_offset, leo);
}

TEST_F(partition_log_test, reopen_keeps_the_checkpointed_log_start_offset) {
  {
    auto log = open();
    for (int i = 0; i < 4; ++i) append(*log, make_batch(2));
    ASSERT_TRUE(log->close().ok());
  }
  auto o = options();
  o.log_start_offset = 3;
  auto log = open(o);
  EXPECT_EQ(log->log_start_offset(), 3);
  EXPECT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{0, 3}}));
}

TEST_F(partition_log_test, crash_recovery_cuts_exactly_the_torn_tail) {
  auto batch_size = static_cast<int32_t>(make_batch(2).size());
  _config.segment_bytes = batch_size * 3;
  _config.index_interval_bytes = 1;
  int64_t leo = 0;
  fs::path active;
  uintmax_t good_size = 0;
  {
    auto log = open();
    for (int i = 0; i < 8; ++i) append(*log, make_batch(2), 1);
    // The flush that let the recovery point pass offset 6 wrote the epoch checkpoint.
    ASSERT_TRUE(log->flush().ok());
    // An epoch assigned for data that never made it to disk.
    ASSERT_TRUE(log->epochs().assign(2, log->log_end_offset()).ok());
    leo = log->log_end_offset();
    active = _dir / "00000000000000000012.log";
    ASSERT_TRUE(fs::exists(active));
    good_size = fs::file_size(active);
    // Crash: the log object goes away without close(); a torn batch (a valid prefix) plus garbage follow.
  }
  {
    auto torn = make_batch(5);
    std::ofstream out(active, std::ios::binary | std::ios::app);
    out.write(reinterpret_cast<const char*>(torn.data()), 40);
    out.write("garbage garbage", 15);
  }
  {
    // The active segment's index zeroed, as a crash can leave a preallocated mapping.
    auto index = _dir / "00000000000000000012.index";
    auto size = fs::file_size(index);
    std::ofstream out(index, std::ios::binary | std::ios::trunc);
    std::string zeros(size, '\0');
    out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  auto log = open(options(false, 6));
  ASSERT_TRUE(log);
  const auto& report = log->recovery_report();
  EXPECT_TRUE(report.scanned);
  EXPECT_EQ(report.segments_scanned, 2);  // segments 6 and 12: from the one holding the recovery point
  EXPECT_EQ(report.truncated_bytes, 55);
  EXPECT_EQ(fs::file_size(active), good_size);
  EXPECT_EQ(log->log_end_offset(), leo);
  EXPECT_EQ(log->recovery_point(), 6);
  EXPECT_EQ(read_all(*log).size(), 8u);
  for (int64_t offset = 0; offset < leo; ++offset) EXPECT_EQ(batches_of(read_ok(*log, offset, 1)).size(), 1u);
  // The epoch entry beyond the log end is dropped.
  EXPECT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{1, 0}}));
  EXPECT_EQ(append(*log, make_batch(1), 1).first_offset, leo);
}

// The epoch checkpoint is written only with the log's flushes (and without an fsync before the flush job
// syncs it), so a crash can leave an older one; the batches recovered after an unclean shutdown carry their
// epochs and put the lost entries back.
TEST_F(partition_log_test, unclean_recovery_rebuilds_epochs_a_lost_checkpoint_write_held) {
  auto batch_size = static_cast<int32_t>(make_batch(2).size());
  _config.segment_bytes = batch_size * 3;
  {
    auto log = open();
    for (int i = 0; i < 4; ++i) append(*log, make_batch(2), 1);
    for (int i = 0; i < 3; ++i) append(*log, make_batch(2), 4);
    append(*log, make_batch(2), 7);
    ASSERT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{1, 0}, {4, 8}, {7, 14}}));
  }
  // The checkpoint as an earlier write left it (only epoch 1).
  ASSERT_TRUE(write_epoch_checkpoint(_dir / "leader-epoch-checkpoint", {{1, 0}}).ok());
  auto log = open(options(false, 0));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{1, 0}, {4, 8}, {7, 14}}));
  EXPECT_EQ(log->epochs().end_offset_for_epoch(4, log->log_end_offset()), (epoch_end_offset{4, 14}));
  // The rebuilt entries are on disk once the log flushes.
  ASSERT_TRUE(log->flush().ok());
  auto stored = read_epoch_checkpoint(_dir / "leader-epoch-checkpoint");
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(*stored, (std::vector<epoch_entry>{{1, 0}, {4, 8}, {7, 14}}));
}

TEST_F(partition_log_test, corruption_in_an_older_segment_drops_everything_after_it) {
  auto batch_size = static_cast<int32_t>(make_batch(2).size());
  _config.segment_bytes = batch_size * 3;
  {
    auto log = open();
    for (int i = 0; i < 9; ++i) append(*log, make_batch(2));
    ASSERT_EQ(log->segment_count(), 3u);
  }
  // Flip a byte inside the second batch of segment 6.
  {
    std::fstream f(_dir / "00000000000000000006.log", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(batch_size + 70);
    char c = 0;
    f.read(&c, 1);
    f.seekp(batch_size + 70);
    c = static_cast<char>(c ^ 0x55);
    f.write(&c, 1);
  }
  auto log = open(options(false, 0));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->log_end_offset(), 8);
  EXPECT_EQ(log->segment_count(), 2u);
  EXPECT_FALSE(fs::exists(_dir / "00000000000000000012.log"));
  EXPECT_EQ(log->recovery_report().truncated_bytes, 2 * batch_size + 3 * batch_size);
  EXPECT_EQ(read_all(*log).size(), 4u);
}

TEST_F(partition_log_test, missing_or_corrupt_index_is_rebuilt_even_after_clean_shutdown) {
  auto batch_size = static_cast<int32_t>(make_batch(2).size());
  _config.segment_bytes = batch_size * 3;
  _config.index_interval_bytes = 1;
  {
    auto log = open();
    for (int i = 0; i < 9; ++i) append(*log, make_batch(2));
    ASSERT_TRUE(log->close().ok());
  }
  fs::remove(_dir / "00000000000000000000.timeindex");
  {
    std::ofstream out(_dir / "00000000000000000006.index", std::ios::binary | std::ios::app);
    out.write("abc", 3);  // no longer a multiple of the entry size
  }
  auto log = open(options(true, 18));
  ASSERT_TRUE(log);
  EXPECT_FALSE(log->recovery_report().scanned);
  EXPECT_EQ(log->recovery_report().indexes_rebuilt, 2);
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000000.timeindex"));
  EXPECT_EQ(read_all(*log).size(), 9u);
  EXPECT_EQ(log->find_offset_by_timestamp(start_ms + 1, 18)->offset, 1);
}

TEST_F(partition_log_test, open_removes_leftover_files_of_a_crash) {
  {
    auto log = open();
    append(*log, make_batch(1));
    ASSERT_TRUE(log->close().ok());
  }
  for (auto name :
       {"00000000000000000000.log.deleted", "00000000000000000000.index.cleaned",
        "00000000000000000000.log.swap", "leader-epoch-checkpoint.tmp", "00000000000000000042.index"}) {
    std::ofstream(_dir / name) << "x";
  }
  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_TRUE(files_with_suffix(".deleted").empty());
  EXPECT_TRUE(files_with_suffix(".cleaned").empty());
  EXPECT_TRUE(files_with_suffix(".swap").empty());
  EXPECT_TRUE(files_with_suffix(".tmp").empty());
  EXPECT_FALSE(fs::exists(_dir / "00000000000000000042.index"));
  EXPECT_EQ(log->log_end_offset(), 1);
}

TEST_F(partition_log_test, partition_metadata_topic_id) {
  auto id = uuid::random();
  auto o = options();
  o.topic_id = id;
  {
    auto log = open(o);
    ASSERT_TRUE(log);
  }
  auto stored = read_partition_metadata(_dir);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->value(), id);
  {
    auto log = open(o);  // same id: fine
    ASSERT_TRUE(log);
  }
  auto other = options();
  other.topic_id = uuid::random();
  auto log = partition_log::open(_dir, {"orders", 0}, _config, other);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.error().code, error_code::inconsistent_topic_id);
}

TEST_F(partition_log_test, log_end_below_checkpointed_start_restarts_empty) {
  {
    auto log = open();
    append(*log, make_batch(3));
    ASSERT_TRUE(log->close().ok());
  }
  auto o = options();
  o.log_start_offset = 50;
  auto log = open(o);
  EXPECT_EQ(log->log_start_offset(), 50);
  EXPECT_EQ(log->log_end_offset(), 50);
  EXPECT_EQ(log->segment_count(), 1u);
  EXPECT_FALSE(fs::exists(_dir / "00000000000000000000.log"));
}

TEST_F(partition_log_test, delete_all_removes_the_directory) {
  auto log = open();
  append(*log, make_batch(1));
  ASSERT_TRUE(log->delete_all().ok());
  EXPECT_FALSE(fs::exists(_dir));
}

}  // namespace
}  // namespace mala::storage

namespace mala::storage {
namespace {

// A clean interrupted by a crash (issue 21; Kafka's LogCleanerTest.testRecoveryAfterCrash): the cleaned
// segment that replaces segments 0 and 6 was renamed to .swap, the old segments still there. Opening the log
// completes the swap (the old files of the range go, the index is rebuilt); a clean that had only written
// .cleaned files is rolled back. Every offset reads back either way.
TEST_F(partition_log_test, an_interrupted_clean_is_completed_or_rolled_back_at_open) {
  auto batch_size = static_cast<int32_t>(make_batch(2).size());
  _config.segment_bytes = batch_size * 3;
  {
    auto log = open();
    for (int i = 0; i < 8; ++i) append(*log, make_batch(2));
    ASSERT_EQ(log->segment_count(), 3u);  // bases 0, 6, 12
    ASSERT_TRUE(log->close().ok());
  }
  auto bytes_of = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string merged =
      bytes_of(_dir / "00000000000000000000.log") + bytes_of(_dir / "00000000000000000006.log");

  // Only .cleaned files: rolled back.
  {
    std::ofstream(_dir / "00000000000000000000.log.cleaned", std::ios::binary) << merged;
    std::ofstream(_dir / "00000000000000000000.index.cleaned", std::ios::binary) << "junk";
    auto log = open();
    ASSERT_TRUE(log);
    EXPECT_EQ(log->segment_count(), 3u);
    EXPECT_FALSE(fs::exists(_dir / "00000000000000000000.log.cleaned"));
    EXPECT_FALSE(fs::exists(_dir / "00000000000000000000.index.cleaned"));
    EXPECT_EQ(read_all(*log).size(), 8u);
    ASSERT_TRUE(log->close().ok());
  }
  // The .swap log in place and an old segment already renamed .deleted: the swap completes.
  {
    std::ofstream(_dir / "00000000000000000000.log.swap", std::ios::binary) << merged;
    std::ofstream(_dir / "00000000000000000000.timeindex.swap", std::ios::binary) << "junk";
    fs::rename(_dir / "00000000000000000006.log", _dir / "00000000000000000006.log.deleted");
    auto log = open(options(false, 0));
    ASSERT_TRUE(log);
    EXPECT_EQ(log->segment_count(), 2u);  // 0 (merged) and 12
    for (const char* gone : {"00000000000000000000.log.swap", "00000000000000000000.timeindex.swap",
                             "00000000000000000006.log.deleted", "00000000000000000006.index",
                             "00000000000000000006.timeindex"}) {
      EXPECT_FALSE(fs::exists(_dir / gone)) << gone;
    }
    EXPECT_TRUE(fs::exists(_dir / "00000000000000000000.index"));  // rebuilt
    EXPECT_EQ(log->log_end_offset(), 16);
    EXPECT_EQ(read_all(*log).size(), 8u);
    for (int64_t offset = 0; offset < 16; ++offset)
      EXPECT_EQ(batches_of(read_ok(*log, offset, 1)).size(), 1u);
  }
}

}  // namespace
}  // namespace mala::storage

namespace mala::storage {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Rolls without file work on the shard: the standby segment.

bool wait_until_idle(const file_worker& worker) {
  for (int i = 0; i < 1000 && worker.pending() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return worker.pending() == 0;
}

TEST_F(partition_log_test, a_roll_adopts_the_standby_segment_the_file_worker_made) {
  auto worker = std::make_shared<file_worker>();
  const auto batch_size = static_cast<int32_t>(make_batch(1).size());
  _config.segment_bytes = batch_size * 4;
  auto log = open_with_worker(worker);
  append(*log, make_batch(1));
  EXPECT_TRUE(files_with_suffix(".standby").empty());  // not past half of segment.bytes yet
  append(*log, make_batch(1));
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_EQ(files_with_suffix(".standby"),
            (std::set<std::string>{"00000000000000000000.log.standby", "00000000000000000000.index.standby",
                                   "00000000000000000000.timeindex.standby",
                                   "00000000000000000000.txnindex.standby"}));
  for (int i = 0; i < 3; ++i) append(*log, make_batch(1));  // the fifth rolls
  EXPECT_EQ(log->segment_count(), 2u);
  EXPECT_EQ(log->standby_rolls(), 1);
  ASSERT_TRUE(wait_until_idle(*worker));
  // The segment filled within minutes: the next standby is asked for at once.
  EXPECT_EQ(files_with_suffix(".standby").size(), 4u);
  for (auto name : {"00000000000000000004.log", "00000000000000000004.index",
                    "00000000000000000004.timeindex", "00000000000000000004.txnindex"}) {
    EXPECT_TRUE(fs::exists(_dir / name)) << name;
  }
  // The rolled segment's indexes were trimmed to their entries by the worker.
  EXPECT_EQ(fs::file_size(_dir / "00000000000000000000.index") % 8, 0u);
  EXPECT_LT(fs::file_size(_dir / "00000000000000000000.index"),
            static_cast<uintmax_t>(_config.segment_index_bytes));
  EXPECT_EQ(read_all(*log).size(), 5u);

  // Several rolls in a row, then a clean restart: every batch is where it was.
  for (int i = 0; i < 20; ++i) {
    append(*log, make_batch(1));
    ASSERT_TRUE(wait_until_idle(*worker));
  }
  EXPECT_EQ(log->standby_rolls(), static_cast<int64_t>(log->segment_count()) - 1);
  EXPECT_EQ(read_all(*log).size(), 25u);

  // A segment that took longer to fill asks for its standby only once past half of segment.bytes again.
  append(*log, make_batch(1));
  ASSERT_TRUE(wait_until_idle(*worker));
  _now += 11 * 60 * 1000;
  const auto rolls = log->standby_rolls();
  while (log->standby_rolls() == rolls) append(*log, make_batch(1, _now));
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_TRUE(files_with_suffix(".standby").empty());  // one batch of four in the new segment
  append(*log, make_batch(1, _now));
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_EQ(files_with_suffix(".standby").size(), 4u);
  const auto total = static_cast<size_t>(log->log_end_offset());
  EXPECT_EQ(read_all(*log).size(), total);
  ASSERT_TRUE(log->close().ok());
  EXPECT_TRUE(files_with_suffix(".standby").empty());  // a standby nobody adopted goes at close
  log.reset();
  auto reopened = open_with_worker(worker);
  ASSERT_TRUE(reopened);
  EXPECT_EQ(static_cast<size_t>(reopened->log_end_offset()), total);
  EXPECT_EQ(read_all(*reopened).size(), total);
}

// Holds `worker` until the returned promise is set.
std::shared_ptr<std::promise<void>> hold(file_worker& worker) {
  auto gate = std::make_shared<std::promise<void>>();
  worker.post([opened = gate->get_future().share()] { opened.wait(); });
  return gate;
}

TEST_F(partition_log_test, a_truncation_inside_the_active_segment_cuts_its_file_on_the_file_worker) {
  auto worker = std::make_shared<file_worker>();
  auto log = open_with_worker(worker);
  for (int i = 0; i < 5; ++i) append(*log, make_batch(2), i < 3 ? 1 : 2);
  const auto segment = _dir / "00000000000000000000.log";
  const auto full_size = fs::file_size(segment);
  const auto batch_size = static_cast<uintmax_t>(make_batch(2).size());
  ASSERT_TRUE(wait_until_idle(*worker));

  auto gate = hold(*worker);
  ASSERT_TRUE(log->truncate_to(6).ok());
  // Gone for every reader at once; the file keeps its bytes until the worker cuts it.
  EXPECT_EQ(log->log_end_offset(), 6);
  EXPECT_EQ(log->epochs().entries(), (std::vector<epoch_entry>{{1, 0}}));
  EXPECT_EQ(read_all(*log).size(), 3u);
  EXPECT_FALSE(read_ok(*log, 6).data.has_value());
  EXPECT_TRUE(log->truncation_pending());
  EXPECT_EQ(fs::file_size(segment), full_size);

  // What a crash now leaves on disk is the log as it was before the truncation.
  const auto copy = _root / "copy" / "orders-0";
  fs::create_directories(copy);
  for (const auto& entry : fs::directory_iterator(_dir))
    fs::copy(entry.path(), copy / entry.path().filename());
  {
    auto recovered = partition_log::open(copy, {"orders", 0}, _config, options(false, 0));
    ASSERT_TRUE(recovered.ok()) << recovered.error().message;
    EXPECT_EQ((*recovered)->log_end_offset(), 10);
  }

  gate->set_value();
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_FALSE(log->truncation_pending());
  EXPECT_EQ(fs::file_size(segment), 3 * batch_size);
  EXPECT_EQ(append(*log, make_batch(1), 3).first_offset, 6);
  EXPECT_EQ(read_all(*log).size(), 4u);
  ASSERT_TRUE(log->close().ok());
  log.reset();
  auto reopened = open_with_worker(worker);
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->log_end_offset(), 7);
  EXPECT_EQ(read_all(*reopened).size(), 4u);
}

TEST_F(partition_log_test, an_append_before_the_worker_cut_the_truncated_file_cuts_it_first) {
  auto worker = std::make_shared<file_worker>();
  auto log = open_with_worker(worker);
  for (int i = 0; i < 5; ++i) append(*log, make_batch(2), 1);
  const auto segment = _dir / "00000000000000000000.log";
  const auto batch_size = static_cast<uintmax_t>(make_batch(2).size());
  ASSERT_TRUE(wait_until_idle(*worker));

  auto gate = hold(*worker);
  ASSERT_TRUE(log->truncate_to(4).ok());
  EXPECT_TRUE(log->truncation_pending());
  // The follower's next batches: written where the cut ends, after the cut (run here).
  auto follower_batch = make_batch(3);
  proto::stamp_base_offset(follower_batch, 4);
  proto::stamp_partition_leader_epoch(follower_batch, 2);
  ASSERT_TRUE(log->append_as_follower(follower_batch).ok());
  EXPECT_FALSE(log->truncation_pending());
  EXPECT_EQ(fs::file_size(segment), 2 * batch_size + follower_batch.size());
  gate->set_value();
  ASSERT_TRUE(wait_until_idle(*worker));
  // The worker found the cut done: the new batch stays.
  EXPECT_EQ(fs::file_size(segment), 2 * batch_size + follower_batch.size());
  EXPECT_EQ(log->log_end_offset(), 7);
  EXPECT_EQ(read_all(*log).size(), 3u);
  ASSERT_TRUE(log->close().ok());
  log.reset();
  auto reopened = open_with_worker(worker);
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->log_end_offset(), 7);
}

TEST_F(partition_log_test, a_roll_right_after_a_truncation_cuts_the_old_segment_first) {
  auto worker = std::make_shared<file_worker>();
  _config.segment_ms = 1000;
  auto log = open_with_worker(worker);
  for (int i = 0; i < 4; ++i) append(*log, make_batch(2), 1);
  const auto batch_size = static_cast<uintmax_t>(make_batch(2).size());
  ASSERT_TRUE(wait_until_idle(*worker));
  auto gate = hold(*worker);
  ASSERT_TRUE(log->truncate_to(4).ok());
  ASSERT_TRUE(log->truncation_pending());
  // The next append rolls by age: the new segment starts at 4, which the old file must no longer hold.
  _now += 2000;
  append(*log, make_batch(1, start_ms + 2000), 2);
  EXPECT_EQ(log->segment_count(), 2u);
  EXPECT_EQ(fs::file_size(_dir / "00000000000000000000.log"), 2 * batch_size);
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000004.log") || !files_with_suffix(".standby").empty());
  gate->set_value();
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_EQ(fs::file_size(_dir / "00000000000000000000.log"), 2 * batch_size);
  EXPECT_EQ(read_all(*log).size(), 3u);
  EXPECT_EQ(log->log_end_offset(), 5);
}

TEST_F(partition_log_test, a_log_appended_to_often_has_its_standby_ready_for_its_time_roll) {
  auto worker = std::make_shared<file_worker>();
  _config.segment_ms = 10 * 60 * 1000;
  auto log = open_with_worker(worker);
  append(*log, make_batch(1, _now));
  _now += 5 * 60 * 1000;
  append(*log, make_batch(1, _now));
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_TRUE(files_with_suffix(".standby").empty());  // the roll by age is minutes away
  _now += 4 * 60 * 1000 + 30 * 1000;                   // within a minute of it
  append(*log, make_batch(1, _now));
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_EQ(files_with_suffix(".standby").size(), 4u);
  _now += 60 * 1000;
  append(*log, make_batch(1, _now));
  EXPECT_EQ(log->segment_count(), 2u);
  EXPECT_EQ(log->standby_rolls(), 1);
  ASSERT_TRUE(wait_until_idle(*worker));
  // A log idle past its roll time holds no standby until a retention pass asks for one; without a pass it
  // rolls in place at its next append.
  EXPECT_TRUE(files_with_suffix(".standby").empty());
  _now += 20 * 60 * 1000;
  append(*log, make_batch(1, _now));
  EXPECT_EQ(log->segment_count(), 3u);
  EXPECT_EQ(log->standby_rolls(), 1);
  EXPECT_EQ(read_all(*log).size(), 5u);

  // Idle again: the retention pass within a minute of the roll by age asks for the standby, and the passes
  // after it keep it however long the log stays idle; the next append rolls to it.
  ASSERT_TRUE(wait_until_idle(*worker));
  _now += 8 * 60 * 1000;
  ASSERT_TRUE(log->apply_retention(_now, log->log_end_offset()).ok());
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_TRUE(files_with_suffix(".standby").empty());  // the roll by age is two minutes away
  _now += 90 * 1000;
  ASSERT_TRUE(log->apply_retention(_now, log->log_end_offset()).ok());
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_EQ(files_with_suffix(".standby").size(), 4u);
  for (int pass = 0; pass < 12; ++pass) {
    _now += 5 * 60 * 1000;
    ASSERT_TRUE(log->apply_retention(_now, log->log_end_offset()).ok());
  }
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_EQ(files_with_suffix(".standby").size(), 4u);  // an hour idle: kept
  EXPECT_EQ(log->segment_count(), 3u);                  // and no roll without an append
  append(*log, make_batch(1, _now));
  EXPECT_EQ(log->segment_count(), 4u);
  EXPECT_EQ(log->standby_rolls(), 2);
  EXPECT_EQ(read_all(*log).size(), 6u);
}

TEST_F(partition_log_test, a_log_idle_for_minutes_gives_its_standby_back_at_a_retention_pass) {
  auto worker = std::make_shared<file_worker>();
  const auto batch_size = static_cast<int32_t>(make_batch(1).size());
  _config.segment_bytes = batch_size * 4;
  auto log = open_with_worker(worker);
  append(*log, make_batch(1));
  append(*log, make_batch(1));  // past half of segment.bytes
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_EQ(files_with_suffix(".standby").size(), 4u);
  ASSERT_TRUE(log->apply_retention(_now, log->log_end_offset()).ok());
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_EQ(files_with_suffix(".standby").size(), 4u);  // just asked for
  _now += 5 * 60 * 1000;
  append(*log, make_batch(1, _now));
  _now += 6 * 60 * 1000;
  ASSERT_TRUE(log->apply_retention(_now, log->log_end_offset()).ok());
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_EQ(files_with_suffix(".standby").size(), 4u);  // appended to 6 minutes ago
  _now += 5 * 60 * 1000;
  ASSERT_TRUE(log->apply_retention(_now, log->log_end_offset()).ok());
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_TRUE(files_with_suffix(".standby").empty());  // idle for 11 minutes: given back
  // Appends resume: the log asks again, rolls, and keeps every batch.
  for (int i = 0; i < 3; ++i) {
    append(*log, make_batch(1, _now));
    ASSERT_TRUE(wait_until_idle(*worker));
  }
  EXPECT_EQ(log->segment_count(), 2u);
  EXPECT_EQ(log->standby_rolls(), 1);
  EXPECT_EQ(read_all(*log).size(), 6u);
}

TEST_F(partition_log_test, a_standby_holding_data_after_a_crash_becomes_its_segment) {
  const auto batch_size = static_cast<int32_t>(make_batch(1).size());
  _config.segment_bytes = batch_size * 2;
  {
    auto log = open();
    for (int i = 0; i < 3; ++i) append(*log, make_batch(1));
    ASSERT_EQ(log->segment_count(), 2u);
    ASSERT_TRUE(log->close().ok());
  }
  // The crash came after a roll adopted the standby and appended to it, before the worker renamed it.
  fs::rename(_dir / "00000000000000000002.log", _dir / "00000000000000000000.log.standby");
  fs::rename(_dir / "00000000000000000002.txnindex", _dir / "00000000000000000000.txnindex.standby");
  fs::rename(_dir / "00000000000000000002.index", _dir / "00000000000000000000.index.standby");
  fs::remove(_dir / "00000000000000000002.timeindex");
  auto log = open(options(false, 3));
  ASSERT_TRUE(log);
  EXPECT_TRUE(files_with_suffix(".standby").empty());
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000002.log"));
  EXPECT_EQ(log->log_end_offset(), 3);
  EXPECT_EQ(read_all(*log).size(), 3u);
}

TEST_F(partition_log_test, an_unused_standby_left_by_a_crash_is_removed) {
  {
    auto log = open();
    append(*log, make_batch(1));
    ASSERT_TRUE(log->close().ok());
  }
  for (auto name : {"00000000000000000000.log.standby", "00000000000000000000.index.standby",
                    "00000000000000000000.timeindex.standby"}) {
    std::ofstream(_dir / name).flush();
  }
  auto log = open(options(false, 0));
  ASSERT_TRUE(log);
  EXPECT_TRUE(files_with_suffix(".standby").empty());
  EXPECT_EQ(log->log_end_offset(), 1);
}

}  // namespace
}  // namespace mala::storage

namespace mala::storage {
namespace {

// Retention leaves the renames to .deleted and the later unlinks to the file worker.
TEST_F(retention_test, the_file_worker_renames_and_deletes_what_retention_removed) {
  auto worker = std::make_shared<file_worker>();
  _config.retention_ms = 10'000;
  _batch_size = static_cast<int32_t>(make_batch(1).size());
  _config.segment_bytes = _batch_size * 2;
  auto log = open_with_worker(worker);
  for (int i = 0; i < 12; ++i) append(*log, make_batch(1, start_ms + i * 1000), 0);
  ASSERT_EQ(log->segment_count(), 6u);
  auto removed = log->apply_retention(start_ms + 11'500, log->log_end_offset());
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1);
  EXPECT_EQ(log->log_start_offset(), 2);
  ASSERT_TRUE(wait_until_idle(*worker));
  for (auto name : {"00000000000000000000.log.deleted", "00000000000000000000.index.deleted",
                    "00000000000000000000.timeindex.deleted", "00000000000000000000.txnindex.deleted"}) {
    EXPECT_TRUE(fs::exists(_dir / name)) << name;
  }
  EXPECT_FALSE(fs::exists(_dir / "00000000000000000000.log"));
  log->delete_expired_files(start_ms + 11'500 + 999);
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000000.log.deleted"));
  log->delete_expired_files(start_ms + 11'500 + 1000);
  ASSERT_TRUE(wait_until_idle(*worker));
  EXPECT_TRUE(files_with_suffix(".deleted").empty());
  EXPECT_EQ(read_all(*log).size(), 10u);
}

// A crash before the worker renamed a removed segment leaves it below the log start offset: the next start
// keeps the checkpointed start, and retention removes the segment again.
TEST_F(retention_test, a_segment_a_crash_left_below_the_log_start_offset_is_removed_again) {
  {
    auto log = filled();
    ASSERT_TRUE(log->close().ok());
  }
  auto o = options(true);
  o.log_start_offset = 2;  // the checkpoint was written, the rename of segment 0 never ran
  auto log = open(o);
  ASSERT_TRUE(log);
  EXPECT_EQ(log->log_start_offset(), 2);
  EXPECT_FALSE(log->read(0, 1000, 100, true).ok());
  auto removed = log->apply_retention(start_ms, log->log_end_offset());
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1);
  EXPECT_EQ(log->segment_count(), 5u);
  EXPECT_TRUE(fs::exists(_dir / "00000000000000000000.log.deleted"));
}

}  // namespace
}  // namespace mala::storage

namespace mala::storage {
namespace {

// The leader-epoch checkpoint travels with the flush work: written and synced by the job, not the shard, and
// a job that waited never replaces a newer checkpoint.
TEST_F(partition_log_test, the_flush_work_writes_the_leader_epoch_checkpoint_in_order) {
  _config.flush_messages = 1;
  auto log = open();
  const fs::path checkpoint = _dir / "leader-epoch-checkpoint";
  append(*log, make_batch(1), 3);
  auto first = log->flush_work(_now);
  ASSERT_FALSE(first.empty());
  EXPECT_FALSE(fs::exists(checkpoint));  // nothing written on the shard
  append(*log, make_batch(1), 4);
  auto second = log->flush_work(_now);
  ASSERT_FALSE(second.empty());
  for (const auto& f : second) ASSERT_TRUE(f->sync().ok()) << f->path();
  auto written = read_epoch_checkpoint(checkpoint);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, (std::vector<epoch_entry>{{3, 0}, {4, 1}}));
  // The older job runs last: its checkpoint is not written over the newer one.
  for (const auto& f : first) ASSERT_TRUE(f->sync().ok()) << f->path();
  written = read_epoch_checkpoint(checkpoint);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, (std::vector<epoch_entry>{{3, 0}, {4, 1}}));
  // A write on the shard (close) is ordered with them too.
  append(*log, make_batch(1), 5);
  auto third = log->flush_work(_now);
  ASSERT_TRUE(log->close().ok());
  for (const auto& f : third) (void)f->sync();
  written = read_epoch_checkpoint(checkpoint);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(written->back().epoch, 5);
}

}  // namespace
}  // namespace mala::storage
