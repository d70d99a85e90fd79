// A single-node data dir whose __cluster_metadata-0 holds controller writes as multi-record batches of epoch
// 1 and no quorum-state file opens as the node's Raft log: the lone voter elects itself at once in an epoch
// not below the log's, replays every write whole with its offsets and epochs, appends after them, and does so
// again after a restart (with the quorum-state file the first run wrote).
#include "mala/controller/raft_metadata_log.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <asio/io_context.hpp>

#include "mala/raft/raft_node.h"
#include "support/local_metadata_log.h"

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

struct replayed {
  std::string name;
  int64_t offset;
  int32_t epoch;
  friend bool operator==(const replayed&, const replayed&) = default;
};

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
    raft::raft_node_options o;
    o.config.node_id = 1;
    o.config.voters = {1};
    o.cluster_id = "mala-test-cluster-id0";
    o.voter_endpoints[1] = {"localhost", 1};
    o.metadata_log_dir = _dir;
    auto node = raft::raft_node::open(_io, o);
    EXPECT_TRUE(node.ok()) << (node.ok() ? "" : node.error().message);
    if (!node.ok()) return nullptr;
    (*node)->start();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline &&
           !((*node)->state().current_role() == raft::role::leader &&
             (*node)->state().high_watermark() == (*node)->log().end_offset())) {
      _io.restart();
      _io.run_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ((*node)->state().current_role(), raft::role::leader);
    return std::move(*node);
  }

  static std::vector<replayed> replay_all(const metadata_log& log) {
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
  EXPECT_EQ(replay_all(log), old_writes);

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
  EXPECT_EQ(replay_all(reopened), all);
  stop(node);
}

}  // namespace
}  // namespace mala::controller
