// The unit tests' stand-in metadata log (support/local_metadata_log.h): appends are one batch each with
// consecutive offsets and the epoch, replay returns exactly what was committed (from any offset, across a
// reopen), control batches are skipped, a torn tail left by a crash is cut on open, malformed appends are
// refused. And a single-node data dir written so (multi-record batches of epoch 1, no quorum-state file)
// opens as the node's Raft log: the lone voter elects itself at once in an epoch not below the log's, replays
// every write whole with its offsets and epochs, appends after them, and does so again after a restart (with
// the quorum-state file the first run wrote).
#include "support/local_metadata_log.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <asio/io_context.hpp>

#include "mala/controller/raft_metadata_log.h"
#include "mala/protocol/record_batch.h"
#include "mala/raft/raft_node.h"
#include "mala/storage/io_faults.h"
#include "mala/storage/partition_log.h"

namespace mala::controller {
namespace {

namespace fs = std::filesystem;
using metadata::versioned_metadata_record;

versioned_metadata_record topic(const std::string& name, uint8_t id_byte) {
  protocol::topic_record t;
  t.name = name;
  t.topic_id.bytes[15] = id_byte;
  t.topic_id.bytes[0] = 0x40;
  return {t, 0};
}

versioned_metadata_record feature(int16_t level) {
  protocol::feature_level_record f;
  f.name = "metadata.version";
  f.feature_level = level;
  return {f, 0};
}

struct replayed {
  std::string name;  // topic name, or the feature name for a FeatureLevelRecord
  int64_t offset;
  int32_t epoch;
  friend bool operator==(const replayed&, const replayed&) = default;
};

class metadata_log_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _dir = fs::temp_directory_path() / ("mala-metadata-log-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_dir);
  }
  void TearDown() override { fs::remove_all(_dir); }

  std::unique_ptr<local_metadata_log> open(int32_t epoch = 1) {
    local_metadata_log_options o;
    o.epoch = epoch;
    o.clock_ms = [] { return int64_t{1'700'000'000'000}; };
    auto log = local_metadata_log::open(_dir, o);
    EXPECT_TRUE(log.ok()) << (log.ok() ? "" : log.error().message);
    return log.ok() ? std::move(*log) : nullptr;
  }

  static std::vector<replayed> replay_all(const metadata_log& log, int64_t from = 0) {
    std::vector<replayed> out;
    auto st = log.replay(from, [&](const versioned_metadata_record& r, int64_t offset, int32_t epoch) {
      if (auto* t = std::get_if<protocol::topic_record>(&r.record)) {
        out.push_back({t->name, offset, epoch});
      } else if (auto* f = std::get_if<protocol::feature_level_record>(&r.record)) {
        out.push_back({f->name, offset, epoch});
      } else {
        out.push_back({"?", offset, epoch});
      }
      return status::success();
    });
    EXPECT_TRUE(st.ok()) << st.message;
    return out;
  }

  fs::path _dir;
};

TEST_F(metadata_log_test, empty_log_starts_at_zero_in_kafka_layout) {
  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->end_offset(), 0);
  EXPECT_EQ(log->committed_offset(), -1);
  EXPECT_EQ(log->epoch(), 1);
  EXPECT_EQ(metadata_log_partition_dir(_dir), _dir / "__cluster_metadata-0");
  EXPECT_TRUE(fs::is_directory(_dir / "__cluster_metadata-0"));
  EXPECT_TRUE(replay_all(*log).empty());
}

TEST_F(metadata_log_test, append_assigns_consecutive_offsets_per_batch) {
  auto log = open(3);
  ASSERT_TRUE(log);
  std::vector<versioned_metadata_record> first{feature(30)};
  auto a = log->append(first);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->first_offset, 0);
  EXPECT_EQ(a->last_offset, 0);
  EXPECT_EQ(a->epoch, 3);

  std::vector<versioned_metadata_record> second{topic("a", 1), topic("b", 2), topic("c", 3)};
  auto b = log->append(second);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->first_offset, 1);
  EXPECT_EQ(b->last_offset, 3);
  EXPECT_EQ(log->end_offset(), 4);
  EXPECT_EQ(log->committed_offset(), 3);

  const std::vector<replayed> expected{{"metadata.version", 0, 3}, {"a", 1, 3}, {"b", 2, 3}, {"c", 3, 3}};
  EXPECT_EQ(replay_all(*log), expected);
}

