// Disk failures ("a full disk turns the partition offline with an error to producers, never a crash
// or a half-written batch served"), with faults injected into the storage library's file I/O (io_faults.h): a
// failed append leaves the log end offset and the files as they were, the log goes offline (Kafka's
// LogDirFailureChannel) and takes its log dir with it, nothing after the last good batch is ever read, and
// the next start finds every batch acknowledged before the failure.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/storage/file_worker.h"
#include "mala/storage/io_faults.h"
#include "mala/storage/log_manager.h"
#include "mala/storage/log_segment.h"
#include "mala/storage/partition_log.h"
#include "mala/storage/segment_files.h"

namespace mala::storage {
namespace {

namespace fs = std::filesystem;
namespace proto = mala::protocol;

constexpr int64_t start_ms = 1'700'000'000'000;

std::vector<uint8_t> make_batch(int records, int64_t base_offset = 0, size_t value_size = 40) {
  proto::record_batch_builder builder;
  builder.base_offset(base_offset);
  const std::vector<uint8_t> value(value_size, 'v');
  for (int r = 0; r < records; ++r) builder.add(start_ms + r, std::nullopt, std::span<const uint8_t>(value));
  return builder.build();
}

// The append under test (append_as_leader stamps the bytes in place: it needs them in a variable).
result<append_result> try_append(partition_log& log, std::vector<uint8_t> bytes, int32_t epoch = 0) {
  return log.append_as_leader(bytes, epoch);
}

std::vector<uint8_t> concat(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  std::vector<uint8_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

int64_t bytes_on_disk(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// One kind of failing call: `operation` on a path containing `path_part`, after `skip` such calls went
// through.
struct fault_rule {
  io_operation operation = io_operation::write;
  std::string path_part;
  int error = ENOSPC;
  size_t written_before = 0;  // writes: a torn write of this many bytes first
  int skip = 0;
};

// Installs the rules for the test's scope; counts the calls it failed.
class scoped_faults {
 public:
  explicit scoped_faults(std::vector<fault_rule> rules) : _state(std::make_shared<state>()) {
    _state->rules = std::move(rules);
    set_io_fault_injector([s = _state](io_operation operation, const fs::path& path, size_t) -> io_fault {
      for (auto& rule : s->rules) {
        if (rule.operation != operation || path.string().find(rule.path_part) == std::string::npos) continue;
        if (rule.skip > 0) {
          --rule.skip;
          return {};
        }
        ++s->failed;
        return {rule.error, rule.written_before};
      }
      return {};
    });
  }
  ~scoped_faults() { set_io_fault_injector({}); }
  scoped_faults(const scoped_faults&) = delete;
  scoped_faults& operator=(const scoped_faults&) = delete;
  int failed() const { return _state->failed; }

 private:
  struct state {
    std::vector<fault_rule> rules;
    int failed = 0;
  };
  std::shared_ptr<state> _state;
};

class disk_failure_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = fs::temp_directory_path() / ("mala-disk-failure-test-" + std::to_string(std::random_device{}()));
    _dir = _root / "orders-0";
    fs::create_directories(_root);
    _config.segment_index_bytes = 4096;
  }
  void TearDown() override {
    set_io_fault_injector({});
    fs::remove_all(_root);
  }

  log_open_options options(bool clean) {
    log_open_options o;
    o.clean_shutdown = clean;
    o.clock_ms = [] { return start_ms; };
    return o;
  }

  // Opens the log and counts what its failure listener hears.
  std::unique_ptr<partition_log> open(bool clean = true) {
    auto log = partition_log::open(_dir, {"orders", 0}, _config, options(clean));
    EXPECT_TRUE(log.ok()) << (log.ok() ? "" : log.error().message);
    if (!log.ok()) return nullptr;
    (*log)->set_failure_listener([this](const status& error) {
      ++_failures;
      _failure = error;
    });
    return std::move(*log);
  }

  static void append_ok(partition_log& log, std::vector<uint8_t> bytes, int32_t epoch = 0) {
    auto r = log.append_as_leader(bytes, epoch);
    ASSERT_TRUE(r.ok()) << r.error().message;
  }

  // Base offsets of every batch readable from the log start to its end.
  static std::vector<int64_t> batch_offsets(const partition_log& log) {
    std::vector<int64_t> out;
    int64_t offset = log.log_start_offset();
    while (offset < log.log_end_offset()) {
      auto r = log.read(offset, 1 << 20, log.log_end_offset(), true);
      EXPECT_TRUE(r.ok()) << r.error().message;
      if (!r.ok() || !r->data) break;
      auto bytes = r->data->file->read(r->data->position, r->data->size);
      EXPECT_TRUE(bytes.ok());
      if (!bytes.ok()) break;
      proto::batch_splitter splitter(*bytes);
      while (auto b = splitter.next()) {
        EXPECT_EQ(proto::validate_batch(*b), proto::batch_status::ok);
        auto h = *proto::parse_batch_header(*b);
        out.push_back(h.base_offset);
        offset = h.next_offset();
      }
      EXPECT_TRUE(splitter.ok());
    }
    return out;
  }

  fs::path segment(int64_t base, std::string_view suffix = log_suffix) const {
    return segment_file_path(_dir, base, suffix);
  }

  // What every failed append must look like from the outside.
  void expect_offline_after_failure(partition_log& log, const result<append_result>& failed, int64_t end) {
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().code, error_code::kafka_storage_error);
    EXPECT_EQ(log.log_end_offset(), end);
    EXPECT_TRUE(log.is_offline());
    EXPECT_EQ(_failures, 1);
    EXPECT_EQ(_failure.code, error_code::kafka_storage_error);
    // Nothing is read, appended or flushed any more, even with the disk back; the listener heard it once.
    auto read = log.read(0, 1 << 20, end, true);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.error().code, error_code::kafka_storage_error);
    auto again = try_append(log, make_batch(1), 0);
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.error().code, error_code::kafka_storage_error);
    EXPECT_EQ(log.flush().code, error_code::kafka_storage_error);
    EXPECT_EQ(log.truncate_to(0).code, error_code::kafka_storage_error);
    EXPECT_TRUE(log.flush_work(start_ms).empty());
    EXPECT_FALSE(log.find_offset_by_timestamp(earliest_timestamp, end).has_value());
    EXPECT_EQ(log.log_end_offset(), end);
    EXPECT_EQ(_failures, 1);
  }

  fs::path _root;
  fs::path _dir;
  log_config _config;
  int _failures = 0;
  status _failure;
};

