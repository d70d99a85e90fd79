#include "mala/storage/log_manager.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "mala/protocol/record_batch.h"
#include "mala/storage/checkpoint_file.h"

namespace mala::storage {
namespace {

namespace fs = std::filesystem;

constexpr int64_t fixed_now_ms = 1'700'000'000'000;

class log_manager_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = fs::temp_directory_path() / ("mala-log-manager-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_root);
  }
  void TearDown() override { fs::remove_all(_root); }

  fs::path dir(const std::string& name) const { return _root / name; }

  log_manager_options options(std::vector<fs::path> dirs) const {
    log_manager_options o;
    o.dirs = std::move(dirs);
    o.recovery_threads_per_dir = 2;
    o.clock_ms = [] { return fixed_now_ms; };
    return o;
  }

  static std::unique_ptr<log_manager> open_ok(log_manager_options o) {
    auto opened = log_manager::open(std::move(o));
    EXPECT_TRUE(opened.ok()) << (opened.ok() ? "" : opened.error().message);
    return opened.ok() ? std::move(*opened) : nullptr;
  }

  // Appends `batches` batches of `records` records each; returns the log end offset.
  static int64_t append(partition_log& log, int batches, int records = 3, int64_t timestamp = fixed_now_ms) {
    for (int b = 0; b < batches; ++b) {
      protocol::record_batch_builder builder;
      std::string value = "value-" + std::to_string(b);
      for (int r = 0; r < records; ++r) {
        builder.add(timestamp, std::nullopt,
                    std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
      }
      auto bytes = builder.build();
      auto appended = log.append_as_leader(bytes, 0);
      EXPECT_TRUE(appended.ok()) << (appended.ok() ? "" : appended.error().message);
    }
    return log.log_end_offset();
  }

  static std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }

  // A checkpoint file as (version, count, set of entry lines): Kafka does not order the entries.
  struct checkpoint_text {
    std::string version;
    std::string count;
    std::set<std::string> entries;
  };
  static checkpoint_text read_checkpoint_text(const fs::path& path) {
    std::istringstream in(read_text(path));
    checkpoint_text text;
    std::getline(in, text.version);
    std::getline(in, text.count);
    for (std::string line; std::getline(in, line);) text.entries.insert(line);
    return text;
  }