TEST_F(metadata_log_test, replay_from_an_offset_inside_a_batch_skips_earlier_records) {
  auto log = open();
  ASSERT_TRUE(log);
  std::vector<versioned_metadata_record> batch{topic("a", 1), topic("b", 2), topic("c", 3)};
  ASSERT_TRUE(log->append(batch).ok());
  const std::vector<replayed> expected{{"b", 1, 1}, {"c", 2, 1}};
  EXPECT_EQ(replay_all(*log, 1), expected);
  EXPECT_TRUE(replay_all(*log, 3).empty());
}

TEST_F(metadata_log_test, reopen_replays_what_was_committed_and_appends_after_it) {
  {
    auto log = open();
    ASSERT_TRUE(log);
    ASSERT_TRUE(log->append(std::vector<versioned_metadata_record>{feature(30)}).ok());
    ASSERT_TRUE(log->append(std::vector<versioned_metadata_record>{topic("a", 1), topic("b", 2)}).ok());
    ASSERT_TRUE(log->close().ok());
  }
  auto log = open(2);
  ASSERT_TRUE(log);
  EXPECT_EQ(log->end_offset(), 3);
  auto c = log->append(std::vector<versioned_metadata_record>{topic("c", 3)});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->first_offset, 3);
  const std::vector<replayed> expected{{"metadata.version", 0, 1}, {"a", 1, 1}, {"b", 2, 1}, {"c", 3, 2}};
  EXPECT_EQ(replay_all(*log), expected);
}

TEST_F(metadata_log_test, torn_tail_is_cut_on_open) {
  {
    auto log = open();
    ASSERT_TRUE(log);
    ASSERT_TRUE(log->append(std::vector<versioned_metadata_record>{topic("a", 1)}).ok());
    ASSERT_TRUE(log->append(std::vector<versioned_metadata_record>{topic("b", 2), topic("c", 3)}).ok());
    ASSERT_TRUE(log->close().ok());
  }
  // A crash in the middle of writing the second batch: its last bytes never reached the disk.
  const fs::path segment = _dir / "__cluster_metadata-0" / "00000000000000000000.log";
  ASSERT_TRUE(fs::exists(segment));
  fs::resize_file(segment, fs::file_size(segment) - 7);

  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->end_offset(), 1);
  EXPECT_EQ(log->committed_offset(), 0);
  EXPECT_EQ(replay_all(*log), (std::vector<replayed>{{"a", 0, 1}}));
  auto d = log->append(std::vector<versioned_metadata_record>{topic("d", 4)});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->first_offset, 1);
  EXPECT_EQ(replay_all(*log), (std::vector<replayed>{{"a", 0, 1}, {"d", 1, 1}}));
}

TEST_F(metadata_log_test, control_batches_are_skipped) {
  {
    // Raft writes control batches (LeaderChangeMessage) into the same partition.
    storage::log_open_options o;
    auto raw = storage::partition_log::open(metadata_log_partition_dir(_dir), {"__cluster_metadata", 0},
                                            storage::log_config{}, o);
    ASSERT_TRUE(raw.ok()) << raw.error().message;
    protocol::record_batch_builder builder;
    builder.control(true);
    const std::vector<uint8_t> key{0, 0, 0, 2};  // version 0, type LEADER_CHANGE
    const std::vector<uint8_t> value{0, 0, 0, 0, 0, 1};
    builder.add(1, std::span<const uint8_t>(key), std::span<const uint8_t>(value));
    auto batch = builder.build();
    ASSERT_TRUE((*raw)->append_as_leader(batch, 1).ok());
    ASSERT_TRUE((*raw)->close().ok());
  }
  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->end_offset(), 1);
  ASSERT_TRUE(log->append(std::vector<versioned_metadata_record>{topic("a", 1)}).ok());
  EXPECT_EQ(replay_all(*log), (std::vector<replayed>{{"a", 1, 1}}));
}