TEST_F(disk_failure_test, segment_append_that_fails_half_way_leaves_no_torn_batch) {
  auto opened = log_segment::open(_dir.parent_path(), 0, _config, true, [] { return start_ms; });
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  auto& seg = **opened;
  auto first = make_batch(3, 0);
  ASSERT_TRUE(seg.append(first, {0, 2, start_ms + 2, 2}).ok());
  const fs::path path = segment_file_path(_dir.parent_path(), 0, log_suffix);
  {
    scoped_faults faults({{io_operation::write, ".log", ENOSPC, /*written_before=*/30}});
    auto second = make_batch(2, 3);
    auto st = seg.append(second, {3, 4, start_ms + 1, 4});
    EXPECT_EQ(st.code, error_code::kafka_storage_error);
    EXPECT_NE(st.message.find(std::strerror(ENOSPC)), std::string::npos) << st.message;
    EXPECT_EQ(faults.failed(), 1);
  }
  EXPECT_EQ(seg.size(), static_cast<int64_t>(first.size()));
  EXPECT_EQ(seg.next_offset(), 3);
  EXPECT_EQ(bytes_on_disk(path), static_cast<int64_t>(first.size()));
  // The next append lands where the failed one started.
  auto third = make_batch(1, 3);
  ASSERT_TRUE(seg.append(third, {3, 3, start_ms, 3}).ok());
  auto slice = seg.read(0, 1 << 20, 100, seg.size(), true);
  ASSERT_TRUE(slice.has_value());
  EXPECT_EQ(slice->size, static_cast<int32_t>(first.size() + third.size()));
}

TEST_F(disk_failure_test, segment_append_whose_cut_back_fails_keeps_the_torn_bytes_out_of_reads) {
  auto opened = log_segment::open(_dir.parent_path(), 0, _config, true, [] { return start_ms; });
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  auto& seg = **opened;
  auto first = make_batch(3, 0);
  ASSERT_TRUE(seg.append(first, {0, 2, start_ms + 2, 2}).ok());
  {
    scoped_faults faults({{io_operation::write, ".log", EFBIG, 30}, {io_operation::truncate, ".log", EIO}});
    auto second = make_batch(2, 3);
    EXPECT_EQ(seg.append(second, {3, 4, start_ms + 1, 4}).code, error_code::kafka_storage_error);
    EXPECT_EQ(faults.failed(), 2);
  }
  EXPECT_EQ(bytes_on_disk(segment_file_path(_dir.parent_path(), 0, log_suffix)),
            static_cast<int64_t>(first.size()) + 30);
  EXPECT_EQ(seg.size(), static_cast<int64_t>(first.size()));
  auto slice = seg.read(0, 1 << 20, 100, seg.size(), true);
  ASSERT_TRUE(slice.has_value());
  EXPECT_EQ(slice->size, static_cast<int32_t>(first.size()));
  EXPECT_FALSE(seg.read(3, 1 << 20, 100, seg.size(), true).has_value());
}

