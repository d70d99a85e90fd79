// KIP-113: a replica's log moved to another log dir of the node (replica_manager::alter_log_dir and
// copy_to_future_logs over a real log manager with two dirs): the copy follows appends made while it runs,
// the swap keeps every batch and the replica's state, the old dir is emptied, and a stop in the middle of a
// move or of a swap leaves what the next load can use.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

#include "mala/replication/replica_manager.h"
#include "mala/storage/segment_files.h"
#include "replication_test_util.h"

namespace mala::replication {
namespace {

using testing::make_batch;
namespace fs = std::filesystem;

constexpr int32_t self = 1;

class log_dir_moves_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = fs::temp_directory_path() / ("mala-log-dir-moves-" + std::to_string(std::random_device{}()));
    fs::create_directories(_root);
    open_logs();
  }
  void TearDown() override {
    _logs.reset();
    fs::remove_all(_root);
  }
  void open_logs() {
    storage::log_manager_options o;
    o.dirs = {_root / "a", _root / "b"};
    o.clock_ms = [this] { return _now; };
    auto opened = storage::log_manager::open(std::move(o));
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    _logs = std::move(*opened);
  }
  replica_manager_options options() {
    replica_manager_options o;
    o.local_replica_id = self;
    o.clock_ms = [this] { return _now; };
    return o;
  }
  static partition_leadership leader_of(const std::string& topic, int32_t partition) {
    partition_leadership l;
    l.topic = topic;
    l.partition = partition;
    l.topic_id = topic_id;
    l.state = partition_state{self, 1, 1, {self}, {self}, 1};
    return l;
  }
  // Every record offset the log holds, read back batch by batch.
  static int64_t bytes_of(storage::partition_log& log) {
    auto read = log.read(log.log_start_offset(), 64 << 20, log.log_end_offset(), true);
    EXPECT_TRUE(read.ok());
    return read.ok() && read->data ? read->data->size : 0;
  }
  fs::path dir(const char* name) const { return _root / name; }
  // The replica of orders-0, leading, with `batches` batches of `records` records.
  static partition* leader_with_batches(replica_manager& m, int batches, int records) {
    EXPECT_TRUE(m.apply_leadership(leader_of("orders", 0)).ok());
    auto* p = m.get({"orders", 0});
    for (int i = 0; p && i < batches; ++i) {
      auto batch = make_batch(records);
      EXPECT_TRUE(p->append(batch, 1).ok());
    }
    return p;
  }
  // orders-0 as leader_with_batches() makes it, moving from the dir holding it to the other one.
  struct started_move {
    partition* p = nullptr;
    fs::path source;
    fs::path target;
  };
  started_move start_move(replica_manager& m, int batches, int records) {
    started_move out;
    out.p = leader_with_batches(m, batches, records);
    const size_t from = *_logs->dir_index_of({"orders", 0});
    out.source = dir(from == 0 ? "a" : "b");
    out.target = dir(from == 0 ? "b" : "a");
    EXPECT_EQ(m.alter_log_dir({"orders", 0}, out.target), error_code::none);
    return out;
  }
  // A future log of `tp` in dir `to` made by hand, holding what the log holds (up to 1 MiB).
  storage::partition_log* copied_future_log(const storage::topic_partition& tp, size_t to) {
    auto future = _logs->create_future(tp, to, _logs->get(tp)->config());
    EXPECT_TRUE(future.ok());
    if (!future.ok()) return nullptr;
    auto* current = _logs->get(tp);
    auto read = current->read(0, 1 << 20, current->log_end_offset(), true);
    EXPECT_TRUE(read.ok() && read->data);
    if (!read.ok() || !read->data) return nullptr;
    auto bytes = read->data->file->read(read->data->position, read->data->size);
    EXPECT_TRUE(bytes.ok() && (*future)->append_as_follower(*bytes).ok());
    return *future;
  }
  // Copies until the future log went to the (held) file worker to be moved in: its data synced first.
  void copy_until_the_worker_has_it(replica_manager& m, const storage::topic_partition& tp) {
    for (int i = 0; i < 10000 && _logs->get_future(tp) != nullptr; ++i) {
      m.copy_to_future_logs(1 << 20);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  // Copies slices until the move is over (the file worker moves the future log in between).
  static void move_to_the_end(replica_manager& m, int64_t slice) {
    for (int turns = 0; m.moving() && turns < 100000; ++turns) {
      m.copy_to_future_logs(slice);
      std::this_thread::yield();
    }
  }
  void wait_for_the_worker() {
    for (int i = 0; _logs->worker()->pending() > 0 && i < 10000; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Holds the file worker until the returned promise is set.
  std::shared_ptr<std::promise<void>> hold_the_worker() {
    auto gate = std::make_shared<std::promise<void>>();
    _logs->worker()->post([opened = gate->get_future().share()] { opened.wait(); });
    return gate;
  }

  static inline const uuid topic_id = uuid::random();
  fs::path _root;
  int64_t _now = testing::start_ms;
  std::unique_ptr<storage::log_manager> _logs;
};

TEST_F(log_dir_moves_test, a_log_moves_with_the_batches_appended_during_the_copy) {
  replica_manager m(*_logs, options());
  const storage::topic_partition tp{"orders", 0};
  ASSERT_TRUE(m.apply_leadership(leader_of("orders", 0)).ok());
  auto* p = m.get(tp);
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 20; ++i) {
    auto batch = make_batch(5);
    ASSERT_TRUE(p->append(batch, 1).ok());
  }
  const size_t from = *_logs->dir_index_of(tp);
  const fs::path target = dir(from == 0 ? "b" : "a");

  EXPECT_EQ(m.alter_log_dir(tp, _root / "c"), error_code::log_dir_not_found);
  EXPECT_EQ(m.alter_log_dir(tp, dir(from == 0 ? "a" : "b")), error_code::none);  // already there
  EXPECT_FALSE(m.moving());
  ASSERT_EQ(m.alter_log_dir(tp, target), error_code::none);
  EXPECT_TRUE(m.moving());
  EXPECT_EQ(m.alter_log_dir(tp, target), error_code::none);  // the same move goes on

  // DescribeLogDirs lists the future replica in the target dir with its lag.
  auto described = m.describe_log_dirs(std::nullopt);
  const auto& future_dir = described[from == 0 ? 1 : 0];
  ASSERT_EQ(future_dir.future_logs.count("orders"), 1u);
  EXPECT_EQ(future_dir.future_logs.at("orders").at(0).offset_lag, 100);

  // A small slice at a time, with appends in between.
  EXPECT_GT(m.copy_to_future_logs(200), 0);
  EXPECT_TRUE(m.moving());
  for (int i = 0; i < 3; ++i) {
    auto batch = make_batch(2);
    ASSERT_TRUE(p->append(batch, 1).ok());
  }
  EXPECT_EQ(m.get(tp), p);
  move_to_the_end(m, 200);
  EXPECT_FALSE(m.moving());
  EXPECT_EQ(_logs->dir_index_of(tp), from == 0 ? 1u : 0u);
  EXPECT_EQ(&p->log(), _logs->get(tp));
  EXPECT_EQ(p->log().dir(), target / "orders-0");
  EXPECT_EQ(p->log_end_offset(), 106);
  EXPECT_FALSE(fs::exists(dir(from == 0 ? "a" : "b") / "orders-0"));
  wait_for_the_worker();
  EXPECT_FALSE(fs::exists(target / "orders-0" / storage::swap_ready_file));
  EXPECT_GT(bytes_of(p->log()), 0);
  auto read = p->log().read(0, 64 << 20, p->log_end_offset(), true);
  ASSERT_TRUE(read.ok() && read->data);

  // The replica serves on from the new dir.
  auto batch = make_batch(1);
  auto appended = p->append(batch, 1);
  ASSERT_TRUE(appended.ok()) << appended.error().message;
  EXPECT_EQ(p->log_end_offset(), 107);
}

TEST_F(log_dir_moves_test, a_large_log_moves_in_slices) {
  replica_manager m(*_logs, options());
  const storage::topic_partition tp{"orders", 0};
  ASSERT_TRUE(m.apply_leadership(leader_of("orders", 0)).ok());
  auto* p = m.get(tp);
  protocol::record_batch_builder builder;
  const std::string value(1000, 'x');
  for (int i = 0; i < 300; ++i) {
    protocol::record_batch_builder b;
    for (int r = 0; r < 100; ++r)
      b.add(testing::start_ms, std::nullopt,
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
    auto batch = b.build();
    ASSERT_TRUE(p->append(batch, 1).ok());
  }
  ASSERT_EQ(m.alter_log_dir(tp, dir(*_logs->dir_index_of(tp) == 0 ? "b" : "a")), error_code::none);
  int turns = 0;
  while ((m.copy_to_future_logs(4 << 20), m.moving()) && ++turns < 100000) {
    auto batch = make_batch(3);
    ASSERT_TRUE(p->append(batch, 1).ok());
    std::this_thread::yield();
  }
  EXPECT_FALSE(m.moving());
  EXPECT_GT(turns, 3);
  EXPECT_EQ(p->log_end_offset(), 30000 + 3 * turns);
}

TEST_F(log_dir_moves_test, a_replica_not_hosted_yet_is_created_in_the_dir_asked_for) {
  replica_manager m(*_logs, options());
  // Both dirs empty: without a preference the first one would be chosen.
  EXPECT_EQ(m.alter_log_dir({"later", 0}, dir("b")), error_code::replica_not_available);
  ASSERT_TRUE(m.apply_leadership(leader_of("later", 0)).ok());
  EXPECT_EQ(_logs->dir_index_of({"later", 0}), 1u);
}

TEST_F(log_dir_moves_test, a_truncation_during_the_move_is_followed) {
  replica_manager m(*_logs, options());
  const storage::topic_partition tp{"orders", 0};
  auto* p = leader_with_batches(m, 10, 3);
  ASSERT_NE(p, nullptr);
  const size_t from = *_logs->dir_index_of(tp);
  ASSERT_EQ(m.alter_log_dir(tp, dir(from == 0 ? "b" : "a")), error_code::none);
  m.copy_to_future_logs(300);  // a few batches copied, then the log loses its tail
  EXPECT_TRUE(m.moving());
  ASSERT_GT(_logs->get_future(tp)->log_end_offset(), 6);
  partition_leadership follower = leader_of("orders", 0);
  follower.state.leader = 2;
  follower.state.leader_epoch = 2;
  follower.state.partition_epoch = 2;
  follower.state.replicas = {self, 2};
  follower.state.isr = {self, 2};
  ASSERT_TRUE(m.apply_leadership(follower).ok());
  ASSERT_TRUE(p->truncate_to(6).ok());
  move_to_the_end(m, 1 << 20);
  EXPECT_EQ(_logs->dir_index_of(tp), from == 0 ? 1u : 0u);
  EXPECT_EQ(p->log_end_offset(), 6);
  EXPECT_EQ(p->log().log_end_offset(), 6);
}

TEST_F(log_dir_moves_test, a_stop_leaves_a_move_to_start_over_and_a_swap_to_finish) {
  const storage::topic_partition tp{"orders", 0};
  {
    replica_manager m(*_logs, options());
    ASSERT_TRUE(m.apply_leadership(leader_of("orders", 0)).ok());
    auto batch = make_batch(4);
    ASSERT_TRUE(m.get(tp)->append(batch, 1).ok());
    ASSERT_EQ(m.alter_log_dir(tp, dir(*_logs->dir_index_of(tp) == 0 ? "b" : "a")), error_code::none);
    ASSERT_TRUE(m.remove_partition(tp, false).ok());
  }
  const size_t from = *_logs->dir_index_of(tp);
  const size_t to = from == 0 ? 1 : 0;
  ASSERT_TRUE(_logs->shutdown().ok());
  _logs.reset();
  // A move the stop interrupted: the next load has the log where it was and the future log beside it, and
  // the move goes on once the replica is created.
  open_logs();
  EXPECT_EQ(_logs->dir_index_of(tp), from);
  EXPECT_EQ(_logs->get(tp)->log_end_offset(), 4);
  ASSERT_NE(_logs->get_future(tp), nullptr);
  {
    replica_manager m(*_logs, options());
    ASSERT_TRUE(m.apply_leadership(leader_of("orders", 0)).ok());
    EXPECT_TRUE(m.moving());
    move_to_the_end(m, 1 << 20);
    EXPECT_EQ(_logs->dir_index_of(tp), to);
    EXPECT_EQ(m.get(tp)->log_end_offset(), 4);
    // And back, to leave the log in `from` for what follows.
    ASSERT_EQ(m.alter_log_dir(tp, dir(from == 0 ? "a" : "b")), error_code::none);
    move_to_the_end(m, 1 << 20);
    ASSERT_EQ(_logs->dir_index_of(tp), from);
    ASSERT_TRUE(m.remove_partition(tp, false).ok());
  }

  // A stop between a swap's renames: the marked future log is all there is, and becomes the log.
  auto* future = copied_future_log(tp, to);
  ASSERT_NE(future, nullptr);
  const fs::path future_path = future->dir();
  const fs::path current_path = _logs->get(tp)->dir();
  ASSERT_TRUE(_logs->shutdown().ok());
  _logs.reset();
  std::ofstream(future_path / storage::swap_ready_file).close();
  fs::rename(current_path, current_path.parent_path() / "orders-0.0123456789abcdef0123456789abcdef-delete");
  open_logs();
  EXPECT_EQ(_logs->dir_index_of(tp), to);
  EXPECT_EQ(_logs->get(tp)->log_end_offset(), 4);
  EXPECT_FALSE(fs::exists(future_path));
}

TEST_F(log_dir_moves_test, the_future_log_moves_in_off_the_shard_while_the_replica_appends_on) {
  replica_manager m(*_logs, options());
  const storage::topic_partition tp{"orders", 0};
  const auto [p, source, target] = start_move(m, 20, 5);
  ASSERT_NE(p, nullptr);
  auto* old_log = &p->log();

  // The copy catches up; the worker (held) has the future log to move in, and the replica appends on.
  auto gate = hold_the_worker();
  copy_until_the_worker_has_it(m, tp);
  EXPECT_TRUE(m.moving());
  EXPECT_EQ(_logs->get_future(tp), nullptr);
  EXPECT_EQ(_logs->finish_move_in(tp).value(), nullptr);
  for (int i = 0; i < 3; ++i) {
    auto batch = make_batch(2);
    ASSERT_TRUE(p->append(batch, 1).ok());
  }
  EXPECT_EQ(m.copy_to_future_logs(1 << 20), 0);
  EXPECT_EQ(&p->log(), old_log);
  auto described = m.describe_log_dirs(std::nullopt);
  const auto& future_dir = described[source == dir("a") ? 1 : 0];
  ASSERT_EQ(future_dir.future_logs.count("orders"), 1u);
  EXPECT_EQ(future_dir.future_logs.at("orders").at(0).offset_lag, 6);

  // The log syncs what came meanwhile: the commit waits until the future log has it synced too.
  ASSERT_TRUE(old_log->flush().ok());
  ASSERT_EQ(old_log->recovery_point(), 106);

  // Moved in: beside the log in the other dir, marked; the copy then takes what came meanwhile, and the
  // commit swaps the logs.
  gate->set_value();
  wait_for_the_worker();
  EXPECT_TRUE(fs::exists(target / "orders-0" / storage::swap_ready_file));
  EXPECT_TRUE(fs::exists(source / "orders-0"));
  move_to_the_end(m, 1 << 20);
  EXPECT_FALSE(m.moving());
  EXPECT_EQ(p->log().dir(), target / "orders-0");
  EXPECT_EQ(p->log_end_offset(), 106);
  EXPECT_EQ(p->log().recovery_point(), 106);
  EXPECT_FALSE(fs::exists(source / "orders-0"));
  wait_for_the_worker();
  EXPECT_FALSE(fs::exists(target / "orders-0" / storage::swap_ready_file));
  auto batch = make_batch(1);
  ASSERT_TRUE(p->append(batch, 1).ok());
  EXPECT_EQ(p->log_end_offset(), 107);
  EXPECT_EQ(p->log().read(0, 64 << 20, 107, true).value().log_end_offset, 107);
}

TEST_F(log_dir_moves_test, a_move_cancelled_while_its_future_log_moves_in_leaves_nothing_behind) {
  replica_manager m(*_logs, options());
  const storage::topic_partition tp{"orders", 0};
  const auto [p, source, target] = start_move(m, 1, 5);
  ASSERT_NE(p, nullptr);
  auto gate = hold_the_worker();
  copy_until_the_worker_has_it(m, tp);
  ASSERT_EQ(_logs->get_future(tp), nullptr);
  // Back to where it is: the move stops.
  EXPECT_EQ(m.alter_log_dir(tp, source), error_code::none);
  EXPECT_FALSE(m.moving());
  EXPECT_FALSE(_logs->describe_future(tp).has_value());
  gate->set_value();
  wait_for_the_worker();
  EXPECT_FALSE(fs::exists(target / "orders-0"));
  for (int i = 0; i < 1000; ++i) {
    bool left = false;
    for (const auto& e : fs::directory_iterator(target))
      left = left || e.path().filename().string().starts_with("orders-0");
    if (!left) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (const auto& e : fs::directory_iterator(target))
    EXPECT_FALSE(e.path().filename().string().starts_with("orders-0")) << e.path();
  EXPECT_EQ(p->log().dir(), source / "orders-0");
  EXPECT_EQ(p->log_end_offset(), 5);
}

TEST_F(log_dir_moves_test, a_stop_between_the_move_in_and_the_commit_loads_the_log_and_its_copy) {
  const storage::topic_partition tp{"orders", 0};
  {
    replica_manager m(*_logs, options());
    ASSERT_TRUE(m.apply_leadership(leader_of("orders", 0)).ok());
    auto batch = make_batch(4);
    ASSERT_TRUE(m.get(tp)->append(batch, 1).ok());
    ASSERT_TRUE(m.remove_partition(tp, false).ok());
  }
  const size_t from = *_logs->dir_index_of(tp);
  const size_t to = from == 0 ? 1 : 0;
  const fs::path source = _logs->get(tp)->dir().parent_path();
  auto* future = copied_future_log(tp, to);
  ASSERT_NE(future, nullptr);
  ASSERT_TRUE(_logs->begin_move_in(tp).ok());
  wait_for_the_worker();
  auto moved_in = _logs->finish_move_in(tp);
  ASSERT_TRUE(moved_in.ok() && *moved_in);
  const fs::path target = (*moved_in)->dir().parent_path();
  EXPECT_EQ((*moved_in)->dir(), target / "orders-0");
  ASSERT_TRUE(_logs->shutdown().ok());
  _logs.reset();
  // The log also holds a marker an earlier swap left (older than the copy's).
  std::ofstream(source / "orders-0" / storage::swap_ready_file) << "1";

  // Two orders-0, the newest marked one a copy: the log stays where it was (its stale marker goes), and
  // the copy is a future log again.
  open_logs();
  EXPECT_EQ(_logs->dir_index_of(tp), from);
  EXPECT_EQ(_logs->get(tp)->log_end_offset(), 4);
  ASSERT_NE(_logs->get_future(tp), nullptr);
  EXPECT_EQ(_logs->future_dir_index_of(tp), to);
  EXPECT_EQ(_logs->get_future(tp)->log_end_offset(), 4);
  EXPECT_FALSE(fs::exists(target / "orders-0"));
  EXPECT_FALSE(fs::exists(source / "orders-0" / storage::swap_ready_file));
  const fs::path copy = _logs->get_future(tp)->dir();
  EXPECT_FALSE(fs::exists(copy / storage::swap_ready_file));

  // The same moved in again, and a stop right after the commit's rename: the marked log is all there is.
  ASSERT_TRUE(_logs->begin_move_in(tp).ok());
  wait_for_the_worker();
  ASSERT_TRUE(_logs->finish_move_in(tp).ok());
  ASSERT_TRUE(_logs->shutdown().ok());
  _logs.reset();
  fs::rename(source / "orders-0", source / "orders-0.0123456789abcdef0123456789abcdef-delete");
  ASSERT_TRUE(fs::exists(target / "orders-0" / storage::swap_ready_file));
  open_logs();
  EXPECT_EQ(_logs->dir_index_of(tp), to);
  EXPECT_EQ(_logs->get(tp)->log_end_offset(), 4);
  EXPECT_EQ(_logs->get_future(tp), nullptr);
  EXPECT_FALSE(fs::exists(target / "orders-0" / storage::swap_ready_file));
}

}  // namespace
}  // namespace mala::replication