TEST_F(metadata_log_test, callback_error_stops_the_replay) {
  auto log = open();
  ASSERT_TRUE(log);
  ASSERT_TRUE(log->append(std::vector<versioned_metadata_record>{topic("a", 1), topic("b", 2)}).ok());
  int calls = 0;
  auto st = log->replay(0, [&](const versioned_metadata_record&, int64_t, int32_t) {
    ++calls;
    return status::error(error_code::corrupt_message, "stop");
  });
  EXPECT_EQ(st.code, error_code::corrupt_message);
  EXPECT_EQ(st.message, "stop");
  EXPECT_EQ(calls, 1);
}

TEST_F(metadata_log_test, refuses_empty_and_oversized_appends) {
  auto log = open();
  ASSERT_TRUE(log);
  auto empty = log->append({});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, error_code::invalid_request);

  protocol::config_record big;
  big.resource_type = 2;
  big.resource_name = "t";
  big.name = "x";
  big.value = std::string(static_cast<size_t>(max_metadata_batch_bytes) + 16, 'x');
  auto too_big = log->append(std::vector<versioned_metadata_record>{{big, 0}});
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.error().code, error_code::record_list_too_large);
  EXPECT_EQ(log->end_offset(), 0);
}

class raft_metadata_log_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _dir =
        fs::temp_directory_path() / ("mala-raft-metadata-log-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_dir);
  }
  void TearDown() override { fs::remove_all(_dir); }

  // A single-voter raft node on `_io`, run until it leads and has committed the first entry of its epoch.
  std::unique_ptr<raft::raft_node> open_leader() {
    auto node = open_node();
    if (node) run_until_leader(*node);
    return node;
  }

  std::unique_ptr<raft::raft_node> open_node() {
    raft::raft_node_options o;
    o.config.node_id = 1;
    o.config.voters = {1};
    o.cluster_id = "mala-test-cluster-id0";
    o.voter_endpoints[1] = {"localhost", 1};
    o.metadata_log_dir = _dir;
    auto node = raft::raft_node::open(_io, o);
    EXPECT_TRUE(node.ok()) << (node.ok() ? "" : node.error().message);
    if (!node.ok()) return nullptr;
    return std::move(*node);
  }

  void run_until_leader(raft::raft_node& node) {
    node.start();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline &&
           !(node.state().current_role() == raft::role::leader &&
             node.state().high_watermark() == node.log().end_offset())) {
      _io.restart();
      _io.run_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(node.state().current_role(), raft::role::leader);
  }

  static std::vector<replayed> replay_committed(const metadata_log& log) {
    std::vector<replayed> out;
    auto st = log.replay(0, [&](const versioned_metadata_record& r, int64_t offset, int32_t epoch) {
      auto* t = std::get_if<protocol::topic_record>(&r.record);
      out.push_back({t ? t->name : "?", offset, epoch});
      return status::success();
    });
    EXPECT_TRUE(st.ok()) << st.message;
    return out;
  }

  void stop(std::unique_ptr<raft::raft_node>& node) {
    node->stop();
    _io.restart();
    _io.run_for(std::chrono::milliseconds(20));
    node.reset();
  }

  fs::path _dir;
  asio::io_context _io;
};