TEST_F(disk_failure_test, full_disk_during_append_keeps_the_log_end_offset_and_takes_the_log_offline) {
  auto log = open();
  ASSERT_TRUE(log);
  append_ok(*log, make_batch(3));
  append_ok(*log, make_batch(2));
  const int64_t size_before = bytes_on_disk(segment(0));
  {
    scoped_faults faults({{io_operation::write, ".log", ENOSPC, 25}});
    auto failed = try_append(*log, make_batch(4), 0);
    EXPECT_EQ(faults.failed(), 1);
    expect_offline_after_failure(*log, failed, 5);
  }
  EXPECT_EQ(bytes_on_disk(segment(0)), size_before);
  // Offline logs close without touching their files; the next start (no clean-shutdown marker) recovers.
  EXPECT_EQ(log->close().code, error_code::kafka_storage_error);
  log.reset();
  log = open(/*clean=*/false);
  ASSERT_TRUE(log);
  EXPECT_EQ(log->log_end_offset(), 5);
  EXPECT_EQ(batch_offsets(*log), (std::vector<int64_t>{0, 3}));
  append_ok(*log, make_batch(1));
  EXPECT_EQ(log->log_end_offset(), 6);
}

TEST_F(disk_failure_test, request_failing_at_its_second_batch_is_cut_back_whole) {
  auto log = open();
  ASSERT_TRUE(log);
  append_ok(*log, make_batch(3));
  const int64_t size_before = bytes_on_disk(segment(0));
  {
    // The first batch of the request is written, the second is torn.
    scoped_faults faults({{io_operation::write, ".log", ENOSPC, 10, /*skip=*/1}});
    auto records = concat(make_batch(2), make_batch(2));
    auto failed = try_append(*log, records, 0);
    EXPECT_EQ(faults.failed(), 1);
    expect_offline_after_failure(*log, failed, 3);
  }
  EXPECT_EQ(bytes_on_disk(segment(0)), size_before);
  log.reset();
  log = open(false);
  ASSERT_TRUE(log);
  EXPECT_EQ(log->log_end_offset(), 3);
  EXPECT_EQ(batch_offsets(*log), (std::vector<int64_t>{0}));
}

TEST_F(disk_failure_test, torn_tail_that_cannot_be_cut_is_never_read_and_recovery_cuts_it) {
  auto log = open();
  ASSERT_TRUE(log);
  append_ok(*log, make_batch(3));
  const int64_t size_before = bytes_on_disk(segment(0));
  {
    scoped_faults faults({{io_operation::write, ".log", EIO, 40}, {io_operation::truncate, ".log", EIO}});
    auto failed = try_append(*log, make_batch(5), 0);
    expect_offline_after_failure(*log, failed, 3);
  }
  EXPECT_EQ(bytes_on_disk(segment(0)), size_before + 40);
  log.reset();
  log = open(false);
  ASSERT_TRUE(log);
  EXPECT_EQ(log->recovery_report().truncated_bytes, 40);
  EXPECT_EQ(bytes_on_disk(segment(0)), size_before);
  EXPECT_EQ(log->log_end_offset(), 3);
  EXPECT_EQ(batch_offsets(*log), (std::vector<int64_t>{0}));
}

TEST_F(disk_failure_test, roll_that_cannot_grow_the_new_index_fails_the_append) {
  _config.segment_bytes = 300;  // the second batch rolls
  auto log = open();
  ASSERT_TRUE(log);
  append_ok(*log, make_batch(3, 0, 60));
  {
    // RLIMIT_FSIZE: the new segment's index cannot be preallocated.
    scoped_faults faults({{io_operation::truncate, "00000000000000000003.index", EFBIG}});
    auto failed = try_append(*log, make_batch(3, 0, 60), 0);
    EXPECT_EQ(faults.failed(), 1);
    expect_offline_after_failure(*log, failed, 3);
  }
  log.reset();
  log = open(false);
  ASSERT_TRUE(log);
  EXPECT_EQ(log->log_end_offset(), 3);
  EXPECT_EQ(batch_offsets(*log), (std::vector<int64_t>{0}));
}

