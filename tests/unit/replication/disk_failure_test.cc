// A log dir failing under its replicas (Kafka's ReplicaManager.handleLogDirFailure): the produce that hit the
// disk error gets KAFKA_STORAGE_ERROR with nothing appended, every replica in that dir stops (parked produces
// and fetches fire with KAFKA_STORAGE_ERROR) and answers KAFKA_STORAGE_ERROR from then on, and the replicas
// in the other dir keep serving. Faults are injected into the storage library's file I/O
// (mala/storage/io_faults.h).
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "mala/replication/replica_manager.h"
#include "mala/storage/io_faults.h"
#include "replication_test_util.h"

namespace mala::replication {
namespace {

using testing::make_batch;
using testing::start_ms;

constexpr int32_t self = 1;

class disk_failure_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = std::filesystem::temp_directory_path() /
            ("mala-replication-disk-test-" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(_root);
    storage::log_manager_options o;
    o.dirs = {_root / "d1", _root / "d2"};
    o.clock_ms = [] { return start_ms; };
    auto opened = storage::log_manager::open(std::move(o));
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    _logs = std::move(*opened);
    replica_manager_options ro;
    ro.local_replica_id = self;
    ro.clock_ms = [] { return start_ms; };
    _replicas = std::make_unique<replica_manager>(*_logs, ro);
    // As the node wires them (src/app/main.cc).
    _logs->set_offline_listener(
        [this](const std::filesystem::path&, const std::vector<storage::topic_partition>& partitions) {
          _replicas->mark_offline(partitions);
        });
  }
  void TearDown() override {
    storage::set_io_fault_injector({});
    _logs->set_offline_listener({});
    _replicas.reset();
    _logs.reset();
    std::filesystem::remove_all(_root);
  }

  // Leader here; with {self, 2} in the ISR an acks=-1 produce waits for replica 2, which never fetches.
  partition* lead(int32_t index, std::vector<int32_t> isr = {self}, int32_t leader_epoch = 1) {
    partition_leadership l;
    l.topic = "orders";
    l.partition = index;
    l.topic_id = _topic_id;
    l.state = partition_state{self, leader_epoch, leader_epoch, {self, 2}, std::move(isr), 1};
    auto applied = _replicas->apply_leadership(l);
    EXPECT_TRUE(applied.ok()) << (applied.ok() ? "" : applied.error().message);
    return _replicas->get({"orders", index});
  }

  std::filesystem::path _root;
  std::unique_ptr<storage::log_manager> _logs;
  std::unique_ptr<replica_manager> _replicas;
  const uuid _topic_id = uuid::random();
};

TEST_F(disk_failure_test, failed_append_stops_every_replica_of_the_dir_and_the_other_dir_serves_on) {
  partition* p0 = lead(0, {self, 2});  // d1
  partition* p1 = lead(1);             // d2
  partition* p2 = lead(2);             // d1
  ASSERT_TRUE(p0 && p1 && p2);
  ASSERT_EQ(p0->log().dir().parent_path().filename(), "d1");
  ASSERT_EQ(p1->log().dir().parent_path().filename(), "d2");

  // An acks=all produce parked on p0 and a fetch parked on p2.
  auto parked_bytes = make_batch(3);
  auto parked = p0->append(parked_bytes, -1);
  ASSERT_TRUE(parked.ok()) << parked.error().message;
  ASSERT_FALSE(parked->done);
  std::vector<error_code> produce_fired;
  std::vector<error_code> fetch_fired;
  p0->add_high_watermark_waiter(parked->required_offset, [&](error_code e) { produce_fired.push_back(e); });
  p2->add_data_waiter([&](error_code e) { fetch_fired.push_back(e); });

  {
    // The disk of d1 is full: half of the next batch reaches the file.
    storage::set_io_fault_injector([d1 = (_root / "d1").string()](storage::io_operation op,
                                                                  const std::filesystem::path& path,
                                                                  size_t bytes) -> storage::io_fault {
      if (op == storage::io_operation::write && path.string().starts_with(d1)) return {ENOSPC, bytes / 2};
      return {};
    });
    auto bytes = make_batch(2);
    auto failed = p0->append(bytes, 1);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().code, error_code::kafka_storage_error);
    storage::set_io_fault_injector({});
  }
  EXPECT_EQ(p0->log_end_offset(), 3);
  EXPECT_EQ(p0->high_watermark(), 0);
  EXPECT_EQ(produce_fired, (std::vector<error_code>{error_code::kafka_storage_error}));
  EXPECT_EQ(fetch_fired, (std::vector<error_code>{error_code::kafka_storage_error}));
  EXPECT_TRUE(_logs->is_offline({"orders", 0}));
  EXPECT_TRUE(_logs->is_offline({"orders", 2}));
  EXPECT_FALSE(_logs->is_offline({"orders", 1}));

