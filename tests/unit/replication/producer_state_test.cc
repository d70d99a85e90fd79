// Idempotent-producer state inside replication::partition: duplicates answered with their original offsets,
// sequence and epoch errors, loading at creation (snapshot + replay), snapshots on segment roll and clean
// close, follower appends and truncation, expiry.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/replication/partition.h"
#include "mala/replication/replica_manager.h"
#include "replication_test_util.h"

namespace mala::replication {
namespace {

using testing::start_ms;
namespace proto = mala::protocol;

constexpr int32_t self = 1;

std::vector<uint8_t> idempotent_batch(int64_t producer_id, int16_t epoch, int32_t sequence, int records = 1,
                                      int64_t ts = start_ms) {
  proto::record_batch_builder b;
  b.producer(producer_id, epoch, sequence);
  const std::string value = "value";
  for (int r = 0; r < records; ++r) {
    b.add(ts + r, std::nullopt,
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
  }
  return b.build();
}

class partition_producer_test : public testing::log_dir_fixture {
 protected:
  void TearDown() override {
    _partition.reset();
    testing::log_dir_fixture::TearDown();
  }

  partition& make(storage::log_config config = {}, storage::producer_state_config producers = {},
                  int64_t check_interval_ms = storage::default_producer_id_expiration_check_interval_ms) {
    _partition.reset();
    auto log = _logs->get({"orders", 0});
    if (!log) {
      auto created = _logs->create({"orders", 0}, _topic_id, config);
      EXPECT_TRUE(created.ok()) << created.error().message;
      log = *created;
    }
    partition_options o;
    o.local_replica_id = self;
    o.clock_ms = [this] { return _now; };
    o.producer_state = producers;
    o.producer_id_expiration_check_interval_ms = check_interval_ms;
    _partition = std::make_unique<partition>(log, _topic_id, o);
    EXPECT_TRUE(_partition->load_status().ok()) << _partition->load_status().message;
    return *_partition;
  }

  static void lead(partition& p, int32_t epoch = 1) {
    ASSERT_TRUE(p.make_leader({self, epoch, epoch, {self}, {self}, 1}).ok());
  }

  static append_outcome append_ok(partition& p, std::vector<uint8_t> bytes, int16_t acks = 1) {
    auto r = p.append(bytes, acks);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : append_outcome{};
  }

  static error_code append_error(partition& p, std::vector<uint8_t> bytes) {
    auto r = p.append(bytes, 1);
    return r.ok() ? error_code::none : r.error().code;
  }

  std::vector<int64_t> snapshot_offsets() const {
    // Snapshot files are written and deleted by the log manager's file worker.
    for (int i = 0; i < 1000 && _logs->worker()->pending() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<int64_t> out;
    for (const auto& e : std::filesystem::directory_iterator(_logs->get({"orders", 0})->dir())) {
      auto name = e.path().filename().string();
      if (name.ends_with(".snapshot")) out.push_back(std::stoll(name.substr(0, 20)));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  uuid _topic_id = uuid::random();
  std::unique_ptr<partition> _partition;
};

TEST_F(partition_producer_test, retried_batches_get_their_original_offsets_and_are_not_written) {
  auto& p = make();
  lead(p);
  auto first = append_ok(p, idempotent_batch(1000, 0, 0, 3));
  EXPECT_FALSE(first.duplicate);
  EXPECT_EQ(first.appended.first_offset, 0);
  auto second = append_ok(p, idempotent_batch(1000, 0, 3, 2));
  EXPECT_EQ(second.appended.first_offset, 3);
  ASSERT_EQ(p.log_end_offset(), 5);

  for (int i = 0; i < 2; ++i) {
    auto retry = append_ok(p, idempotent_batch(1000, 0, 0, 3, start_ms + 7), -1);
    EXPECT_TRUE(retry.duplicate);
    EXPECT_EQ(retry.appended.first_offset, 0);
    EXPECT_EQ(retry.appended.last_offset, 2);
    // Kafka answers a duplicate's LogAppendTime field with the original batch's timestamp.
    EXPECT_EQ(retry.appended.log_append_time, start_ms + 2);
    // acks=-1: already committed (one replica).
    EXPECT_TRUE(retry.done);
    EXPECT_EQ(retry.required_offset, 3);
  }
  EXPECT_EQ(p.log_end_offset(), 5);
  EXPECT_EQ(p.high_watermark(), 5);
  // Non-idempotent batches are never duplicates.
  auto plain = testing::make_batch(1);
  EXPECT_FALSE(append_ok(p, plain).duplicate);
  EXPECT_FALSE(append_ok(p, testing::make_batch(1)).duplicate);
  EXPECT_EQ(p.log_end_offset(), 7);
}

TEST_F(partition_producer_test, sequence_and_epoch_errors_write_nothing) {
  auto& p = make();
  lead(p);
  append_ok(p, idempotent_batch(7, 2, 0, 2));
  EXPECT_EQ(append_error(p, idempotent_batch(7, 2, 5)), error_code::out_of_order_sequence_number);
  EXPECT_EQ(append_error(p, idempotent_batch(7, 1, 2)), error_code::invalid_producer_epoch);
  EXPECT_EQ(append_error(p, idempotent_batch(7, 3, 4)), error_code::out_of_order_sequence_number);
  EXPECT_EQ(p.log_end_offset(), 2);
  EXPECT_EQ(append_error(p, idempotent_batch(7, 3, 0)), error_code::none);  // a new epoch starts at 0
  EXPECT_EQ(append_error(p, idempotent_batch(7, 3, 1)), error_code::none);
  EXPECT_EQ(p.producer_state()->find(7)->producer_epoch, 3);
  // Followers do not take produce requests at all.
  ASSERT_TRUE(p.make_follower({2, 2, 2, {self, 2}, {self, 2}, 1}).ok());
  EXPECT_EQ(append_error(p, idempotent_batch(7, 3, 2)), error_code::not_leader_or_follower);
}

TEST_F(partition_producer_test, a_never_written_partition_takes_a_new_producer_only_from_sequence_zero) {
  // Kafka 4.5 (KAFKA-15591): the second batch of a producer must not be written before its first.
  auto& p = make();
  lead(p);
  EXPECT_EQ(append_error(p, idempotent_batch(1000, 0, 29, 3)), error_code::out_of_order_sequence_number);
  EXPECT_EQ(p.log_end_offset(), 0);
  // Another producer's record makes the log written: from then on an unknown producer may start anywhere
  // (KIP-360, its state may have expired).
  append_ok(p, testing::make_batch(1));
  EXPECT_EQ(append_error(p, idempotent_batch(2000, 0, 29, 3)), error_code::none);
  EXPECT_EQ(append_error(p, idempotent_batch(1000, 0, 0, 29)), error_code::none);
  EXPECT_EQ(append_error(p, idempotent_batch(1000, 0, 29, 3)), error_code::none);
  EXPECT_EQ(p.log_end_offset(), 1 + 3 + 29 + 3);
}

TEST_F(partition_producer_test, state_is_rebuilt_when_the_partition_is_created_again) {
  {
    auto& p = make();
    lead(p);
    for (int32_t i = 0; i < 4; ++i) append_ok(p, idempotent_batch(1000, 0, 2 * i, 2));
  }
  // No close: the new replica replays the whole log.
  EXPECT_TRUE(snapshot_offsets().empty());
  auto& p = make();
  lead(p, 2);
  EXPECT_EQ(p.producer_state()->map_end_offset(), 8);
  auto retry = append_ok(p, idempotent_batch(1000, 0, 4, 2));
  EXPECT_TRUE(retry.duplicate);
  EXPECT_EQ(retry.appended.first_offset, 4);
  EXPECT_EQ(append_error(p, idempotent_batch(1000, 0, 9)), error_code::out_of_order_sequence_number);
  // The load wrote a snapshot at the log end, so the next start replays nothing.
  EXPECT_EQ(snapshot_offsets(), (std::vector<int64_t>{8}));
}

TEST_F(partition_producer_test, clean_close_snapshots_at_the_log_end) {
  replica_manager_options o;
  o.local_replica_id = self;
  o.clock_ms = [this] { return _now; };
  replica_manager m(*_logs, o);
  partition_leadership l;
  l.topic = "orders";
  l.partition = 0;
  l.topic_id = _topic_id;
  l.state = {self, 1, 1, {self}, {self}, 1};
  ASSERT_TRUE(m.apply_leadership(l).ok());
  auto* p = m.get({"orders", 0});
  append_ok(*p, idempotent_batch(5, 0, 0, 3));
  append_ok(*p, idempotent_batch(6, 0, 0, 1));
  ASSERT_TRUE(m.remove_partition({"orders", 0}, /*delete_log=*/false).ok());
  EXPECT_EQ(snapshot_offsets(), (std::vector<int64_t>{4}));

  ASSERT_TRUE(m.apply_leadership(l).ok());
  p = m.get({"orders", 0});
  EXPECT_EQ(p->producer_state()->producer_count(), 2u);
  EXPECT_TRUE(append_ok(*p, idempotent_batch(5, 0, 0, 3)).duplicate);
  EXPECT_FALSE(append_ok(*p, idempotent_batch(6, 0, 1)).duplicate);
}

TEST_F(partition_producer_test, segment_rolls_take_snapshots) {
  storage::log_config config;
  config.segment_bytes = 300;
  auto& p = make(config);
  lead(p);
  for (int32_t i = 0; i < 10; ++i) append_ok(p, idempotent_batch(1000, 0, 2 * i, 2));
  ASSERT_GT(p.log().segment_count(), 2u);
  auto offsets = snapshot_offsets();
  // The newest snapshots sit at segment base offsets (two are kept, as in Kafka).
  ASSERT_EQ(offsets.size(), storage::producer_snapshots_retained);
  for (int64_t o : offsets) EXPECT_EQ(o % 2, 0);
  EXPECT_LT(offsets.back(), p.log_end_offset());

  // A restart replays only what follows the newest snapshot, and still knows the last five batches.
  _partition.reset();
  auto& q = make(config);
  lead(q, 2);
  EXPECT_TRUE(append_ok(q, idempotent_batch(1000, 0, 18, 2)).duplicate);
  EXPECT_FALSE(append_ok(q, idempotent_batch(1000, 0, 20, 2)).duplicate);
}

TEST_F(partition_producer_test, follower_appends_update_the_state_and_truncation_reloads_it) {
  auto& p = make();
  ASSERT_TRUE(p.make_follower({2, 1, 1, {self, 2}, {self, 2}, 1}).ok());
  // What the leader wrote: offsets already assigned.
  for (int32_t i = 0; i < 3; ++i) {
    auto b = idempotent_batch(9, 0, 2 * i, 2);
    proto::stamp_base_offset(b, 2 * i);
    ASSERT_TRUE(p.append_as_follower(b).ok());
  }
  EXPECT_EQ(p.producer_state()->find(9)->last_sequence(), 5);
  ASSERT_TRUE(p.truncate_to(4).ok());
  EXPECT_EQ(p.log_end_offset(), 4);
  EXPECT_EQ(p.producer_state()->find(9)->last_sequence(), 3);
  // Becoming leader: the next sequence is 4, and 2-3 is a duplicate.
  ASSERT_TRUE(p.make_leader({self, 2, 2, {self, 2}, {self}, 1}).ok());
  EXPECT_TRUE(append_ok(p, idempotent_batch(9, 0, 2, 2)).duplicate);
  EXPECT_FALSE(append_ok(p, idempotent_batch(9, 0, 4, 2)).duplicate);

  ASSERT_TRUE(p.make_follower({2, 3, 3, {self, 2}, {self, 2}, 1}).ok());
  ASSERT_TRUE(p.truncate_fully_and_start_at(100).ok());
  EXPECT_EQ(p.producer_state()->producer_count(), 0u);
  EXPECT_EQ(p.log_start_offset(), 100);
  EXPECT_EQ(p.high_watermark(), 100);
}

TEST_F(partition_producer_test, idle_producers_expire_on_a_later_append) {
  auto& p = make({}, {.producer_id_expiration_ms = 1000}, /*check_interval_ms=*/0);
  lead(p);
  append_ok(p, idempotent_batch(1, 0, 0, 1, start_ms));
  EXPECT_EQ(append_error(p, idempotent_batch(1, 0, 5)), error_code::out_of_order_sequence_number);
  _now = start_ms + 5000;
  append_ok(p, idempotent_batch(2, 0, 0, 1, _now));
  EXPECT_EQ(p.producer_state()->find(1), nullptr);
  // Forgotten: it may continue at any sequence (KIP-360).
  EXPECT_EQ(append_error(p, idempotent_batch(1, 0, 5)), error_code::none);
}

TEST_F(partition_producer_test, delete_records_keeps_producers) {
  auto& p = make();
  lead(p);
  append_ok(p, idempotent_batch(3, 0, 0, 4));
  auto deleted = p.delete_records(4);
  ASSERT_TRUE(deleted.ok()) << deleted.error().message;
  EXPECT_EQ(p.log_start_offset(), 4);
  EXPECT_TRUE(append_ok(p, idempotent_batch(3, 0, 0, 4)).duplicate);
  EXPECT_EQ(append_error(p, idempotent_batch(3, 0, 4)), error_code::none);
}

}  // namespace
}  // namespace mala::replication