TEST_F(disk_failure_test, index_page_that_cannot_be_allocated_fails_the_append_before_its_data) {
  _config.index_interval_bytes = 0;  // an index entry for every batch after the first
  auto log = open();
  ASSERT_TRUE(log);
  append_ok(*log, make_batch(2));
  const int64_t size_before = bytes_on_disk(segment(0));
  {
    // Writing a sparse mapped page of a full disk would be SIGBUS: the page is allocated first, and fails.
    scoped_faults faults({{io_operation::allocate, ".index", ENOSPC}});
    auto failed = try_append(*log, make_batch(2), 0);
    EXPECT_EQ(faults.failed(), 1);
    expect_offline_after_failure(*log, failed, 2);
  }
  EXPECT_EQ(bytes_on_disk(segment(0)), size_before);
}

TEST_F(disk_failure_test, index_pages_are_allocated_ahead_of_their_entries) {
  _config.index_interval_bytes = 0;
  _config.segment_index_bytes = 1 << 20;
  auto log = open();
  ASSERT_TRUE(log);
  for (int i = 0; i < 20; ++i) append_ok(*log, make_batch(1));
  struct stat st {};
  ASSERT_EQ(::stat(segment(0, offset_index_suffix).c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1 << 20);  // preallocated (sparse) as before
  // Blocks for the written entries are there; the index does not occupy its whole preallocated length. (A
  // file system without fallocate leaves it sparse: then only the first check holds.)
  EXPECT_GT(st.st_blocks, 0);
  EXPECT_LE(st.st_blocks * 512, 256 * 1024);
}

// With a file worker the blocks for the next index slots are reserved there, ahead of the appends: the shard
// opens no index file to reserve while appending.
TEST_F(disk_failure_test, the_file_worker_reserves_index_slots_ahead_of_the_appends) {
  _config.index_interval_bytes = 0;  // an offset index entry for every batch after the first
  _config.segment_index_bytes = 1 << 20;
  auto worker = std::make_shared<file_worker>();
  auto o = options(true);
  o.worker = worker;
  auto opened = partition_log::open(_dir, {"orders", 0}, _config, o);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  auto log = std::move(*opened);
  auto wait_for_worker = [&] {
    for (int i = 0; i < 1000 && worker->pending() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(worker->pending(), 0u);
  };
  // 7,000 entries of 8 bytes: past half of the first 64 KiB step, so the worker reserved the next one.
  for (int i = 0; i < 7000; ++i) {
    append_ok(*log, make_batch(1));
    if (i % 500 == 0) wait_for_worker();
  }
  wait_for_worker();
  {
    // The disk is full from here on: the worker's reservations fail quietly. 6,000 more entries cross the
    // first step (8,192 entries), where the shard would have reserved itself, and come within half a step of
    // the second, where the worker tries again; the shard needs nothing up to 16,384 entries.
    scoped_faults faults({{io_operation::allocate, ".index", ENOSPC}});
    for (int i = 0; i < 6000; ++i) append_ok(*log, make_batch(1));
    EXPECT_FALSE(log->is_offline());
    wait_for_worker();
    EXPECT_GT(faults.failed(), 0);  // the worker tried to reserve further ahead
  }
  EXPECT_EQ(log->log_end_offset(), 13000);
  EXPECT_EQ(batch_offsets(*log).size(), 13000u);
  struct stat st {};
  ASSERT_EQ(::stat(segment(0, offset_index_suffix).c_str(), &st), 0);
  EXPECT_GE(st.st_blocks * 512, 13000 * 8);
}

TEST_F(disk_failure_test, failed_fsync_takes_the_log_offline) {
  auto log = open();
  ASSERT_TRUE(log);
  append_ok(*log, make_batch(3));
  {
    scoped_faults faults({{io_operation::sync, ".log", EIO}});
    auto st = log->flush();
    EXPECT_EQ(st.code, error_code::kafka_storage_error);
    EXPECT_EQ(faults.failed(), 1);
  }
  EXPECT_TRUE(log->is_offline());
  EXPECT_EQ(_failures, 1);
  EXPECT_EQ(log->recovery_point(), 0);
  EXPECT_EQ(log->read(0, 1000, 3, true).error().code, error_code::kafka_storage_error);
}

TEST_F(disk_failure_test, failed_background_fsync_is_found_by_the_next_flush_check) {
  _config.flush_messages = 1;
  auto log = open();
  ASSERT_TRUE(log);
  append_ok(*log, make_batch(3));
  auto files = log->flush_work(start_ms);
  ASSERT_EQ(files.size(), 3u);  // the segment, the leader-epoch checkpoint, the directory
  {
    // The blocking pool's fsync fails; it cannot report back (mark_flushed is not called).
    scoped_faults faults({{io_operation::sync, ".log", EIO}});
    EXPECT_EQ(files[0]->sync().code, error_code::kafka_storage_error);
  }
  EXPECT_EQ(files[0]->sync_error(), EIO);
  EXPECT_FALSE(log->is_offline());
  EXPECT_TRUE(log->flush_work(start_ms + 1).empty());
  EXPECT_TRUE(log->is_offline());
  EXPECT_EQ(_failures, 1);
  log->mark_flushed(3);
  EXPECT_EQ(log->recovery_point(), 0);
}

// The epoch checkpoint is written when the log hands out the flush of the data it describes: a write that
// fails there takes the log offline (the append at the new epoch itself did no file work for it).
TEST_F(disk_failure_test, epoch_checkpoint_that_cannot_be_written_fails_the_flush) {
  auto log = open();
  ASSERT_TRUE(log);
  append_ok(*log, make_batch(3), /*epoch=*/0);
  scoped_faults faults({{io_operation::write, "leader-epoch-checkpoint", EIO}});
  append_ok(*log, make_batch(1), /*epoch=*/1);
  EXPECT_EQ(faults.failed(), 0);
  // The checkpoint is written by the flush job, off the shard: the write fails there, and the job's caller
  // takes the log offline (log_maintenance's mark_failed).
  auto work = log->sync_all_work(start_ms);
  ASSERT_TRUE(work.ok());
  EXPECT_EQ(faults.failed(), 0);
  status failed;
  for (const auto& file : work->files) {
    if (auto st = file->sync(); !st.ok() && failed.ok()) failed = st;
  }
  EXPECT_EQ(faults.failed(), 1);
  ASSERT_FALSE(failed.ok());
  EXPECT_FALSE(log->is_offline());
  log->mark_failed(failed);
  EXPECT_TRUE(log->is_offline());
  EXPECT_EQ(_failures, 1);
  EXPECT_TRUE(log->flush_work(start_ms + 1'000'000).empty());
  EXPECT_EQ(log->flush().code, error_code::kafka_storage_error);
}

// --- log_manager: the whole dir goes offline, other dirs keep working
// ------------------------------------------

class log_dir_failure_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root =
        fs::temp_directory_path() / ("mala-log-dir-failure-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_root);
  }
  void TearDown() override {
    set_io_fault_injector({});
    fs::remove_all(_root);
  }
  std::unique_ptr<log_manager> open_manager() {
    log_manager_options o;
    o.dirs = {_root / "d1", _root / "d2"};
    o.clock_ms = [] { return start_ms; };
    auto opened = log_manager::open(std::move(o));
    EXPECT_TRUE(opened.ok()) << (opened.ok() ? "" : opened.error().message);
    return opened.ok() ? std::move(*opened) : nullptr;
  }
  fs::path _root;
  const uuid _topic_id = uuid::random();
};

// A clean shutdown fsyncs no file one by one: each dir's file system is synced once (syncfs) before its
// recovery points are checkpointed and it is marked clean. When that sync fails the dir is not marked clean
// and keeps its old checkpoints: the next start recovers it, and every record is still there.
TEST_F(log_dir_failure_test, a_failed_file_system_sync_at_shutdown_leaves_the_dir_to_recovery) {
  {
    auto manager = open_manager();
    ASSERT_TRUE(manager);
    auto p0 = manager->create({"t", 0}, _topic_id, {});  // d1
    auto p1 = manager->create({"t", 1}, _topic_id, {});  // d2
    ASSERT_TRUE(p0.ok() && p1.ok());
    for (auto* log : {*p0, *p1}) {
      auto bytes = make_batch(3);
      ASSERT_TRUE(log->append_as_leader(bytes, 0).ok());
    }
    scoped_faults faults({{io_operation::sync, (_root / "d1").string(), EIO}});
    auto st = manager->shutdown(7);
    EXPECT_EQ(st.code, error_code::kafka_storage_error);
    EXPECT_NE(st.message.find("cannot sync the file system"), std::string::npos) << st.message;
    EXPECT_EQ(faults.failed(), 1);  // the one syncfs: no file of d1 was fsynced on its own
  }
  EXPECT_FALSE(fs::exists(_root / "d1" / ".kafka_cleanshutdown"));
  EXPECT_TRUE(fs::exists(_root / "d2" / ".kafka_cleanshutdown"));
  auto manager = open_manager();
  ASSERT_TRUE(manager);
  EXPECT_EQ(manager->loaded().recovered, 1);
  for (int32_t p = 0; p < 2; ++p) {
    auto* log = manager->get({"t", p});
    ASSERT_NE(log, nullptr);
    EXPECT_EQ(log->log_end_offset(), 3);
  }
  EXPECT_TRUE(manager->shutdown().ok());
}

TEST_F(log_dir_failure_test, io_error_in_one_log_takes_its_dir_offline_and_the_other_dir_keeps_working) {
  auto manager = open_manager();
  ASSERT_TRUE(manager);
  std::vector<topic_partition> stopped;
  fs::path stopped_dir;
  manager->set_offline_listener([&](const fs::path& dir, const std::vector<topic_partition>& partitions) {
    stopped_dir = dir;
    stopped = partitions;
  });
  auto p0 = manager->create({"t", 0}, _topic_id, {});  // d1
  auto p1 = manager->create({"t", 1}, _topic_id, {});  // d2
  auto p2 = manager->create({"t", 2}, _topic_id, {});  // d1
  ASSERT_TRUE(p0.ok() && p1.ok() && p2.ok());
  for (auto* log : {*p0, *p1, *p2}) {
    auto bytes = make_batch(3);
    ASSERT_TRUE(log->append_as_leader(bytes, 0).ok());
  }
  // The file work of the creations done first (a write of t-2's failing would take d1 offline in its name).
  for (int i = 0; i < 2000 && manager->worker()->pending() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(manager->worker()->pending(), 0u);
  {
    scoped_faults faults({{io_operation::write, (_root / "d1").string() + "/", ENOSPC, 17}});
    auto bytes = make_batch(2);
    auto failed = (*p0)->append_as_leader(bytes, 0);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().code, error_code::kafka_storage_error);
  }
  auto dirs = manager->dirs();
  EXPECT_FALSE(dirs[0].online);
  EXPECT_NE(dirs[0].error.find("t-0"), std::string::npos) << dirs[0].error;
  EXPECT_TRUE(dirs[1].online);
  EXPECT_EQ(stopped_dir, dirs[0].path);
  EXPECT_EQ(stopped, (std::vector<topic_partition>{{"t", 0}, {"t", 2}}));
  EXPECT_TRUE(manager->is_offline({"t", 0}));
  EXPECT_TRUE(manager->is_offline({"t", 2}));
  EXPECT_FALSE(manager->is_offline({"t", 1}));
  EXPECT_EQ(manager->get({"t", 0}), nullptr);
  // The sibling in the failed dir answers KAFKA_STORAGE_ERROR through the pointer still held.
  auto bytes = make_batch(1);
  auto sibling = (*p2)->append_as_leader(bytes, 0);
  ASSERT_FALSE(sibling.ok());
  EXPECT_EQ(sibling.error().code, error_code::kafka_storage_error);
  EXPECT_EQ((*p2)->read(0, 1000, 3, true).error().code, error_code::kafka_storage_error);
  // The other dir serves on.
  bytes = make_batch(1);
  ASSERT_TRUE((*p1)->append_as_leader(bytes, 0).ok());
  EXPECT_EQ((*p1)->log_end_offset(), 4);
  // An offline replica is not recreated empty in the dir still online.
  auto again = manager->create({"t", 0}, _topic_id, {});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, error_code::kafka_storage_error);
  EXPECT_TRUE(manager->shutdown().ok());
  EXPECT_FALSE(fs::exists(_root / "d1" / ".kafka_cleanshutdown"));
  EXPECT_TRUE(fs::exists(_root / "d2" / ".kafka_cleanshutdown"));
  manager.reset();

  // The next start recovers d1: what was acknowledged is there, the failed append is not.
  manager = open_manager();
  ASSERT_TRUE(manager);
  ASSERT_NE(manager->get({"t", 0}), nullptr);
  EXPECT_EQ(manager->get({"t", 0})->log_end_offset(), 3);
  EXPECT_EQ(manager->get({"t", 1})->log_end_offset(), 4);
  EXPECT_EQ(manager->get({"t", 2})->log_end_offset(), 3);
  EXPECT_TRUE(manager->shutdown().ok());
}

}  // namespace
}  // namespace mala::storage
