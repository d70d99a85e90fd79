#include "mala/storage/log_segment.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/storage/segment_files.h"

namespace mala::storage {
namespace {

namespace fs = std::filesystem;

struct built_batch {
  std::vector<uint8_t> bytes;
  appended_batch info;
  int64_t position = 0;  // where it was appended
};

built_batch make_batch(int64_t base_offset, int records, int64_t first_timestamp, size_t value_size = 40) {
  protocol::record_batch_builder builder;
  builder.base_offset(base_offset);
  const std::vector<uint8_t> value(value_size, 'v');
  for (int i = 0; i < records; ++i) {
    builder.add(first_timestamp + i, std::nullopt, std::span<const uint8_t>(value));
  }
  built_batch b;
  b.bytes = builder.build();
  const auto header = *protocol::parse_batch_header(b.bytes);
  b.info = {header.base_offset, header.last_offset(), header.max_timestamp, header.last_offset()};
  return b;
}

class log_segment_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _dir = fs::temp_directory_path() / ("mala-log-segment-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_dir);
    _config.index_interval_bytes = 300;
    _config.segment_index_bytes = 4096;
  }
  void TearDown() override { fs::remove_all(_dir); }

  std::unique_ptr<log_segment> open(bool create, int64_t base = 1000) {
    auto r = log_segment::open(_dir, base, _config, create, [this] { return _now; });
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r.value()) : nullptr;
  }
  fs::path file(std::string_view suffix, int64_t base = 1000) const {
    return segment_file_path(_dir, base, suffix);
  }

  // Appends `count` batches of 1-5 records with increasing timestamps.
  std::vector<built_batch> fill(log_segment& segment, int count, uint32_t seed = 1) {
    std::mt19937 rng(seed);
    std::vector<built_batch> batches;
    int64_t offset = segment.next_offset();
    for (int i = 0; i < count; ++i) {
      auto b = make_batch(offset, 1 + static_cast<int>(rng() % 5), _now + offset * 10, 20 + rng() % 100);
      b.position = segment.size();
      auto s = segment.append(b.bytes, b.info);
      EXPECT_TRUE(s.ok()) << s.message;
      offset = b.info.last_offset + 1;
      batches.push_back(std::move(b));
    }
    return batches;
  }

  static std::vector<uint8_t> slice_bytes(const file_slice& slice) {
    auto r = slice.file->read(slice.position, slice.size);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r.value() : std::vector<uint8_t>{};
  }

  static std::vector<offset_position> offset_entries(log_segment& s) {
    std::vector<offset_position> out;
    for (int32_t i = 0; i < s.offsets().entries(); ++i) out.push_back(s.offsets().entry(i));
    return out;
  }
  static std::vector<timestamp_offset> time_entries(log_segment& s) {
    std::vector<timestamp_offset> out;
    for (int32_t i = 0; i < s.times().entries(); ++i) out.push_back(s.times().entry(i));
    return out;
  }

  // The entries Kafka's rule gives for these batches: index the batch that starts more than
  // index.interval.bytes after the last indexed one.
  std::pair<std::vector<offset_position>, std::vector<timestamp_offset>> expected_entries(
      const std::vector<built_batch>& batches) const {
    std::vector<offset_position> offsets;
    std::vector<timestamp_offset> times;
    int64_t last_indexed = 0;
    timestamp_offset largest{-1, -1};
    for (const auto& b : batches) {
      if (b.info.max_timestamp > largest.timestamp)
        largest = {b.info.max_timestamp, b.info.offset_of_max_timestamp};
      if (b.position - last_indexed > _config.index_interval_bytes) {
        offsets.push_back({b.info.last_offset, b.position});
        if (times.empty() || largest.timestamp > times.back().timestamp) times.push_back(largest);
        last_indexed = b.position;
      }
    }
    return {offsets, times};
  }

  // The entry on_roll()/close()/recover() add: the largest timestamp, unless the last entry has it already.
  static void add_final_entry(std::vector<timestamp_offset>& times, const std::vector<built_batch>& batches) {
    const timestamp_offset last{batches.back().info.max_timestamp, batches.back().info.last_offset};
    if (times.empty() || times.back().timestamp < last.timestamp) times.push_back(last);
  }

  // Every offset index entry points at the start of a batch whose last offset is the entry's offset.
  static void expect_index_consistent(log_segment& segment) {
    for (int32_t i = 0; i < segment.offsets().entries(); ++i) {
      const auto e = segment.offsets().entry(i);
      ASSERT_LT(e.position, segment.size());
      auto head = segment.file()->read(e.position, static_cast<int32_t>(protocol::batch_layout::header_size));
      ASSERT_TRUE(head.ok());
      auto header = protocol::parse_batch_header(head.value());
      ASSERT_TRUE(header);
      EXPECT_EQ(header->last_offset(), e.offset);
    }
    for (int32_t i = 0; i < segment.times().entries(); ++i) {
      EXPECT_LT(segment.times().entry(i).offset, segment.next_offset());
    }
    EXPECT_TRUE(segment.offsets().sanity_check().ok());
    EXPECT_TRUE(segment.times().sanity_check().ok());
  }

