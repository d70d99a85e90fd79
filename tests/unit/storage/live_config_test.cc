// Topic config changes reaching an open partition_log (partition_log::update_config, Kafka's
// UnifiedLog.updateConfig): each key is changed on a log that already holds data, and its effect is observed
// on the next append, roll, retention pass or flush. The segments of a log are created with the config of
// their time; these tests fail if any of them keeps using it.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>
#include <string>

#include "mala/protocol/record_batch.h"
#include "mala/storage/partition_log.h"

namespace mala::storage {
namespace {

namespace fs = std::filesystem;
namespace proto = mala::protocol;

constexpr int64_t start_ms = 1'700'000'000'000;

std::vector<uint8_t> make_batch(int records, int64_t ts = start_ms, size_t value_size = 100,
                                bool with_key = true) {
  proto::record_batch_builder builder;
  std::string key = "key";
  std::string value(value_size, 'v');
  auto bytes = [](const std::string& s) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  for (int r = 0; r < records; ++r) {
    builder.add(ts + r, with_key ? std::optional<std::span<const uint8_t>>(bytes(key)) : std::nullopt,
                bytes(value));
  }
  return builder.build();
}

class live_config_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = fs::temp_directory_path() / ("mala-live-config-test-" + std::to_string(std::random_device{}()));
    _dir = _root / "orders-0";
    fs::create_directories(_root);
    _config.file_delete_delay_ms = 0;
    _batch_size = static_cast<int32_t>(make_batch(1).size());
  }
  void TearDown() override { fs::remove_all(_root); }

  std::unique_ptr<partition_log> open() {
    log_open_options o;
    o.clean_shutdown = true;
    o.clock_ms = [this] { return _now; };
    auto log = partition_log::open(_dir, {"orders", 0}, _config, std::move(o));
    EXPECT_TRUE(log.ok()) << (log.ok() ? "" : log.error().message);
    return log.ok() ? std::move(*log) : nullptr;
  }

  static result<append_result> append(partition_log& log, std::vector<uint8_t> bytes) {
    return log.append_as_leader(bytes, 0);
  }
  static void append_ok(partition_log& log, std::vector<uint8_t> bytes) {
    auto r = log.append_as_leader(bytes, 0);
    ASSERT_TRUE(r.ok()) << r.error().message;
  }