TEST_F(raft_metadata_log_test, a_log_of_committed_batches_without_quorum_state_opens_under_raft) {
  {
    auto written = local_metadata_log::open(_dir);
    ASSERT_TRUE(written.ok()) << written.error().message;
    ASSERT_TRUE(
        (*written)->append(std::vector<versioned_metadata_record>{topic("a", 1), topic("b", 2)}).ok());
    ASSERT_TRUE((*written)->append(std::vector<versioned_metadata_record>{topic("c", 3)}).ok());
  }
  ASSERT_FALSE(fs::exists(_dir / "__cluster_metadata-0" / "quorum-state"));

  auto node = open_leader();
  ASSERT_TRUE(node);
  EXPECT_GE(node->state().epoch(), 1);
  raft_metadata_log log(*node);
  const std::vector<replayed> old_writes{{"a", 0, 1}, {"b", 1, 1}, {"c", 2, 1}};
  EXPECT_EQ(replay_committed(log), old_writes);

  auto d = log.append(std::vector<versioned_metadata_record>{topic("d", 4)});
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_GT(d->first_offset, 2);  // after the old writes and the new epoch's leader-change entry
  EXPECT_EQ(d->epoch, node->state().epoch());
  const int32_t first_epoch = node->state().epoch();
  _io.restart();
  _io.run_for(std::chrono::milliseconds(50));
  EXPECT_EQ(log.committed_offset(), d->last_offset);
  stop(node);

  EXPECT_TRUE(fs::exists(_dir / "__cluster_metadata-0" / "quorum-state"));
  node = open_leader();
  ASSERT_TRUE(node);
  EXPECT_GT(node->state().epoch(), first_epoch);
  raft_metadata_log reopened(*node);
  std::vector<replayed> all = old_writes;
  all.push_back({"d", d->first_offset, first_epoch});
  EXPECT_EQ(replay_committed(reopened), all);
  stop(node);
}

// KIP-868 metadata transactions as Kafka writes them (its controller bootstraps a log inside one, and a
// transaction may span several writes): the records between Begin and End come together once the End is
// read, an aborted transaction's records never, and a log that ends inside a transaction stops before it
// and says so (the next active controller aborts it).
TEST_F(raft_metadata_log_test, metadata_transactions_are_replayed_whole_or_dropped) {
  auto begin = [] {
    protocol::begin_transaction_record r;
    r.name = "Bootstrap records";
    return versioned_metadata_record{r, 0};
  };
  const versioned_metadata_record end{protocol::end_transaction_record{}, 0};
  const versioned_metadata_record abort{protocol::abort_transaction_record{}, 0};
  int64_t open_transaction_start = -1;
  {
    auto written = local_metadata_log::open(_dir);
    ASSERT_TRUE(written.ok()) << written.error().message;
    auto& log = **written;
    ASSERT_TRUE(log.append(std::vector<versioned_metadata_record>{topic("a", 1)}).ok());           // 0
    ASSERT_TRUE(log.append(std::vector<versioned_metadata_record>{begin(), topic("b", 2)}).ok());  // 1-2
    ASSERT_TRUE(log.append(std::vector<versioned_metadata_record>{topic("c", 3), end}).ok());      // 3-4
    ASSERT_TRUE(log.append(std::vector<versioned_metadata_record>{begin(), topic("x", 4)}).ok());  // 5-6
    ASSERT_TRUE(log.append(std::vector<versioned_metadata_record>{topic("y", 5), abort}).ok());    // 7-8
    ASSERT_TRUE(log.append(std::vector<versioned_metadata_record>{topic("d", 6)}).ok());           // 9
    open_transaction_start = log.end_offset();
    ASSERT_TRUE(log.append(std::vector<versioned_metadata_record>{begin(), topic("z", 7)}).ok());  // 10-11
  }
  auto node = open_leader();
  ASSERT_TRUE(node);
  raft_metadata_log log(*node);
  std::vector<std::string> names;
  std::vector<int64_t> offsets;
  auto position = log.replay_range(
      0, node->state().high_watermark(), [&](const versioned_metadata_record& r, int64_t offset, int32_t) {
        if (auto* t = std::get_if<protocol::topic_record>(&r.record)) {
          names.push_back(t->name);
        } else if (std::holds_alternative<protocol::begin_transaction_record>(r.record)) {
          names.push_back("begin");
        } else if (std::holds_alternative<protocol::end_transaction_record>(r.record)) {
          names.push_back("end");
        } else {
          names.push_back("abort");
        }
        offsets.push_back(offset);
        return status::success();
      });
  ASSERT_TRUE(position.ok()) << position.error().message;
  EXPECT_EQ(names, (std::vector<std::string>{"a", "begin", "b", "c", "end", "abort", "d"}));
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 1, 2, 3, 4, 8, 9}));
  EXPECT_EQ(position->next_offset, open_transaction_start);
  EXPECT_TRUE(position->open_transaction);

  // Up to a bound inside the first transaction: it waits whole, open as far as the replay can tell.
  names.clear();
  offsets.clear();
  position = log.replay_range(0, 4, [&](const versioned_metadata_record&, int64_t offset, int32_t) {
    offsets.push_back(offset);
    return status::success();
  });
  ASSERT_TRUE(position.ok());
  EXPECT_EQ(offsets, std::vector<int64_t>{0});
  EXPECT_EQ(position->next_offset, 1);
  EXPECT_TRUE(position->open_transaction);
  stop(node);
}