  static void pwrite_at(const fs::path& path, int64_t position, std::span<const uint8_t> bytes) {
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), position), static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }

  fs::path _dir;
  log_config _config;
  int64_t _now = 1'700'000'000'000;
};

TEST_F(log_segment_test, a_new_segment_has_its_four_files) {
  auto segment = open(true);
  EXPECT_EQ(fs::file_size(file(log_suffix)), 0u);
  EXPECT_EQ(fs::file_size(file(offset_index_suffix)), 4096u);
  EXPECT_EQ(fs::file_size(file(time_index_suffix)), 4092u);
  ASSERT_TRUE(fs::exists(file(txn_index_suffix)));
  EXPECT_EQ(fs::file_size(file(txn_index_suffix)), 0u);
  EXPECT_EQ(segment->base_offset(), 1000);
  EXPECT_EQ(segment->size(), 0);
  EXPECT_EQ(segment->next_offset(), 1000);
  EXPECT_EQ(segment->max_timestamp(), -1);
  EXPECT_EQ(segment->created_ms(), _now);
  EXPECT_EQ(segment->file()->path(), file(log_suffix));
  EXPECT_FALSE(segment->read(1000, 1 << 20, INT64_MAX, INT64_MAX, true));
  EXPECT_FALSE(segment->index_files_created());
}

// Issue 20: a segment holds its .log descriptor only while it is in use: opened by the thread that uses it
// (in that thread's list, closed least recently used first over the node's budget) and closed when that
// thread ends, so a shard that stops leaves no descriptor to the threads that close the logs after it (with
// 20,000 partitions they used to run out of descriptors at shutdown).
TEST_F(log_segment_test, a_thread_that_ends_closes_the_segment_files_it_opened) {
  auto open_descriptors = [] {
    return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{});
  };
  std::vector<std::unique_ptr<log_segment>> segments;
  for (int64_t base = 0; base < 20; ++base) segments.push_back(open(true, base * 1000));
  const auto before = open_descriptors();  // loading leaves no descriptor open
  std::thread user([&] {
    for (auto& s : segments) fill(*s, 2);
    EXPECT_EQ(open_descriptors(), before + 20);  // each in use keeps its descriptor
  });
  user.join();
  EXPECT_EQ(open_descriptors(), before);
  // Opened again by the next thread that uses them.
  for (auto& s : segments) EXPECT_TRUE(s->read(s->base_offset(), 1 << 20, INT64_MAX, INT64_MAX, true));
  EXPECT_EQ(open_descriptors(), before + 20);
  segments.clear();
  EXPECT_EQ(open_descriptors(), before);
}

TEST_F(log_segment_test, opening_a_missing_segment_fails) {
  auto r = log_segment::open(_dir, 5, _config, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, error_code::kafka_storage_error);
}

TEST_F(log_segment_test, append_writes_batches_back_to_back_and_indexes_by_the_interval) {
  auto segment = open(true);
  _now += 5;
  const auto batches = fill(*segment, 40);
  EXPECT_EQ(segment->created_ms(), _now);  // the first append time
  EXPECT_EQ(segment->first_batch_timestamp(), batches.front().info.max_timestamp);
  std::vector<uint8_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.bytes.begin(), b.bytes.end());
  EXPECT_EQ(segment->size(), static_cast<int64_t>(all.size()));
  std::vector<uint8_t> on_disk(all.size());
  std::ifstream(file(log_suffix), std::ios::binary)
      .read(reinterpret_cast<char*>(on_disk.data()), static_cast<std::streamsize>(on_disk.size()));
  EXPECT_EQ(on_disk, all);
  EXPECT_EQ(segment->next_offset(), batches.back().info.last_offset + 1);
  EXPECT_EQ(segment->max_timestamp(), batches.back().info.max_timestamp);
  EXPECT_EQ(segment->offset_of_max_timestamp(), batches.back().info.last_offset);

  const auto [offsets, times] = expected_entries(batches);
  ASSERT_GT(offsets.size(), 5u);
  EXPECT_EQ(offset_entries(*segment), offsets);
  EXPECT_EQ(time_entries(*segment), times);
  expect_index_consistent(*segment);
}

TEST_F(log_segment_test, append_refuses_offsets_that_go_backwards_or_overflow) {
  auto segment = open(true);
  auto b = make_batch(999, 2, 1000);  // below the base offset
  EXPECT_FALSE(segment->append(b.bytes, b.info).ok());
  b = make_batch(1000, 2, 1000);
  ASSERT_TRUE(segment->append(b.bytes, b.info).ok());
  EXPECT_FALSE(segment->append(b.bytes, b.info).ok());  // same offsets again
  b = make_batch(1000 + (int64_t{1} << 31), 1, 1000);
  EXPECT_FALSE(segment->append(b.bytes, b.info).ok());
  EXPECT_EQ(segment->size(), static_cast<int64_t>(make_batch(1000, 2, 1000).bytes.size()));
}