  static bool wait_until_gone(const fs::path& path) {
    for (int i = 0; i < 500; ++i) {
      if (!fs::exists(path)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  fs::path _root;
};

const uuid topic_a_id = uuid::random();
const uuid topic_b_id = uuid::random();

TEST_F(log_manager_test, creates_partitions_in_the_dir_with_fewest) {
  auto manager = open_ok(options({dir("d1"), dir("d2")}));
  ASSERT_TRUE(manager);
  for (int32_t p = 0; p < 4; ++p) {
    auto created = manager->create({"alpha", p}, topic_a_id, {});
    ASSERT_TRUE(created.ok()) << created.error().message;
  }
  auto dirs = manager->dirs();
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(dirs[0].partitions, 2);
  EXPECT_EQ(dirs[1].partitions, 2);
  EXPECT_TRUE(dirs[0].online);
  // Alternating: d1 (0 each, first listed), d2, d1, d2.
  EXPECT_TRUE(fs::is_directory(dir("d1") / "alpha-0"));
  EXPECT_TRUE(fs::is_directory(dir("d2") / "alpha-1"));
  EXPECT_TRUE(fs::is_directory(dir("d1") / "alpha-2"));
  EXPECT_TRUE(fs::is_directory(dir("d2") / "alpha-3"));
  EXPECT_EQ(manager->partitions().size(), 4u);
  EXPECT_NE(manager->get({"alpha", 3}), nullptr);
  EXPECT_EQ(manager->get({"alpha", 4}), nullptr);

  // An existing partition is returned as is; another topic id for it is refused.
  auto* existing = manager->get({"alpha", 1});
  auto again = manager->create({"alpha", 1}, topic_a_id, {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, existing);
  auto other_id = manager->create({"alpha", 1}, topic_b_id, {});
  ASSERT_FALSE(other_id.ok());
  EXPECT_EQ(other_id.error().code, error_code::inconsistent_topic_id);
  EXPECT_TRUE(manager->shutdown().ok());
}

TEST_F(log_manager_test, clean_shutdown_then_reopen_skips_recovery) {
  std::map<topic_partition, int64_t> ends;
  {
    auto manager = open_ok(options({dir("d1"), dir("d2")}));
    ASSERT_TRUE(manager);
    for (int32_t p = 0; p < 3; ++p) {
      auto created = manager->create({"alpha", p}, topic_a_id, {});
      ASSERT_TRUE(created.ok());
      ends[{"alpha", p}] = append(**created, 5 + p);
    }
    auto status = manager->shutdown(42);
    ASSERT_TRUE(status.ok()) << status.message;
    EXPECT_EQ(manager->get({"alpha", 0}), nullptr);
  }
  // Kafka 3.7+'s marker: {"version":0,"brokerEpoch":<epoch>}.
  for (auto d : {"d1", "d2"}) {
    EXPECT_EQ(read_text(dir(d) / ".kafka_cleanshutdown"), R"({"version":0,"brokerEpoch":42})");
  }

  auto manager = open_ok(options({dir("d1"), dir("d2")}));
  ASSERT_TRUE(manager);
  EXPECT_EQ(manager->loaded().partitions, 3);
  EXPECT_EQ(manager->loaded().recovered, 0);
  EXPECT_EQ(manager->loaded().truncated_bytes, 0);
  EXPECT_EQ(manager->loaded().previous_broker_epoch, 42);
  // The marker is gone as soon as the logs are loaded: a crash from here on is unclean.
  EXPECT_FALSE(fs::exists(dir("d1") / ".kafka_cleanshutdown"));
  EXPECT_FALSE(fs::exists(dir("d2") / ".kafka_cleanshutdown"));
  auto parts = manager->partitions();
  ASSERT_EQ(parts.size(), 3u);
  for (const auto& tp : parts) {
    auto* log = manager->get(tp);
    ASSERT_NE(log, nullptr);
    EXPECT_EQ(log->log_end_offset(), ends[tp]) << tp.topic << "-" << tp.partition;
    EXPECT_EQ(log->recovery_point(), ends[tp]);
  }
  // The dir counts survive the restart, so new partitions keep balancing.
  auto dirs = manager->dirs();
  EXPECT_EQ(dirs[0].partitions + dirs[1].partitions, 3);
  EXPECT_TRUE(manager->shutdown().ok());
}

TEST_F(log_manager_test, crash_then_reopen_recovers_and_keeps_data) {
  std::map<topic_partition, int64_t> ends;
  {
    auto manager = open_ok(options({dir("d1"), dir("d2")}));
    ASSERT_TRUE(manager);
    for (int32_t p = 0; p < 2; ++p) {
      auto created = manager->create({"beta", p}, topic_b_id, {});
      ASSERT_TRUE(created.ok());
      ends[{"beta", p}] = append(**created, 10);
    }
    // Destroyed without shutdown(): no flush, no checkpoints, no marker.
  }
  EXPECT_FALSE(fs::exists(dir("d1") / ".kafka_cleanshutdown"));

  auto manager = open_ok(options({dir("d1"), dir("d2")}));
  ASSERT_TRUE(manager);
  EXPECT_EQ(manager->loaded().partitions, 2);
  EXPECT_EQ(manager->loaded().recovered, 2);
  EXPECT_EQ(manager->loaded().previous_broker_epoch, -1);
  for (const auto& [tp, end] : ends) {
    auto* log = manager->get(tp);
    ASSERT_NE(log, nullptr);
    EXPECT_EQ(log->log_end_offset(), end);
    auto read = log->read(0, 1 << 20, end, true);
    ASSERT_TRUE(read.ok()) << read.error().message;
    ASSERT_TRUE(read->data.has_value());
    EXPECT_EQ(read->data->size, log->size_bytes());
  }
  EXPECT_TRUE(manager->shutdown().ok());
}

TEST_F(log_manager_test, remove_renames_then_deletes_the_dir) {
  auto manager = open_ok(options({dir("d1")}));
  ASSERT_TRUE(manager);
  for (int32_t p = 0; p < 2; ++p) {
    auto created = manager->create({"gamma", p}, topic_a_id, {});
    ASSERT_TRUE(created.ok());
    append(**created, 3);
  }
  auto removed = manager->remove({"gamma", 0});
  ASSERT_TRUE(removed.ok()) << removed.message;
  EXPECT_FALSE(fs::exists(dir("d1") / "gamma-0"));
  EXPECT_EQ(manager->get({"gamma", 0}), nullptr);
  EXPECT_EQ(manager->partitions().size(), 1u);
  // The checkpoints the deleter writes after the removal (off the calling thread) no longer name it.
  auto recovery = read_checkpoint_text(dir("d1") / "recovery-point-offset-checkpoint");
  for (int i = 0; i < 1000 && recovery.count != "1"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    recovery = read_checkpoint_text(dir("d1") / "recovery-point-offset-checkpoint");
  }
  EXPECT_EQ(recovery.count, "1");
  ASSERT_EQ(recovery.entries.size(), 1u);
  EXPECT_TRUE(recovery.entries.begin()->starts_with("gamma 1 "));
  // Removing what is not there (a replayed deletion) is fine.
  EXPECT_TRUE(manager->remove({"gamma", 0}).ok());
  EXPECT_TRUE(manager->shutdown().ok());
  for (const auto& entry : fs::directory_iterator(dir("d1"))) {
    EXPECT_FALSE(entry.path().filename().string().ends_with("-delete")) << entry.path();
  }
  EXPECT_TRUE(fs::is_directory(dir("d1") / "gamma-1"));
}

TEST_F(log_manager_test, leftover_delete_dirs_are_removed_and_odd_names_ignored) {
  auto leftover = dir("d1") / "gone-3.0123456789abcdef0123456789abcdef-delete";
  fs::create_directories(leftover);
  std::ofstream(leftover / "00000000000000000000.log") << "old data";
  fs::create_directories(dir("d1") / "not_a_partition");
  fs::create_directories(dir("d1") / "lost+found");
  auto manager = open_ok(options({dir("d1")}));
  ASSERT_TRUE(manager);
  EXPECT_EQ(manager->loaded().partitions, 0);
  EXPECT_TRUE(manager->partitions().empty());
  EXPECT_TRUE(wait_until_gone(leftover));
  EXPECT_TRUE(fs::exists(dir("d1") / "not_a_partition"));
  EXPECT_TRUE(manager->shutdown().ok());
}

TEST_F(log_manager_test, unusable_dir_goes_offline_while_the_other_works) {
  // A path under a regular file can never be created, even by root (which ignores permission bits).
  std::ofstream(dir("plain-file")) << "x";
  auto bad = dir("plain-file") / "logs";
  auto manager = open_ok(options({bad, dir("good")}));
  ASSERT_TRUE(manager);
  auto dirs = manager->dirs();
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_FALSE(dirs[0].online);
  EXPECT_NE(dirs[0].error.find(bad.string()), std::string::npos) << dirs[0].error;
  EXPECT_TRUE(dirs[1].online);
  auto created = manager->create({"delta", 0}, topic_a_id, {});
  ASSERT_TRUE(created.ok()) << created.error().message;
  EXPECT_EQ((*created)->dir().parent_path(), fs::absolute(dir("good")).lexically_normal());
  append(**created, 2);
  EXPECT_TRUE(manager->shutdown().ok());
  EXPECT_TRUE(fs::exists(dir("good") / ".kafka_cleanshutdown"));
}

TEST_F(log_manager_test, open_fails_when_every_dir_is_offline) {
  std::ofstream(dir("plain-file")) << "x";
  auto opened = log_manager::open(options({dir("plain-file") / "a", dir("plain-file") / "b"}));
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().code, error_code::kafka_storage_error);
  EXPECT_NE(opened.error().message.find("plain-file/a"), std::string::npos) << opened.error().message;
}

TEST_F(log_manager_test, open_refuses_a_dir_listed_twice) {
  auto opened = log_manager::open(options({dir("d1"), dir("d1") / "." / ""}));
  ASSERT_FALSE(opened.ok());
}

TEST_F(log_manager_test, duplicate_partition_in_two_dirs_refuses_to_open) {
  {
    auto manager = open_ok(options({dir("d1")}));
    ASSERT_TRUE(manager);
    auto created = manager->create({"eps", 0}, topic_a_id, {});
    ASSERT_TRUE(created.ok());
    append(**created, 2);
    ASSERT_TRUE(manager->shutdown().ok());
  }
  fs::create_directories(dir("d2"));
  fs::copy(dir("d1") / "eps-0", dir("d2") / "eps-0", fs::copy_options::recursive);
  auto opened = log_manager::open(options({dir("d1"), dir("d2")}));
  ASSERT_FALSE(opened.ok());
  const auto& message = opened.error().message;
  EXPECT_NE(message.find((dir("d1") / "eps-0").string()), std::string::npos) << message;
  EXPECT_NE(message.find((dir("d2") / "eps-0").string()), std::string::npos) << message;
}

TEST_F(log_manager_test, checkpoints_hold_one_line_per_partition_of_the_dir) {
  auto manager = open_ok(options({dir("d1"), dir("d2")}));
  ASSERT_TRUE(manager);
  std::vector<partition_log*> logs;
  for (int32_t p = 0; p < 3; ++p) {
    auto created = manager->create({"zeta", p}, topic_a_id, {});
    ASSERT_TRUE(created.ok());
    logs.push_back(*created);
  }
  // zeta-0 and zeta-2 in d1, zeta-1 in d2.
  append(*logs[0], 4, 2);  // end offset 8
  append(*logs[1], 1, 5);  // end offset 5
  ASSERT_TRUE(logs[0]->flush().ok());
  ASSERT_TRUE(logs[1]->flush().ok());
  ASSERT_TRUE(logs[0]->increment_log_start_offset(3, 8).ok());
  ASSERT_TRUE(manager->checkpoint_recovery_points().ok());
  ASSERT_TRUE(manager->checkpoint_log_start_offsets().ok());

  auto d1_recovery = read_checkpoint_text(dir("d1") / "recovery-point-offset-checkpoint");
  EXPECT_EQ(d1_recovery.version, "0");
  EXPECT_EQ(d1_recovery.count, "2");
  EXPECT_EQ(d1_recovery.entries, (std::set<std::string>{"zeta 0 8", "zeta 2 0"}));
  auto d2_recovery = read_checkpoint_text(dir("d2") / "recovery-point-offset-checkpoint");
  EXPECT_EQ(d2_recovery.count, "1");
  EXPECT_EQ(d2_recovery.entries, (std::set<std::string>{"zeta 1 5"}));
  auto d1_start = read_checkpoint_text(dir("d1") / "log-start-offset-checkpoint");
  EXPECT_EQ(d1_start.version, "0");
  EXPECT_EQ(d1_start.entries, (std::set<std::string>{"zeta 0 3", "zeta 2 0"}));

  // The checkpointed log start offset survives a crash (the first segment still starts at 0).
  manager.reset();
  manager = open_ok(options({dir("d1"), dir("d2")}));
  ASSERT_TRUE(manager);
  ASSERT_NE(manager->get({"zeta", 0}), nullptr);
  EXPECT_EQ(manager->get({"zeta", 0})->log_start_offset(), 3);
  EXPECT_EQ(manager->get({"zeta", 0})->log_end_offset(), 8);
  EXPECT_TRUE(manager->shutdown().ok());
}

TEST_F(log_manager_test, high_watermark_checkpoint_is_read_back_at_the_next_start) {
  auto manager = open_ok(options({dir("d1"), dir("d2")}));
  ASSERT_TRUE(manager);
  for (int32_t p = 0; p < 3; ++p) ASSERT_TRUE(manager->create({"zeta", p}, topic_a_id, {}).ok());
  // zeta-2 is not hosted as a replica (no high watermark): it is left out of the file.
  auto hw = [](const topic_partition& tp) -> std::optional<int64_t> {
    if (tp.partition == 2) return std::nullopt;
    return 10 + tp.partition;
  };
  ASSERT_TRUE(manager->checkpoint_high_watermarks(hw).ok());
  auto d1 = read_checkpoint_text(dir("d1") / "replication-offset-checkpoint");
  EXPECT_EQ(d1.version, "0");
  EXPECT_EQ(d1.entries, (std::set<std::string>{"zeta 0 10"}));
  auto d2 = read_checkpoint_text(dir("d2") / "replication-offset-checkpoint");
  EXPECT_EQ(d2.entries, (std::set<std::string>{"zeta 1 11"}));
  EXPECT_EQ(manager->checkpointed_high_watermark({"zeta", 0}), std::nullopt);  // read at open only

  ASSERT_TRUE(manager->shutdown().ok());
  manager.reset();
  manager = open_ok(options({dir("d1"), dir("d2")}));
  ASSERT_TRUE(manager);
  EXPECT_EQ(manager->checkpointed_high_watermark({"zeta", 0}), std::optional<int64_t>(10));
  EXPECT_EQ(manager->checkpointed_high_watermark({"zeta", 1}), std::optional<int64_t>(11));
  EXPECT_EQ(manager->checkpointed_high_watermark({"zeta", 2}), std::nullopt);
  EXPECT_TRUE(manager->shutdown().ok());
}

TEST_F(log_manager_test, mark_offline_drops_the_dirs_partitions) {
  auto manager = open_ok(options({dir("d1"), dir("d2")}));
  ASSERT_TRUE(manager);
  ASSERT_TRUE(manager->create({"eta", 0}, topic_a_id, {}).ok());  // d1
  ASSERT_TRUE(manager->create({"eta", 1}, topic_a_id, {}).ok());  // d2
  manager->mark_offline(dir("d1") / "", "disk failed");
  EXPECT_EQ(manager->get({"eta", 0}), nullptr);
  EXPECT_NE(manager->get({"eta", 1}), nullptr);
  EXPECT_EQ(manager->partitions(), (std::vector<topic_partition>{{"eta", 1}}));
  auto dirs = manager->dirs();
  EXPECT_FALSE(dirs[0].online);
  EXPECT_EQ(dirs[0].error, "disk failed");
  EXPECT_EQ(dirs[0].partitions, 0);
  EXPECT_TRUE(dirs[1].online);
  // Deleting a partition that may be on the offline dir cannot be confirmed.
  EXPECT_EQ(manager->remove({"eta", 0}).code, error_code::kafka_storage_error);
  // New partitions go to the dir still online.
  auto created = manager->create({"eta", 2}, topic_a_id, {});
  ASSERT_TRUE(created.ok());
  EXPECT_EQ((*created)->dir().parent_path(), fs::absolute(dir("d2")).lexically_normal());
  EXPECT_TRUE(manager->shutdown().ok());
  // Only the dir that stayed online is marked clean.
  EXPECT_FALSE(fs::exists(dir("d1") / ".kafka_cleanshutdown"));
  EXPECT_TRUE(fs::exists(dir("d2") / ".kafka_cleanshutdown"));
}

TEST_F(log_manager_test, run_retention_deletes_expired_segments) {
  log_config config;
  config.segment_bytes = 200;  // a segment per batch or so
  config.retention_ms = 60'000;
  config.file_delete_delay_ms = 0;
  auto o = options({dir("d1")});
  o.defaults = config;
  auto manager = open_ok(o);
  ASSERT_TRUE(manager);
  auto created = manager->create({"theta", 0}, topic_a_id, config);
  ASSERT_TRUE(created.ok());
  auto* log = *created;
  append(*log, 6, 3, fixed_now_ms - 3'600'000);  // an hour old
  ASSERT_GT(log->segment_count(), 2u);
  auto end = log->log_end_offset();
  manager->run_retention(fixed_now_ms, [](const topic_partition&) { return std::nullopt; });
  // Every non-active segment was older than retention.ms.
  EXPECT_EQ(log->segment_count(), 1u);
  EXPECT_GT(log->log_start_offset(), 0);
  EXPECT_EQ(log->log_end_offset(), end);
  EXPECT_TRUE(manager->dirs()[0].online);
  EXPECT_TRUE(manager->shutdown().ok());
}

}  // namespace
}  // namespace mala::storage