  // The config of the test with one change, given to the open log.
  template <typename Change>
  void change(partition_log& log, Change change) {
    change(_config);
    log.update_config(_config);
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
  int32_t _batch_size = 0;
};

TEST_F(live_config_test, segment_bytes_lowered_rolls_the_active_segment) {
  auto log = open();
  for (int i = 0; i < 5; ++i) append_ok(*log, make_batch(1));
  ASSERT_EQ(log->segment_count(), 1u);  // 1 GiB segments

  change(*log, [&](log_config& c) { c.segment_bytes = 2 * _batch_size; });
  // The active segment is already larger than the new size: the next append rolls, and from then on every
  // segment holds two batches.
  for (int i = 0; i < 6; ++i) append_ok(*log, make_batch(1));
  EXPECT_EQ(log->segment_count(), 4u);
  EXPECT_EQ(files_with_suffix(".log"),
            (std::set<std::string>{"00000000000000000000.log", "00000000000000000005.log",
                                   "00000000000000000007.log", "00000000000000000009.log"}));

  // Raised again: the active segment keeps growing.
  change(*log, [&](log_config& c) { c.segment_bytes = 100 * _batch_size; });
  for (int i = 0; i < 10; ++i) append_ok(*log, make_batch(1));
  EXPECT_EQ(log->segment_count(), 4u);
}

TEST_F(live_config_test, segment_bytes_applies_to_follower_appends) {
  auto log = open();
  int64_t offset = 0;
  auto follower_batch = [&] {
    auto b = make_batch(1);
    proto::stamp_base_offset(b, offset++);
    return b;
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(log->append_as_follower(follower_batch()).ok());
  change(*log, [&](log_config& c) { c.segment_bytes = _batch_size; });
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(log->append_as_follower(follower_batch()).ok());
  EXPECT_EQ(log->segment_count(), 4u);
}

TEST_F(live_config_test, a_segment_made_active_by_truncation_uses_the_new_config) {
  _config.segment_bytes = 2 * _batch_size;
  auto log = open();
  for (int i = 0; i < 6; ++i) append_ok(*log, make_batch(1));
  ASSERT_EQ(log->segment_count(), 3u);  // [0,1] [2,3] [4,5]

  change(*log, [&](log_config& c) { c.segment_bytes = 10 * _batch_size; });
  ASSERT_TRUE(log->truncate_to(1).ok());  // segment 0 (created with the old size) is active again
  ASSERT_EQ(log->segment_count(), 1u);
  for (int i = 0; i < 8; ++i) append_ok(*log, make_batch(1));
  EXPECT_EQ(log->segment_count(), 1u);
  append_ok(*log, make_batch(1));
  append_ok(*log, make_batch(1));
  EXPECT_EQ(log->segment_count(), 2u);
}

TEST_F(live_config_test, segment_ms_lowered_rolls_by_time) {
  auto log = open();
  append_ok(*log, make_batch(1, _now));
  _now += 10'000;
  append_ok(*log, make_batch(1, _now));
  ASSERT_EQ(log->segment_count(), 1u);  // segment.ms is 7 days

  change(*log, [](log_config& c) { c.segment_ms = 5'000; });
  _now += 1'000;
  append_ok(*log, make_batch(1, _now));  // 11 s after the segment's first batch
  EXPECT_EQ(log->segment_count(), 2u);
  _now += 1'000;
  append_ok(*log, make_batch(1, _now));
  EXPECT_EQ(log->segment_count(), 2u);
  _now += 5'000;
  append_ok(*log, make_batch(1, _now));
  EXPECT_EQ(log->segment_count(), 3u);
}

TEST_F(live_config_test, index_interval_bytes_spaces_the_next_index_entries) {
  _config.segment_bytes = 100 * _batch_size;
  auto log = open();
  // index.interval.bytes 4096: batches of ~180 bytes get an entry about every 23 batches.
  for (int i = 0; i < 20; ++i) append_ok(*log, make_batch(1));
  change(*log, [](log_config& c) { c.index_interval_bytes = 0; });
  for (int i = 0; i < 20; ++i) append_ok(*log, make_batch(1));  // an entry for each
  ASSERT_TRUE(log->close().ok());                               // trims the index to its entries
  const auto entries = fs::file_size(_dir / "00000000000000000000.index") / 8;
  EXPECT_GE(entries, 20u);
  EXPECT_LE(entries, 21u);
}

TEST_F(live_config_test, segment_index_bytes_sizes_the_indexes_of_the_next_segment) {
  auto log = open();
  append_ok(*log, make_batch(1));
  change(*log, [&](log_config& c) {
    c.segment_index_bytes = 4096;
    c.segment_bytes = 2 * _batch_size;
  });
  // The active segment keeps its preallocated 10 MiB indexes (Kafka's rule); the next one gets the new size.
  EXPECT_EQ(fs::file_size(_dir / "00000000000000000000.index"), 10u * 1024 * 1024);
  append_ok(*log, make_batch(1));
  append_ok(*log, make_batch(1));
  ASSERT_EQ(log->segment_count(), 2u);
  EXPECT_EQ(fs::file_size(_dir / "00000000000000000002.index"), 4096u);
  EXPECT_EQ(fs::file_size(_dir / "00000000000000000002.timeindex"), 4096u / 12 * 12);
}

// The log manager opens the logs it finds at start-up with the broker defaults; the topic's config follows
// from the metadata. Kafka opens the active segment's indexes at the topic's segment.index.bytes, so the
// first config a loaded log takes sizes them; a later change waits for the next segment again.
TEST_F(live_config_test, a_loaded_log_sizes_its_active_indexes_by_the_first_config_it_takes) {
  {
    auto log = open();
    append_ok(*log, make_batch(1));
    ASSERT_TRUE(log->close().ok());  // trims the indexes to their entries
  }
  auto log = open();  // the broker defaults: 10 MiB indexes
  EXPECT_EQ(fs::file_size(_dir / "00000000000000000000.index"), 10u * 1024 * 1024);
  change(*log, [](log_config& c) { c.segment_index_bytes = 4096; });
  EXPECT_EQ(fs::file_size(_dir / "00000000000000000000.index"), 4096u);
  EXPECT_EQ(fs::file_size(_dir / "00000000000000000000.timeindex"), 4096u / 12 * 12);
  change(*log, [](log_config& c) { c.segment_index_bytes = 8192; });
  EXPECT_EQ(fs::file_size(_dir / "00000000000000000000.index"), 4096u);
  append_ok(*log, make_batch(1));
}

TEST_F(live_config_test, max_message_bytes_lowered_refuses_larger_batches) {
  auto log = open();
  append_ok(*log, make_batch(1, start_ms, 2000));
  change(*log, [](log_config& c) { c.max_message_bytes = 1000; });
  auto refused = append(*log, make_batch(1, start_ms, 2000));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, error_code::message_too_large);
  append_ok(*log, make_batch(1, start_ms, 100));
}

TEST_F(live_config_test, message_timestamp_type_switches_to_log_append_time) {
  auto log = open();
  const int64_t old_ts = start_ms - 3'600'000;
  auto before = append(*log, make_batch(1, old_ts));
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->log_append_time, -1);
  EXPECT_EQ(before->max_timestamp, old_ts);

  change(*log, [](log_config& c) { c.log_append_time = true; });
  _now += 5;
  auto after = append(*log, make_batch(1, old_ts));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->log_append_time, _now);

  change(*log, [](log_config& c) { c.log_append_time = false; });
  auto back = append(*log, make_batch(1, old_ts));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->log_append_time, -1);
}