TEST_F(log_segment_test, read_returns_whole_batches_within_the_bounds) {
  auto segment = open(true);
  const auto batches = fill(*segment, 30);
  const int64_t end = segment->size();

  // Everything, from the start.
  auto all = segment->read(1000, 1 << 20, INT64_MAX, INT64_MAX, false);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->position, 0);
  EXPECT_EQ(all->size, end);

  // A start offset inside a batch returns that whole batch first.
  for (const auto& b : batches) {
    for (int64_t o = b.info.base_offset; o <= b.info.last_offset; ++o) {
      auto r = segment->read(o, 1 << 20, INT64_MAX, INT64_MAX, false);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->position, b.position) << "offset " << o;
      EXPECT_EQ(r->size, end - b.position);
      auto found = segment->find_batch(o);
      ASSERT_TRUE(found);
      EXPECT_EQ(*found, (offset_position{b.info.base_offset, b.position}));
    }
  }
  // Below the base offset: from the first batch.
  EXPECT_EQ(segment->read(0, 1 << 20, INT64_MAX, INT64_MAX, false)->position, 0);

  // max_bytes: whole batches only.
  const auto& b5 = batches[5];
  const auto two = static_cast<int32_t>(b5.bytes.size() + batches[6].bytes.size());
  auto r = segment->read(b5.info.base_offset, two + 10, INT64_MAX, INT64_MAX, false);
  EXPECT_EQ(r->position, b5.position);
  EXPECT_EQ(r->size, two);
  EXPECT_EQ(slice_bytes(*r).size(), static_cast<size_t>(two));
  const auto read_bytes = slice_bytes(*r);
  EXPECT_EQ(std::vector<uint8_t>(read_bytes.begin(), read_bytes.begin() + static_cast<long>(b5.bytes.size())),
            b5.bytes);

  // max_bytes smaller than the first batch: nothing, unless min_one_batch.
  r = segment->read(b5.info.base_offset, 10, INT64_MAX, INT64_MAX, false);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->position, b5.position);
  EXPECT_EQ(r->size, 0);
  r = segment->read(b5.info.base_offset, 10, INT64_MAX, INT64_MAX, true);
  EXPECT_EQ(r->size, static_cast<int32_t>(b5.bytes.size()));
  EXPECT_EQ(slice_bytes(*r), b5.bytes);

  // max_offset: no batch whose base offset is at or above it, even with min_one_batch.
  r = segment->read(b5.info.base_offset, 1 << 20, batches[8].info.base_offset, INT64_MAX, true);
  EXPECT_EQ(r->size, static_cast<int32_t>(batches[8].position - b5.position));
  r = segment->read(b5.info.base_offset, 1 << 20, batches[8].info.base_offset + 1, INT64_MAX, true);
  EXPECT_EQ(r->size, static_cast<int32_t>(batches[9].position - b5.position));
  r = segment->read(b5.info.base_offset, 1 << 20, b5.info.base_offset, INT64_MAX, true);
  EXPECT_EQ(r->size, 0);

  // max_position.
  r = segment->read(b5.info.base_offset, 1 << 20, INT64_MAX, batches[7].position, false);
  EXPECT_EQ(r->size, static_cast<int32_t>(batches[7].position - b5.position));

  // Past the data.
  EXPECT_FALSE(segment->read(segment->next_offset(), 1 << 20, INT64_MAX, INT64_MAX, true));
  EXPECT_FALSE(segment->find_batch(segment->next_offset()));
}

TEST_F(log_segment_test, finds_the_first_batch_reaching_a_timestamp) {
  auto segment = open(true);
  const auto batches = fill(*segment, 30);
  for (const auto& b : batches) {
    auto found = segment->find_offset_by_timestamp(b.info.max_timestamp);
    ASSERT_TRUE(found);
    EXPECT_EQ(*found, (timestamp_offset{b.info.max_timestamp, b.info.base_offset}));
    // A timestamp inside the batch's range still finds this batch (its max is >= it).
    found = segment->find_offset_by_timestamp(b.info.max_timestamp - 1);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->offset, b.info.base_offset);
  }
  EXPECT_EQ(segment->find_offset_by_timestamp(0)->offset, 1000);
  EXPECT_FALSE(segment->find_offset_by_timestamp(batches.back().info.max_timestamp + 1));
}

TEST_F(log_segment_test, should_roll_on_size) {
  _config.segment_bytes = 1000;
  auto segment = open(true);
  EXPECT_FALSE(segment->should_roll(1000, _now, 1000, 0));
  EXPECT_TRUE(segment->should_roll(1001, _now, 1000, 0));
  auto b = make_batch(1000, 3, _now);
  ASSERT_TRUE(segment->append(b.bytes, b.info).ok());
  const auto room = static_cast<int32_t>(1000 - b.bytes.size());
  EXPECT_FALSE(segment->should_roll(room, _now, 1010, 0));
  EXPECT_TRUE(segment->should_roll(room + 1, _now, 1010, 0));
}