// Issue 20: no fsync on a shard thread. The thread running the node's io_context (shard 0 in a broker; this
// test's thread here) writes the quorum state and the log but syncs neither: the node's blocking thread does,
// and a write commits only once synced (the lone voter's high watermark waits for its flush), so everything
// committed is there after a restart. Every sync of the storage library is seen through the io_faults hook.
TEST_F(raft_metadata_log_test, the_shard_thread_never_syncs_and_committed_writes_survive_a_restart) {
  std::mutex mutex;
  std::map<std::thread::id, int> syncs_by_thread;
  std::atomic<bool> counting{false};
  storage::set_io_fault_injector([&](storage::io_operation op, const fs::path&, size_t) {
    if (op == storage::io_operation::sync && counting.load()) {
      std::lock_guard lock(mutex);
      ++syncs_by_thread[std::this_thread::get_id()];
    }
    return storage::io_fault{};
  });
  // Opening (the log's recovery, before the shards run) may sync on the opening thread; what follows may not.
  auto node = open_node();
  ASSERT_TRUE(node);
  counting = true;
  run_until_leader(*node);
  raft_metadata_log log(*node);
  std::vector<std::string> names;
  int64_t last_offset = -1;
  for (int i = 0; i < 30; ++i) {
    names.push_back("t" + std::to_string(i));
    auto appended =
        log.append(std::vector<versioned_metadata_record>{topic(names.back(), static_cast<uint8_t>(i + 1))});
    ASSERT_TRUE(appended.ok()) << appended.error().message;
    last_offset = appended->last_offset;
    if (i % 3 == 0) {  // some writes while a sync is in flight, some after
      _io.restart();
      _io.poll();
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline && log.committed_offset() < last_offset) {
    _io.restart();
    _io.run_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(log.committed_offset(), last_offset);
  node->stop();
  _io.restart();
  _io.run_for(std::chrono::milliseconds(20));
  counting = false;
  node.reset();  // the close at shutdown flushes on this thread: not counted
  storage::set_io_fault_injector({});
  {
    std::lock_guard lock(mutex);
    EXPECT_EQ(syncs_by_thread.count(std::this_thread::get_id()), 0u);
    int elsewhere = 0;
    for (const auto& [thread, n] : syncs_by_thread) elsewhere += n;
    EXPECT_GT(elsewhere, 0);  // the hook saw the syncs, on the node's blocking thread
  }

  node = open_leader();
  ASSERT_TRUE(node);
  raft_metadata_log reopened(*node);
  std::vector<std::string> replayed_names;
  for (const auto& r : replay_committed(reopened)) replayed_names.push_back(r.name);
  EXPECT_EQ(replayed_names, names);
  stop(node);
}

}  // namespace
}  // namespace mala::controller