TEST_F(live_config_test, message_timestamp_bounds_apply_to_the_next_append) {
  auto log = open();
  const int64_t hour_ago = _now - 3'600'000;
  const int64_t in_two_hours = _now + 2 * 3'600'000;
  append_ok(*log, make_batch(1, hour_ago));

  change(*log, [](log_config& c) { c.message_timestamp_before_max_ms = 60'000; });
  auto too_old = append(*log, make_batch(1, hour_ago));
  ASSERT_FALSE(too_old.ok());
  EXPECT_EQ(too_old.error().code, error_code::invalid_timestamp);

  auto too_new = append(*log, make_batch(1, in_two_hours));  // after.max.ms: one hour by default
  ASSERT_FALSE(too_new.ok());
  EXPECT_EQ(too_new.error().code, error_code::invalid_timestamp);
  change(*log, [](log_config& c) { c.message_timestamp_after_max_ms = 24 * 3'600'000LL; });
  append_ok(*log, make_batch(1, in_two_hours));
}

TEST_F(live_config_test, cleanup_policy_compact_requires_keys_from_the_next_append) {
  auto log = open();
  append_ok(*log, make_batch(1, start_ms, 10, /*with_key=*/false));
  change(*log, [](log_config& c) { c.cleanup = cleanup_policy::compact; });
  auto keyless = append(*log, make_batch(1, start_ms, 10, /*with_key=*/false));
  ASSERT_FALSE(keyless.ok());
  EXPECT_EQ(keyless.error().code, error_code::invalid_record);
  append_ok(*log, make_batch(1, start_ms, 10, /*with_key=*/true));
}

TEST_F(live_config_test, retention_ms_lowered_deletes_old_segments) {
  _config.segment_bytes = 2 * _batch_size;
  auto log = open();
  for (int i = 0; i < 6; ++i) append_ok(*log, make_batch(1, start_ms + i * 1000));
  ASSERT_EQ(log->segment_count(), 3u);
  _now = start_ms + 60'000;
  auto kept = log->apply_retention(_now, log->log_end_offset());
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, 0);

  change(*log, [](log_config& c) { c.retention_ms = 30'000; });
  auto removed = log->apply_retention(_now, log->log_end_offset());
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 2);  // never the active segment
  EXPECT_EQ(log->log_start_offset(), 4);
}

TEST_F(live_config_test, retention_bytes_lowered_deletes_old_segments) {
  _config.segment_bytes = 2 * _batch_size;
  auto log = open();
  for (int i = 0; i < 6; ++i) append_ok(*log, make_batch(1));
  change(*log, [&](log_config& c) { c.retention_bytes = 2 * _batch_size; });
  auto removed = log->apply_retention(_now, log->log_end_offset());
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 2);
  EXPECT_EQ(log->log_start_offset(), 4);

  // cleanup.policy=compact stops deletion by retention (compaction is not built: nothing is deleted).
  change(*log, [&](log_config& c) { c.cleanup = cleanup_policy::compact; });
  for (int i = 0; i < 4; ++i) append_ok(*log, make_batch(1));
  auto none = log->apply_retention(_now, log->log_end_offset());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
}

TEST_F(live_config_test, file_delete_delay_ms_applies_to_the_next_deletion) {
  _config.segment_bytes = 2 * _batch_size;
  _config.file_delete_delay_ms = 60'000;
  auto log = open();
  for (int i = 0; i < 6; ++i) append_ok(*log, make_batch(1));
  change(*log, [&](log_config& c) {
    c.file_delete_delay_ms = 1'000;
    c.retention_bytes = 2 * _batch_size;
  });
  auto removed = log->apply_retention(_now, log->log_end_offset());
  ASSERT_TRUE(removed.ok());
  ASSERT_EQ(*removed, 2);
  EXPECT_EQ(files_with_suffix(".deleted").size(), 8u);  // .log, .index, .timeindex, .txnindex of each
  log->delete_expired_files(_now + 999);
  EXPECT_EQ(files_with_suffix(".deleted").size(), 8u);
  log->delete_expired_files(_now + 1'000);
  EXPECT_TRUE(files_with_suffix(".deleted").empty());
}

TEST_F(live_config_test, flush_messages_and_flush_ms_apply_to_the_next_check) {
  auto log = open();
  append_ok(*log, make_batch(3));
  EXPECT_TRUE(log->flush_work(_now).empty());  // flush.messages and flush.ms: never

  change(*log, [](log_config& c) { c.flush_messages = 2; });
  auto files = log->flush_work(_now);
  ASSERT_EQ(files.size(), 3u);  // the segment, the leader-epoch checkpoint, the directory
  for (const auto& f : files) ASSERT_TRUE(f->sync().ok());
  log->mark_flushed(3);
  EXPECT_EQ(log->recovery_point(), 3);

  change(*log, [](log_config& c) {
    c.flush_messages = std::numeric_limits<int64_t>::max();
    c.flush_ms = 1'000;
  });
  append_ok(*log, make_batch(1));
  EXPECT_TRUE(log->flush_work(_now + 500).empty());
  EXPECT_EQ(log->flush_work(_now + 1'000).size(), 1u);
}

}  // namespace
}  // namespace mala::storage