TEST_F(log_segment_test, should_roll_on_time_from_the_first_batch_timestamp) {
  _config.segment_ms = 60'000;
  auto segment = open(true);
  EXPECT_FALSE(
      segment->should_roll(100, _now + 10 * 60'000, 1000, 0));  // an empty segment never rolls on time
  auto b = make_batch(1000, 1, _now);
  ASSERT_TRUE(segment->append(b.bytes, b.info).ok());
  EXPECT_FALSE(segment->should_roll(100, _now + 60'000, 1001, 0));
  EXPECT_TRUE(segment->should_roll(100, _now + 60'001, 1001, 0));
  EXPECT_TRUE(segment->should_roll(100, _now + 50'001, 1001, 10'000));  // jitter shortens the period
  // With the incoming batch's timestamp, Kafka's message-time comparison decides, not the wall clock.
  EXPECT_FALSE(segment->should_roll(100, _now + 600'000, 1001, 0, _now + 1000));
  EXPECT_TRUE(segment->should_roll(100, _now, 1001, 0, _now + 60'001));
}

TEST_F(log_segment_test, should_roll_on_time_from_creation_without_timestamps) {
  _config.segment_ms = 60'000;
  auto segment = open(true);
  auto b = make_batch(1000, 1, -1);  // no timestamps
  ASSERT_TRUE(segment->append(b.bytes, b.info).ok());
  EXPECT_EQ(segment->first_batch_timestamp(), -1);
  EXPECT_FALSE(segment->should_roll(100, _now + 60'000, 1001, 0));
  EXPECT_TRUE(segment->should_roll(100, _now + 60'001, 1001, 0));
}

TEST_F(log_segment_test, should_roll_when_an_index_is_full_or_offsets_overflow) {
  _config.segment_index_bytes = 24;  // 3 offset entries, 2 time entries (one reserved for the roll)
  _config.index_interval_bytes = 0;
  auto segment = open(true);
  EXPECT_FALSE(segment->should_roll(100, _now, 1000, 0));
  EXPECT_TRUE(segment->should_roll(100, _now, 1000 + (int64_t{1} << 31), 0));
  EXPECT_FALSE(segment->should_roll(100, _now, 1000 + int64_t{INT32_MAX}, 0));
  fill(*segment, 2);  // the second batch gets the first entry
  EXPECT_EQ(segment->times().entries(), 1);
  EXPECT_TRUE(segment->times().is_full());
  EXPECT_TRUE(segment->should_roll(100, _now, segment->next_offset(), 0));
  fill(*segment, 5);  // appending on regardless: entries are skipped, not an error
  EXPECT_TRUE(segment->offsets().is_full());
  expect_index_consistent(*segment);
}

TEST_F(log_segment_test, truncate_to_cuts_at_the_batch_containing_the_offset) {
  auto segment = open(true);
  auto batches = fill(*segment, 40);
  const auto& cut = batches[25];
  const int64_t middle =
      cut.info.last_offset > cut.info.base_offset ? cut.info.base_offset + 1 : cut.info.base_offset;
  auto removed = segment->truncate_to(middle);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed.value(),
            batches.back().position + static_cast<int64_t>(batches.back().bytes.size()) - cut.position);
  EXPECT_EQ(segment->size(), cut.position);
  EXPECT_EQ(fs::file_size(file(log_suffix)), static_cast<uintmax_t>(cut.position));
  EXPECT_EQ(segment->next_offset(), cut.info.base_offset);
  EXPECT_EQ(segment->max_timestamp(), batches[24].info.max_timestamp);
  for (const auto& e : offset_entries(*segment)) EXPECT_LT(e.offset, cut.info.base_offset);
  for (const auto& e : time_entries(*segment)) EXPECT_LT(e.offset, cut.info.base_offset);
  batches.resize(25);
  const auto [offsets, times] = expected_entries(batches);
  EXPECT_EQ(offset_entries(*segment), offsets);
  expect_index_consistent(*segment);

  // Appends continue, and the index keeps following the rule.
  auto more = fill(*segment, 20, 9);
  batches.insert(batches.end(), more.begin(), more.end());
  EXPECT_EQ(offset_entries(*segment), expected_entries(batches).first);
  expect_index_consistent(*segment);

  EXPECT_EQ(segment->truncate_to(segment->next_offset()).value(), 0);  // nothing at or after it
  ASSERT_TRUE(segment->truncate_to(0).ok());
  EXPECT_EQ(segment->size(), 0);
  EXPECT_EQ(segment->next_offset(), 1000);
  EXPECT_EQ(segment->offsets().entries(), 0);
  EXPECT_EQ(segment->times().entries(), 0);
  EXPECT_EQ(segment->first_batch_timestamp(), -1);
}

TEST_F(log_segment_test, on_roll_adds_the_final_time_entry_and_trims_the_indexes) {
  auto segment = open(true);
  const auto batches = fill(*segment, 40);
  ASSERT_TRUE(segment->on_roll().ok());
  const int32_t offset_entries_count = segment->offsets().entries();
  const int32_t time_entries_count = segment->times().entries();
  EXPECT_EQ(fs::file_size(file(offset_index_suffix)), static_cast<uintmax_t>(offset_entries_count) * 8);
  EXPECT_EQ(fs::file_size(file(time_index_suffix)), static_cast<uintmax_t>(time_entries_count) * 12);
  EXPECT_EQ(segment->times().last_entry(),
            (timestamp_offset{batches.back().info.max_timestamp, batches.back().info.last_offset}));
  EXPECT_TRUE(segment->offsets().is_full());
  EXPECT_TRUE(segment->should_roll(1, _now, segment->next_offset(), 0));
}

TEST_F(log_segment_test, reopening_restores_the_tail_and_appends_continue) {
  std::vector<built_batch> batches;
  {
    auto segment = open(true);
    batches = fill(*segment, 40);
    ASSERT_TRUE(segment->close().ok());
  }
  auto segment = open(false);
  EXPECT_EQ(segment->size(), batches.back().position + static_cast<int64_t>(batches.back().bytes.size()));
  EXPECT_EQ(segment->next_offset(), batches.back().info.last_offset + 1);
  EXPECT_EQ(segment->max_timestamp(), batches.back().info.max_timestamp);
  EXPECT_EQ(segment->offset_of_max_timestamp(), batches.back().info.last_offset);
  EXPECT_EQ(segment->first_batch_timestamp(), batches.front().info.max_timestamp);
  EXPECT_TRUE(segment->offsets().is_full());  // trimmed: a rolled segment until resized
  ASSERT_TRUE(segment->offsets().resize(_config.segment_index_bytes).ok());
  ASSERT_TRUE(segment->times().resize(_config.segment_index_bytes).ok());
  EXPECT_FALSE(segment->should_roll(100, _now, segment->next_offset() + 5, 0));
  auto more = fill(*segment, 30, 5);
  batches.insert(batches.end(), more.begin(), more.end());
  EXPECT_EQ(offset_entries(*segment), expected_entries(batches).first);
  expect_index_consistent(*segment);
}

TEST_F(log_segment_test, reopening_after_a_crash_reads_the_untrimmed_indexes) {
  std::vector<built_batch> batches;
  std::vector<offset_position> offsets_before;
  {
    auto segment = open(true);
    batches = fill(*segment, 40);
    offsets_before = offset_entries(*segment);
    // Destroyed without close(): the indexes stay preallocated.
  }
  EXPECT_EQ(fs::file_size(file(offset_index_suffix)), 4096u);
  auto segment = open(false);
  EXPECT_EQ(offset_entries(*segment), offsets_before);
  EXPECT_EQ(segment->next_offset(), batches.back().info.last_offset + 1);
  EXPECT_EQ(segment->max_timestamp(), batches.back().info.max_timestamp);
}

TEST_F(log_segment_test, a_missing_index_is_created_and_reported) {
  std::vector<offset_position> offsets_before;
  {
    auto segment = open(true);
    fill(*segment, 40);
    offsets_before = offset_entries(*segment);
    ASSERT_TRUE(segment->close().ok());
  }
  fs::remove(file(offset_index_suffix));
  auto segment = open(false);
  EXPECT_TRUE(segment->index_files_created());
  EXPECT_EQ(segment->offsets().entries(), 0);
  auto r = segment->recover();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->truncated_bytes, 0);
  EXPECT_EQ(offset_entries(*segment), offsets_before);
}

TEST_F(log_segment_test, recover_keeps_a_clean_segment_and_rebuilds_the_same_indexes) {
  auto segment = open(true);
  const auto batches = fill(*segment, 50);
  const auto offsets_before = offset_entries(*segment);
  auto times_before = time_entries(*segment);
  const int64_t size = segment->size();
  auto r = segment->recover();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->valid_bytes, size);
  EXPECT_EQ(r->truncated_bytes, 0);
  EXPECT_EQ(r->valid_batches, 50);
  EXPECT_EQ(r->next_offset, batches.back().info.last_offset + 1);
  EXPECT_EQ(offset_entries(*segment), offsets_before);
  // Plus the final entry a closed segment has.
  add_final_entry(times_before, batches);
  EXPECT_EQ(time_entries(*segment), times_before);
  EXPECT_EQ(segment->offsets().max_entries(), 4096 / 8);  // left preallocated for appends
  auto more = fill(*segment, 10, 3);
  expect_index_consistent(*segment);
}

TEST_F(log_segment_test, recover_cuts_garbage_after_the_last_batch) {
  std::vector<built_batch> batches;
  int64_t size = 0;
  {
    auto segment = open(true);
    batches = fill(*segment, 40);
    size = segment->size();
  }
  std::vector<uint8_t> garbage(777);
  std::mt19937 rng(3);
  for (auto& byte : garbage) byte = static_cast<uint8_t>(rng());
  pwrite_at(file(log_suffix), size, garbage);

  auto segment = open(false);
  auto r = segment->recover();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->valid_bytes, size);
  EXPECT_EQ(r->truncated_bytes, 777);
  EXPECT_EQ(r->valid_batches, 40);
  EXPECT_EQ(r->next_offset, batches.back().info.last_offset + 1);
  EXPECT_EQ(segment->size(), size);
  EXPECT_EQ(fs::file_size(file(log_suffix)), static_cast<uintmax_t>(size));
  EXPECT_EQ(offset_entries(*segment), expected_entries(batches).first);
  expect_index_consistent(*segment);
}

TEST_F(log_segment_test, recover_cuts_a_torn_last_batch) {
  std::vector<built_batch> batches;
  {
    auto segment = open(true);
    batches = fill(*segment, 40);
  }
  const auto last = batches.back();  // a copy: the vector shrinks below
  fs::resize_file(file(log_suffix),
                  static_cast<uintmax_t>(last.position + static_cast<int64_t>(last.bytes.size()) / 2));
  auto segment = open(false);
  auto r = segment->recover();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->valid_bytes, last.position);
  EXPECT_EQ(r->truncated_bytes, static_cast<int64_t>(last.bytes.size()) / 2);
  EXPECT_EQ(r->next_offset, last.info.base_offset);
  EXPECT_EQ(segment->next_offset(), last.info.base_offset);
  EXPECT_EQ(segment->max_timestamp(), batches[38].info.max_timestamp);
  batches.pop_back();
  EXPECT_EQ(offset_entries(*segment), expected_entries(batches).first);
  expect_index_consistent(*segment);
  // A torn header (fewer bytes than a batch header) is cut as well.
  auto segment_size = segment->size();
  pwrite_at(file(log_suffix), segment_size, std::span<const uint8_t>(last.bytes.data(), 30));
  segment = open(false);
  r = segment->recover();
  EXPECT_EQ(r->truncated_bytes, 30);
  EXPECT_EQ(segment->size(), segment_size);
}

TEST_F(log_segment_test, recover_cuts_at_a_flipped_byte_in_the_middle) {
  std::vector<built_batch> batches;
  {
    auto segment = open(true);
    batches = fill(*segment, 60);
  }
  const auto& bad = batches[30];
  // A byte in the records (CRC-covered).
  std::vector<uint8_t> flipped{static_cast<uint8_t>(bad.bytes[70] ^ 0x10)};
  pwrite_at(file(log_suffix), bad.position + 70, flipped);

  auto segment = open(false);
  auto r = segment->recover();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->valid_bytes, bad.position);
  EXPECT_EQ(r->valid_batches, 30);
  EXPECT_EQ(r->next_offset, bad.info.base_offset);
  batches.resize(30);
  const auto [offsets, times] = expected_entries(batches);
  EXPECT_EQ(offset_entries(*segment), offsets);
  auto expected_times = times;
  add_final_entry(expected_times, batches);
  EXPECT_EQ(time_entries(*segment), expected_times);
  expect_index_consistent(*segment);
  // The cut data is never served.
  EXPECT_FALSE(segment->read(bad.info.base_offset, 1 << 20, INT64_MAX, INT64_MAX, true));
}

TEST_F(log_segment_test, recover_cuts_at_a_base_offset_going_backwards) {
  std::vector<built_batch> batches;
  {
    auto segment = open(true);
    batches = fill(*segment, 20);
  }
  // The base offset is not covered by the CRC: only the offset order shows the damage.
  auto bad = batches[12];
  ASSERT_TRUE(protocol::stamp_base_offset(std::span<uint8_t>(bad.bytes), batches[3].info.base_offset));
  pwrite_at(file(log_suffix), bad.position, std::span<const uint8_t>(bad.bytes.data(), 8));
  auto segment = open(false);
  auto r = segment->recover();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->valid_bytes, bad.position);
  EXPECT_EQ(r->valid_batches, 12);
}

TEST_F(log_segment_test, recover_of_random_damage_keeps_exactly_the_batches_before_it) {
  std::mt19937 rng(17);
  for (int round = 0; round < 40; ++round) {
    std::vector<built_batch> batches;
    {
      auto segment = open(true);
      batches = fill(*segment, 25, static_cast<uint32_t>(round));
    }
    const auto size = static_cast<int64_t>(fs::file_size(file(log_suffix)));
    // Damage inside batch `hit`: a changed CRC-covered byte, or the file cut anywhere inside the batch.
    const size_t hit = rng() % batches.size();
    const auto& victim = batches[hit];
    const auto victim_size = static_cast<int64_t>(victim.bytes.size());
    if (round % 2 == 0) {
      const auto at = static_cast<int64_t>(protocol::batch_layout::attributes) +
                      static_cast<int64_t>(rng() % static_cast<uint32_t>(victim_size - 21));
      std::vector<uint8_t> byte{
          static_cast<uint8_t>(victim.bytes[static_cast<size_t>(at)] ^ (1 + rng() % 255))};
      pwrite_at(file(log_suffix), victim.position + at, byte);
    } else {
      fs::resize_file(
          file(log_suffix),
          static_cast<uintmax_t>(victim.position + 1 +
                                 static_cast<int64_t>(rng() % static_cast<uint32_t>(victim_size - 1))));
    }
    auto segment = open(false);
    auto r = segment->recover();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->valid_bytes, victim.position) << "round " << round;
    EXPECT_EQ(r->valid_batches, static_cast<int32_t>(hit));
    EXPECT_EQ(r->next_offset, victim.info.base_offset);
    EXPECT_LT(r->valid_bytes, size);
    batches.resize(hit);
    EXPECT_EQ(offset_entries(*segment), expected_entries(batches).first);
    expect_index_consistent(*segment);
    ASSERT_TRUE(segment->delete_files().ok());
  }
}

TEST_F(log_segment_test, rename_for_deletion_keeps_handles_valid) {
  auto segment = open(true);
  const auto batches = fill(*segment, 10);
  auto slice = segment->read(1000, 1 << 20, INT64_MAX, INT64_MAX, true);
  ASSERT_TRUE(slice);
  ASSERT_TRUE(segment->rename_for_deletion().ok());
  for (auto suffix : {log_suffix, offset_index_suffix, time_index_suffix, txn_index_suffix}) {
    EXPECT_FALSE(fs::exists(file(suffix))) << suffix;
    EXPECT_TRUE(fs::exists(fs::path(file(suffix)) += deleted_suffix)) << suffix;
  }
  EXPECT_EQ(slice->file->path(), file(log_suffix));  // the old handle keeps its name and still reads
  EXPECT_EQ(slice_bytes(*slice).size(), static_cast<size_t>(segment->size()));
  EXPECT_EQ(segment->file()->path(), fs::path(file(log_suffix)) += deleted_suffix);
  EXPECT_EQ(segment->read(batches[4].info.base_offset, 1 << 20, INT64_MAX, INT64_MAX, true)->position,
            batches[4].position);
  ASSERT_TRUE(segment->delete_files().ok());
  EXPECT_TRUE(fs::is_empty(_dir));
  EXPECT_EQ(slice_bytes(*slice).size(), static_cast<size_t>(slice->size));  // still readable after unlink
}

// The log cleaner writes a segment under .cleaned names and swaps it in by renaming (.swap, then none); the
// segment keeps serving through the renames and reopens under its final name.
TEST_F(log_segment_test, a_segment_written_under_a_suffix_is_renamed_into_place) {
  auto r = log_segment::open(
      _dir, 1000, _config, true, [this] { return _now; }, cleaned_suffix);
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto segment = std::move(*r);
  const auto batches = fill(*segment, 10);
  ASSERT_TRUE(segment->on_roll().ok());
  ASSERT_TRUE(segment->flush().ok());
  for (auto suffix : {log_suffix, offset_index_suffix, time_index_suffix, txn_index_suffix}) {
    EXPECT_FALSE(fs::exists(file(suffix))) << suffix;
    EXPECT_TRUE(fs::exists(fs::path(file(suffix)) += cleaned_suffix)) << suffix;
  }
  ASSERT_TRUE(segment->change_suffix(cleaned_suffix, swap_suffix).ok());
  EXPECT_TRUE(fs::exists(fs::path(file(log_suffix)) += swap_suffix));
  EXPECT_FALSE(fs::exists(fs::path(file(log_suffix)) += cleaned_suffix));
  ASSERT_TRUE(segment->change_suffix(swap_suffix, "").ok());
  for (auto suffix : {log_suffix, offset_index_suffix, time_index_suffix, txn_index_suffix}) {
    EXPECT_TRUE(fs::exists(file(suffix))) << suffix;
  }
  EXPECT_EQ(segment->file()->path(), file(log_suffix).string());
  EXPECT_EQ(segment->read(batches[4].info.base_offset, 1 << 20, INT64_MAX, INT64_MAX, true)->position,
            batches[4].position);
  const int64_t next = segment->next_offset();
  ASSERT_TRUE(segment->close().ok());
  segment.reset();
  auto reopened = open(false);
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->next_offset(), next);
  EXPECT_TRUE(reopened->check_indexes().ok());
  EXPECT_FALSE(reopened->index_files_created());
}

TEST_F(log_segment_test, create_replaces_stale_files) {
  {
    auto segment = open(true);
    fill(*segment, 20);
  }
  auto segment = open(true);
  EXPECT_EQ(segment->size(), 0);
  EXPECT_EQ(segment->next_offset(), 1000);
  EXPECT_EQ(segment->offsets().entries(), 0);
  EXPECT_EQ(segment->times().entries(), 0);
}

TEST_F(log_segment_test, flush_syncs_without_error) {
  auto segment = open(true);
  fill(*segment, 5);
  EXPECT_TRUE(segment->flush().ok());
  EXPECT_TRUE(segment->file()->sync().ok());
}

}  // namespace
}  // namespace mala::storage

namespace mala::storage {
namespace {

// A standby segment (made off the shard before its base offset is known) adopted at a roll: its renames are
// left to the file worker, and the segment runs them itself once it needs a file by name first.
TEST_F(log_segment_test, an_adopted_standby_runs_its_deferred_renames_when_it_needs_its_files) {
  auto created = log_segment::create_standby(_dir, _config, [this] { return _now; });
  ASSERT_TRUE(created.ok()) << created.error().message;
  auto segment = std::move(*created);
  const std::string standby_log = file(log_suffix, 0).string() + std::string(standby_suffix);
  EXPECT_TRUE(fs::exists(standby_log));
  EXPECT_TRUE(fs::exists(file(txn_index_suffix, 0).string() + std::string(standby_suffix)));

  auto renames = segment->adopt_as(_dir, 1000);
  EXPECT_EQ(segment->base_offset(), 1000);
  // Not run yet: the files keep the standby names while appends go to the open descriptor.
  auto batches = fill(*segment, 30);
  EXPECT_TRUE(fs::exists(standby_log));
  EXPECT_FALSE(fs::exists(file(log_suffix)));

  // A flush syncs the files by name: the renames run first, here.
  ASSERT_TRUE(segment->flush().ok());
  for (auto suffix : {log_suffix, offset_index_suffix, time_index_suffix, txn_index_suffix}) {
    EXPECT_TRUE(fs::exists(file(suffix))) << suffix;
    EXPECT_FALSE(fs::exists(file(suffix, 0).string() + std::string(standby_suffix))) << suffix;
  }
  EXPECT_GT(segment->offsets().entries(), 0);
  renames->run();  // the worker's turn comes after: nothing left to do
  ASSERT_TRUE(renames->result_if_done().has_value());
  EXPECT_TRUE(renames->result_if_done()->ok());

  // The offsets count from the adopted base: a reopened segment finds every batch.
  ASSERT_TRUE(segment->close().ok());
  segment.reset();
  auto reopened = open(false);
  ASSERT_TRUE(reopened);
  EXPECT_TRUE(reopened->check_indexes().ok());
  EXPECT_EQ(reopened->next_offset(), batches.back().info.last_offset + 1);
  for (const auto& b : batches) {
    auto found = reopened->find_batch(b.info.base_offset);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->position, b.position);
  }
}

// A rolled segment's index trims run on the file worker; a truncation that makes it active again before the
// worker got there runs them first, so the regrown index is not cut afterwards.
TEST_F(log_segment_test, deferred_index_trims_run_before_the_index_grows_again) {
  auto segment = open(true);
  auto batches = fill(*segment, 40);
  status error;
  auto trims = segment->on_roll_deferred(error);
  ASSERT_TRUE(error.ok()) << error.message;
  ASSERT_TRUE(trims);
  // Until the trim runs, the file keeps its preallocated length.
  EXPECT_EQ(fs::file_size(file(offset_index_suffix)), static_cast<uintmax_t>(_config.segment_index_bytes));

  ASSERT_TRUE(segment->truncate_to(batches[20].info.base_offset).ok());
  ASSERT_TRUE(segment->offsets().resize(_config.segment_index_bytes).ok());
  ASSERT_TRUE(segment->times().resize(_config.segment_index_bytes).ok());
  trims->run();  // already run by the segment: the regrown files stay
  EXPECT_EQ(fs::file_size(file(offset_index_suffix)), static_cast<uintmax_t>(_config.segment_index_bytes));
  auto more = fill(*segment, 20, 7);
  EXPECT_TRUE(segment->check_indexes().ok());
  ASSERT_TRUE(segment->find_batch(more.back().info.base_offset));

  // Trimmed by the worker when nothing needs the file first.
  auto trims_again = segment->on_roll_deferred(error);
  ASSERT_TRUE(error.ok());
  trims_again->run();
  EXPECT_LT(fs::file_size(file(offset_index_suffix)), static_cast<uintmax_t>(_config.segment_index_bytes));
  EXPECT_EQ(fs::file_size(file(offset_index_suffix)),
            static_cast<uintmax_t>(segment->offsets().entries()) * offset_index_entry_size);
  EXPECT_TRUE(segment->collect_deferred().ok());
  EXPECT_TRUE(segment->close().ok());
}

}  // namespace
}  // namespace mala::storage