  // Both replicas of d1 answer KAFKA_STORAGE_ERROR, with the disk back or not.
  for (partition* p : {p0, p2}) {
    auto bytes = make_batch(1);
    EXPECT_TRUE(p->log().is_offline());
    auto appended = p->append(bytes, 1);
    ASSERT_FALSE(appended.ok());
    EXPECT_EQ(appended.error().code, error_code::kafka_storage_error) << appended.error().message;
    read_request r;
    auto read = p->read(r);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.error().code, error_code::kafka_storage_error);
    auto listed = p->list_offset(storage::latest_timestamp, isolation_level::read_uncommitted, std::nullopt);
    ASSERT_FALSE(listed.ok());
    EXPECT_EQ(listed.error().code, error_code::kafka_storage_error);
    EXPECT_EQ(p->waiter_count(), 0u);
  }
  // New leadership for an offline replica is refused (it is not recreated in d2 either).
  partition_leadership l;
  l.topic = "orders";
  l.partition = 0;
  l.topic_id = _topic_id;
  l.state = partition_state{self, 2, 2, {self, 2}, {self}, 1};
  auto applied = _replicas->apply_leadership(l);
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.error().code, error_code::kafka_storage_error);
  EXPECT_EQ(_replicas->get({"orders", 0}), p0);

  // d2 serves on.
  auto bytes = make_batch(4);
  auto ok = p1->append(bytes, 1);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(p1->log_end_offset(), 4);
  EXPECT_EQ(p1->high_watermark(), 4);
  read_request r;
  auto read = p1->read(r);
  ASSERT_TRUE(read.ok()) << read.error().message;
  ASSERT_TRUE(read->data.has_value());
}

// Becoming leader changes the epoch cache in memory; the checkpoint is written with the log's next flush,
// and a failure there takes the dir offline.
TEST_F(disk_failure_test, failed_epoch_checkpoint_after_becoming_leader_takes_the_dir_offline) {
  partition* p0 = lead(0);
  ASSERT_TRUE(p0);
  storage::set_io_fault_injector([](storage::io_operation op, const std::filesystem::path& path,
                                    size_t) -> storage::io_fault {
    if (op == storage::io_operation::write && path.filename().string().starts_with("leader-epoch-checkpoint"))
      return {EIO, 0};
    return {};
  });
  partition_leadership l;
  l.topic = "orders";
  l.partition = 0;
  l.topic_id = _topic_id;
  l.state = partition_state{self, 2, 2, {self, 2}, {self}, 1};
  auto applied = _replicas->apply_leadership(l);
  ASSERT_TRUE(applied.ok()) << applied.error().message;
  EXPECT_FALSE(p0->log().is_offline());
  // The flush job writes the checkpoint off the shard; its failure takes the log offline through
  // mark_failed, as log_maintenance reports it.
  auto flush = p0->log().sync_all_work(start_ms);
  ASSERT_TRUE(flush.ok());
  status failed;
  for (const auto& file : flush->files) {
    if (auto st = file->sync(); !st.ok() && failed.ok()) failed = st;
  }
  storage::set_io_fault_injector({});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.code, error_code::kafka_storage_error);
  p0->log().mark_failed(failed);
  EXPECT_TRUE(p0->log().is_offline());
  EXPECT_TRUE(_logs->is_offline({"orders", 0}));
  EXPECT_FALSE(_logs->dirs()[0].online);
}

}  // namespace
}  // namespace mala::replication
