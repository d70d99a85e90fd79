#include "mala/storage/producer_state.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/storage/partition_log.h"

namespace mala::storage {
namespace {

namespace fs = std::filesystem;
namespace proto = mala::protocol;

constexpr int64_t start_ms = 1'700'000'000'000;
constexpr int32_t max_seq = std::numeric_limits<int32_t>::max();

// A produce-request batch header as a producer sends it (no offset assigned yet).
proto::record_batch_header header(int64_t producer_id, int16_t epoch, int32_t base_sequence,
                                  int32_t records = 1, int64_t timestamp = start_ms) {
  proto::record_batch_header h;
  h.producer_id = producer_id;
  h.producer_epoch = epoch;
  h.base_sequence = base_sequence;
  h.last_offset_delta = records - 1;
  h.record_count = records;
  h.base_timestamp = timestamp;
  h.max_timestamp = timestamp;
  return h;
}

// A real batch of `records` records (timestamps ts, ts+1, ...).
std::vector<uint8_t> batch(int64_t producer_id, int16_t epoch, int32_t base_sequence, int records = 1,
                           int64_t ts = start_ms) {
  proto::record_batch_builder builder;
  builder.producer(producer_id, epoch, base_sequence);
  std::string value = "value";
  for (int r = 0; r < records; ++r) {
    builder.add(ts + r, std::nullopt,
                std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
  }
  return builder.build();
}

error_code code_of(const result<producer_check_outcome>& r) {
  return r.ok() ? error_code::none : r.error().code;
}

class producer_state_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root =
        fs::temp_directory_path() / ("mala-producer-state-test-" + std::to_string(std::random_device{}()));
    _dir = _root / "orders-0";
    fs::create_directories(_dir);
  }
  void TearDown() override { fs::remove_all(_root); }

  std::unique_ptr<producer_state_manager> open_state(producer_state_config config = {}) {
    auto m = producer_state_manager::open(_dir, config);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
    return m.ok() ? std::move(*m) : nullptr;
  }

  // The leader's path without a log: check, then record at the next offset unless a duplicate. Returns the
  // check result and, when written, the first offset.
  result<producer_check_outcome> produce(producer_state_manager& m, const proto::record_batch_header& h) {
    auto r = m.check(h);
    if (r.ok() && !r->is_duplicate()) {
      m.update(h, _next_offset);
      _next_offset += h.last_offset_delta + 1;
    }
    return r;
  }

  std::unique_ptr<partition_log> open_log(log_config config = {}) {
    log_open_options o;
    o.clean_shutdown = true;
    o.clock_ms = [] { return start_ms; };
    auto log = partition_log::open(_dir, {"orders", 0}, config, std::move(o));
    EXPECT_TRUE(log.ok()) << (log.ok() ? "" : log.error().message);
    return log.ok() ? std::move(*log) : nullptr;
  }

  // The wiring the replication layer is told to use: check, append, snapshot on roll, then on_append.
  static void leader_append(partition_log& log, producer_state_manager& m, std::vector<uint8_t> bytes) {
    auto checked = m.check_records(bytes);
    ASSERT_TRUE(checked.ok()) << checked.error().message;
    ASSERT_FALSE(checked->is_duplicate());
    const size_t segments_before = log.segment_count();
    auto appended = log.append_as_leader(bytes, 0);
    ASSERT_TRUE(appended.ok()) << appended.error().message;
    if (log.segment_count() > segments_before) {
      ASSERT_TRUE(m.take_snapshot(appended->first_offset).ok());
    }
    m.on_append(bytes);
  }

  std::vector<std::string> snapshot_files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(_dir)) {
      auto name = e.path().filename().string();
      if (name.ends_with(".snapshot")) out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path _root;
  fs::path _dir;
  int64_t _next_offset = 0;
};

TEST(producer_sequence_test, wraps_at_int32_max_as_kafka_does) {
  EXPECT_EQ(increment_sequence(5, 3), 8);
  EXPECT_EQ(increment_sequence(max_seq, 1), 0);
  EXPECT_EQ(increment_sequence(max_seq - 1, 3), 1);
  EXPECT_EQ(decrement_sequence(1, 3), max_seq - 1);
  EXPECT_EQ(decrement_sequence(8, 3), 5);
  // Sequences INT32_MAX-1, INT32_MAX, 0.
  EXPECT_EQ(batch_last_sequence(header(1, 0, max_seq - 1, 3)), 0);
  EXPECT_EQ(batch_last_sequence(header(1, 0, proto::no_sequence, 3)), proto::no_sequence);
}

TEST_F(producer_state_test, sequences_in_order_are_accepted_and_recorded) {
  auto m = open_state();
  EXPECT_EQ(code_of(produce(*m, header(1000, 0, 0, 3))), error_code::none);
  EXPECT_EQ(code_of(produce(*m, header(1000, 0, 3, 2))), error_code::none);
  EXPECT_EQ(code_of(produce(*m, header(1000, 0, 5, 1, start_ms + 7))), error_code::none);
  const auto* e = m->find(1000);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->producer_epoch, 0);
  ASSERT_EQ(e->batches.size(), 3u);
  EXPECT_EQ(e->batches[1], (producer_batch_metadata{3, 4, 3, 4, start_ms}));
  EXPECT_EQ(e->last_sequence(), 5);
  EXPECT_EQ(e->last_offset(), 5);
  EXPECT_EQ(e->last_timestamp, start_ms + 7);
  EXPECT_EQ(m->map_end_offset(), 6);
}

TEST_F(producer_state_test, duplicates_of_the_last_five_batches_get_their_original_offsets) {
  auto m = open_state();
  _next_offset = 100;
  // Six batches of two records: sequences 0-1, 2-3, ..., 10-11 at offsets 100-101, ..., 110-111.
  for (int32_t i = 0; i < 6; ++i) ASSERT_TRUE(produce(*m, header(7, 3, 2 * i, 2, start_ms + i)).ok());
  ASSERT_EQ(m->find(7)->batches.size(), producer_batches_retained);
  for (int32_t i = 1; i < 6; ++i) {
    auto r = m->check(header(7, 3, 2 * i, 2, start_ms + i));
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_TRUE(r->is_duplicate()) << "batch " << i;
    EXPECT_EQ(r->duplicate->first_offset, 100 + 2 * i);
    EXPECT_EQ(r->duplicate->last_offset, 101 + 2 * i);
    EXPECT_EQ(r->duplicate->timestamp, start_ms + i);
  }
  // The sixth-oldest is no longer known: it is out of order, as in Kafka.
  EXPECT_EQ(code_of(m->check(header(7, 3, 0, 2))), error_code::out_of_order_sequence_number);
  // A batch overlapping a retained one without matching its range exactly is out of order too.
  EXPECT_EQ(code_of(m->check(header(7, 3, 2, 1))), error_code::out_of_order_sequence_number);
  // A duplicate is not recorded again.
  EXPECT_EQ(m->map_end_offset(), 112);
}

TEST_F(producer_state_test, gaps_are_out_of_order) {
  auto m = open_state();
  ASSERT_TRUE(produce(*m, header(1, 0, 0, 2)).ok());
  EXPECT_EQ(code_of(m->check(header(1, 0, 3))), error_code::out_of_order_sequence_number);
  EXPECT_EQ(code_of(m->check(header(1, 0, 1))), error_code::out_of_order_sequence_number);
  EXPECT_EQ(code_of(m->check(header(1, 0, 2))), error_code::none);
}

TEST_F(producer_state_test, sequence_wraps_after_int32_max) {
  auto m = open_state();
  ASSERT_TRUE(produce(*m, header(1, 0, 0)).ok());
  // Pretend the producer got near the end of the sequence space on this epoch.
  m->update(header(1, 0, max_seq - 2, 2), _next_offset);
  EXPECT_EQ(m->find(1)->last_sequence(), max_seq - 1);
  // A batch crossing the wrap: sequences INT32_MAX, 0, 1.
  EXPECT_EQ(code_of(m->check(header(1, 0, max_seq, 3))), error_code::none);
  m->update(header(1, 0, max_seq, 3), 10);
  EXPECT_EQ(m->find(1)->last_sequence(), 1);
  EXPECT_EQ(code_of(m->check(header(1, 0, 2))), error_code::none);
  auto dup = m->check(header(1, 0, max_seq, 3));
  ASSERT_TRUE(dup.ok());
  ASSERT_TRUE(dup->is_duplicate());
  EXPECT_EQ(dup->duplicate->first_offset, 10);
  // After exactly INT32_MAX the next sequence is 0.
  auto m2 = open_state();
  m2->update(header(2, 0, max_seq - 1, 2), 0);
  EXPECT_EQ(code_of(m2->check(header(2, 0, 0))), error_code::none);
  EXPECT_EQ(code_of(m2->check(header(2, 0, 1))), error_code::out_of_order_sequence_number);
}

TEST_F(producer_state_test, epoch_bump_must_start_at_sequence_zero) {
  auto m = open_state();
  ASSERT_TRUE(produce(*m, header(1, 0, 0, 5)).ok());
  EXPECT_EQ(code_of(m->check(header(1, 1, 5))), error_code::out_of_order_sequence_number);
  EXPECT_EQ(code_of(produce(*m, header(1, 1, 0))), error_code::none);
  EXPECT_EQ(m->find(1)->producer_epoch, 1);
  EXPECT_EQ(m->find(1)->batches.size(), 1u);  // the old epoch's batches are forgotten
  EXPECT_EQ(code_of(m->check(header(1, 1, 1))), error_code::none);
}

TEST_F(producer_state_test, coordinator_writes_skip_sequence_and_duplicate_checks_but_not_epochs) {
  // The group coordinator writes every TxnOffsetCommit batch at sequence 0 (Kafka's AppendOrigin.COORDINATOR
  // checks epochs only).
  auto m = open_state();
  proto::record_batch_header txn = header(9, 2, 0);
  txn.attributes = proto::batch_attributes::transactional;
  const auto coordinator = append_origin::coordinator;
  const std::span<const proto::record_batch_header> one(&txn, 1);
  EXPECT_EQ(code_of(m->check(one, /*log_never_written=*/true, coordinator)), error_code::none);
  ASSERT_TRUE(produce(*m, txn).ok());
  // The same sequence again: a client's retry would be a duplicate, the coordinator's next batch is not.
  auto again = m->check(one, false, coordinator);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->is_duplicate());
  EXPECT_TRUE(m->check(txn)->is_duplicate());
  // A zombie's older epoch is still fenced.
  proto::record_batch_header zombie = header(9, 1, 0);
  zombie.attributes = proto::batch_attributes::transactional;
  EXPECT_EQ(code_of(m->check(std::span<const proto::record_batch_header>(&zombie, 1), false, coordinator)),
            error_code::invalid_producer_epoch);
}

TEST_F(producer_state_test, older_epoch_is_fenced) {
  auto m = open_state();
  ASSERT_TRUE(produce(*m, header(1, 4, 0)).ok());
  EXPECT_EQ(code_of(m->check(header(1, 3, 1))), error_code::invalid_producer_epoch);
  // Even a retry of an old epoch's batch: it is not a duplicate of the current epoch's state.
  EXPECT_EQ(code_of(m->check(header(1, 3, 0))), error_code::invalid_producer_epoch);
}

TEST_F(producer_state_test, unknown_producer_may_start_at_any_sequence) {
  // KIP-360: a producer whose state is gone (expired, or its batches deleted) continues where it was.
  auto m = open_state();
  EXPECT_EQ(code_of(produce(*m, header(9, 2, 42, 2))), error_code::none);
  EXPECT_EQ(code_of(m->check(header(9, 2, 45))), error_code::out_of_order_sequence_number);
  EXPECT_EQ(code_of(m->check(header(9, 2, 44))), error_code::none);
}

TEST_F(producer_state_test, on_a_never_written_partition_a_new_producer_starts_at_sequence_zero) {
  // Kafka 4.5 (KAFKA-15591): batch B overtook batch A, which was answered with a retriable error; written, B
  // would leave every retry of A out of order.
  auto m = open_state();
  const bool never_written = true;
  EXPECT_EQ(code_of(m->check(header(9, 0, 17, 5), never_written)), error_code::out_of_order_sequence_number);
  EXPECT_EQ(code_of(m->check_records(batch(9, 0, 17, 5), never_written)),
            error_code::out_of_order_sequence_number);
  // A new epoch of an unknown producer is no exception; the first batch at 0 may be followed in its request.
  EXPECT_EQ(code_of(m->check(header(9, 3, 1), never_written)), error_code::out_of_order_sequence_number);
  std::vector<proto::record_batch_header> first_two = {header(9, 0, 0, 17), header(9, 0, 17, 5)};
  EXPECT_EQ(code_of(m->check(first_two, never_written)), error_code::none);
  // Once the log holds a record (even if DeleteRecords removed it again) any first sequence goes (KIP-360).
  EXPECT_EQ(code_of(m->check(header(9, 0, 17, 5), false)), error_code::none);
  // A producer the state knows is checked for order as always.
  ASSERT_TRUE(produce(*m, header(9, 0, 0, 17)).ok());
  EXPECT_EQ(code_of(m->check(header(9, 0, 17, 5), never_written)), error_code::none);
}

TEST_F(producer_state_test, non_idempotent_batches_are_ignored) {
  auto m = open_state();
  auto h = header(proto::no_producer_id, proto::no_producer_epoch, proto::no_sequence, 4);
  EXPECT_EQ(code_of(produce(*m, h)), error_code::none);
  EXPECT_EQ(code_of(produce(*m, h)), error_code::none);
  EXPECT_EQ(m->producer_count(), 0u);
  EXPECT_EQ(m->map_end_offset(), 8);
}

TEST_F(producer_state_test, batches_of_one_request_are_checked_in_order) {
  auto m = open_state();
  ASSERT_TRUE(produce(*m, header(1, 0, 0, 2)).ok());
  std::vector<proto::record_batch_header> ok_request = {header(1, 0, 2, 2), header(2, 0, 0), header(1, 0, 4)};
  EXPECT_EQ(code_of(m->check(ok_request)), error_code::none);
  std::vector<proto::record_batch_header> gap = {header(1, 0, 2, 2), header(1, 0, 5)};
  EXPECT_EQ(code_of(m->check(gap)), error_code::out_of_order_sequence_number);
  std::vector<proto::record_batch_header> bump_then_continue = {header(1, 1, 0, 3), header(1, 1, 3)};
  EXPECT_EQ(code_of(m->check(bump_then_continue)), error_code::none);
  std::vector<proto::record_batch_header> with_duplicate = {header(1, 0, 2), header(1, 0, 0, 2)};
  auto r = m->check(with_duplicate);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->is_duplicate());
  // Over raw records too.
  auto records = batch(1, 0, 2, 2);
  auto more = batch(1, 0, 5);
  records.insert(records.end(), more.begin(), more.end());
  EXPECT_EQ(code_of(m->check_records(records)), error_code::out_of_order_sequence_number);
}

TEST_F(producer_state_test, transactional_state_is_tracked_for_later) {
  auto m = open_state();
  auto h = header(5, 0, 0, 2);
  h.attributes = proto::batch_attributes::transactional;
  ASSERT_TRUE(produce(*m, h).ok());
  EXPECT_EQ(m->find(5)->current_txn_first_offset, 0);
  EXPECT_EQ(code_of(m->check(header(5, 0, 2))), error_code::invalid_txn_state);

  // A COMMIT marker (key: version 0, type 1; value: version 0, coordinator epoch 7) ends the transaction.
  const std::vector<uint8_t> key = {0, 0, 0, 1};
  const std::vector<uint8_t> value = {0, 0, 0, 0, 0, 7};
  proto::record_batch_builder marker;
  marker.producer(5, 0, proto::no_sequence).transactional().control().base_offset(2);
  marker.add(start_ms + 50, std::span<const uint8_t>(key), std::span<const uint8_t>(value));
  m->on_append(marker.build());
  const auto* e = m->find(5);
  EXPECT_FALSE(e->current_txn_first_offset.has_value());
  EXPECT_EQ(e->coordinator_epoch, 7);
  EXPECT_EQ(e->last_timestamp, start_ms + 50);
  EXPECT_EQ(m->map_end_offset(), 3);
  EXPECT_EQ(code_of(m->check(header(5, 0, 2))), error_code::none);
}

// Kafka's ProducerSnapshot v1, written out field by field.
const std::vector<uint8_t> expected_snapshot = {
    0x00, 0x01,              // version 1
    0x3a, 0x7f, 0x41, 0x40,  // CRC-32C of everything after it
    0x00, 0x00, 0x00, 0x03,  // three entries
    // producer 1000, epoch 2, last sequence 9, last offset 104, offset delta 4, timestamp 1700000000000,
    // coordinator epoch -1, no transaction
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x02, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x68, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    // producer 7, epoch 0, no batch (sequence -1, offset -1, delta 0), timestamp 1700000000500, coordinator
    // epoch 3, no transaction
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x69, 0xf4,
    0x00, 0x00, 0x00, 0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    // producer 42, epoch 1, last sequence 1 (the batch wrapped from INT32_MAX-1), last offset 203, delta 3,
    // timestamp 1700000001000, coordinator epoch 5, transaction from offset 200
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xcb, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x6b, 0xe8,
    0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc8};

std::vector<producer_state_entry> snapshot_entries() {
  producer_state_entry a{.producer_id = 1000,
                         .producer_epoch = 2,
                         .batches = {{5, 9, 100, 104, start_ms}},
                         .coordinator_epoch = -1,
                         .current_txn_first_offset = std::nullopt,
                         .last_timestamp = start_ms};
  producer_state_entry b{.producer_id = 7,
                         .producer_epoch = 0,
                         .batches = {},
                         .coordinator_epoch = 3,
                         .current_txn_first_offset = std::nullopt,
                         .last_timestamp = start_ms + 500};
  producer_state_entry c{.producer_id = 42,
                         .producer_epoch = 1,
                         .batches = {{max_seq - 1, 1, 200, 203, start_ms + 1000}},
                         .coordinator_epoch = 5,
                         .current_txn_first_offset = 200,
                         .last_timestamp = start_ms + 1000};
  return {a, b, c};
}

TEST(producer_snapshot_format_test, matches_kafkas_bytes_and_round_trips) {
  auto entries = snapshot_entries();
  auto encoded = encode_producer_snapshot(entries);
  ASSERT_EQ(encoded.size(), expected_snapshot.size());
  EXPECT_EQ(std::vector<uint8_t>(encoded.begin(), encoded.end()), expected_snapshot);
  auto decoded = decode_producer_snapshot(expected_snapshot);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(*decoded, entries);
}

TEST(producer_snapshot_format_test, keeps_only_the_last_batch) {
  producer_state_entry e{.producer_id = 1, .producer_epoch = 0, .last_timestamp = start_ms + 1};
  e.batches = {{0, 1, 0, 1, start_ms}, {2, 2, 2, 2, start_ms + 1}};
  auto encoded = encode_producer_snapshot(std::span<const producer_state_entry>(&e, 1));
  auto decoded = decode_producer_snapshot(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(encoded.data()), encoded.size()));
  ASSERT_TRUE(decoded.ok());
  ASSERT_EQ(decoded->size(), 1u);
  EXPECT_EQ((*decoded)[0].batches, (std::vector<producer_batch_metadata>{{2, 2, 2, 2, start_ms + 1}}));
}

TEST(producer_snapshot_format_test, rejects_corruption) {
  auto bytes = expected_snapshot;
  bytes[40] ^= 1;
  EXPECT_EQ(decode_producer_snapshot(bytes).error().code, error_code::corrupt_message);
  bytes = expected_snapshot;
  bytes[1] = 2;  // version 2 does not exist
  EXPECT_FALSE(decode_producer_snapshot(bytes).ok());
  bytes = expected_snapshot;
  bytes.pop_back();
  EXPECT_FALSE(decode_producer_snapshot(bytes).ok());
  EXPECT_FALSE(decode_producer_snapshot(std::vector<uint8_t>{0, 1, 0}).ok());
  auto empty = encode_producer_snapshot({});
  auto decoded = decode_producer_snapshot(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(empty.data()), empty.size()));
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->empty());
}

TEST_F(producer_state_test, snapshot_file_is_named_by_offset_and_keeps_the_last_two) {
  auto m = open_state();
  ASSERT_TRUE(produce(*m, header(1000, 2, 5, 5)).ok());
  ASSERT_TRUE(m->take_snapshot(5).ok());
  EXPECT_EQ(snapshot_files(), (std::vector<std::string>{"00000000000000000005.snapshot"}));
  std::ifstream in(_dir / "00000000000000000005.snapshot", std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto decoded = decode_producer_snapshot(bytes);
  ASSERT_TRUE(decoded.ok());
  ASSERT_EQ(decoded->size(), 1u);
  EXPECT_EQ((*decoded)[0], *m->find(1000));
  // No new snapshot at an offset already covered.
  ASSERT_TRUE(m->take_snapshot(5).ok());
  ASSERT_TRUE(m->take_snapshot(9).ok());
  ASSERT_TRUE(m->take_snapshot(12).ok());
  EXPECT_EQ(snapshot_files(),
            (std::vector<std::string>{"00000000000000000009.snapshot", "00000000000000000012.snapshot"}));
  EXPECT_EQ(m->snapshot_offsets(), (std::vector<int64_t>{9, 12}));
}

TEST_F(producer_state_test, idle_producers_expire) {
  auto m = open_state({.producer_id_expiration_ms = 1000});
  ASSERT_TRUE(produce(*m, header(1, 0, 0, 1, start_ms)).ok());
  ASSERT_TRUE(produce(*m, header(2, 0, 0, 1, start_ms + 500)).ok());
  auto txn = header(3, 0, 0, 1, start_ms);
  txn.attributes = proto::batch_attributes::transactional;
  ASSERT_TRUE(produce(*m, txn).ok());
  EXPECT_EQ(m->remove_expired_producers(start_ms + 999), 0u);
  EXPECT_EQ(m->remove_expired_producers(start_ms + 1000), 1u);
  EXPECT_EQ(m->find(1), nullptr);
  EXPECT_NE(m->find(2), nullptr);
  EXPECT_NE(m->find(3), nullptr);  // an open transaction keeps its producer
  // Once expired, the producer may continue at any sequence.
  EXPECT_EQ(code_of(m->check(header(1, 0, 17))), error_code::none);
}

TEST_F(producer_state_test, rebuilds_from_snapshot_and_log_after_restart) {
  std::map<int64_t, producer_state_entry> before;
  {
    auto log = open_log();
    auto m = open_state();
    ASSERT_TRUE(m->reload(*log, start_ms).ok());
    for (int32_t i = 0; i < 4; ++i) {
      leader_append(*log, *m, batch(1000, 0, 3 * i, 3));
      leader_append(*log, *m, batch(2000, 5, i, 1));
    }
    ASSERT_TRUE(m->take_snapshot(log->log_end_offset()).ok());  // offset 16
    for (int32_t i = 4; i < 7; ++i) leader_append(*log, *m, batch(1000, 0, 3 * i, 3));
    leader_append(*log, *m, batch(3000, 0, 0, 2));
    leader_append(*log, *m, batch(proto::no_producer_id, proto::no_producer_epoch, proto::no_sequence, 2));
    for (const auto& [id, e] : m->producers()) before[id] = e;
    ASSERT_TRUE(log->close().ok());  // no snapshot at close: the restart has to replay the log
  }
  EXPECT_EQ(snapshot_files(), (std::vector<std::string>{"00000000000000000016.snapshot"}));

  auto log = open_log();
  auto m = open_state();
  std::vector<std::pair<int64_t, int64_t>> scans;
  ASSERT_TRUE(m->reload(
                   log->log_start_offset(), log->log_end_offset(),
                   [&](int64_t from, int64_t to, const log_batch_visitor& visit) {
                     scans.emplace_back(from, to);
                     return scan_log_batches(*log, from, to, visit);
                   },
                   start_ms)
                  .ok());
  EXPECT_EQ(scans, (std::vector<std::pair<int64_t, int64_t>>{{16, 29}}));
  EXPECT_EQ(m->map_end_offset(), 29);
  EXPECT_EQ(m->producer_count(), 3u);
  // Producer 1000 wrote after the snapshot: the snapshot's last batch and the three replayed ones are back
  // (the snapshot holds one batch per producer, as Kafka's does, so the oldest of the five is gone).
  {
    auto expected = before[1000];
    expected.batches.erase(expected.batches.begin());
    EXPECT_EQ(*m->find(1000), expected);
  }
  EXPECT_EQ(*m->find(3000), before[3000]);
  // Producer 2000 only before it: the snapshot keeps its last batch (Kafka keeps no more).
  ASSERT_EQ(m->find(2000)->batches.size(), 1u);
  EXPECT_EQ(m->find(2000)->batches[0], before[2000].batches.back());
  EXPECT_EQ(m->find(2000)->producer_epoch, 5);
  // The restarted leader answers duplicates and continues sequences.
  auto dup = m->check(header(1000, 0, 15, 3));
  ASSERT_TRUE(dup.ok());
  ASSERT_TRUE(dup->is_duplicate());
  EXPECT_EQ(dup->duplicate->first_offset, 19);  // sequences 15-17 went to offsets 19-21
  EXPECT_EQ(code_of(m->check(header(1000, 0, 21))), error_code::none);
  EXPECT_EQ(code_of(m->check(header(2000, 5, 4))), error_code::none);
  EXPECT_EQ(code_of(m->check(header(2000, 5, 5))), error_code::out_of_order_sequence_number);
  EXPECT_EQ(code_of(m->check(header(2000, 4, 4))), error_code::invalid_producer_epoch);
  // reload snapshots at the log end, so the next restart replays nothing.
  EXPECT_EQ(snapshot_files(),
            (std::vector<std::string>{"00000000000000000016.snapshot", "00000000000000000029.snapshot"}));

  // Without any snapshot the whole log is replayed, with the same result for the producers written after 16.
  for (const auto& f : snapshot_files()) fs::remove(_dir / f);
  auto fresh = open_state();
  ASSERT_TRUE(fresh->reload(*log, start_ms).ok());
  const std::unordered_map<int64_t, producer_state_entry> all(before.begin(), before.end());
  EXPECT_EQ(fresh->producers(), all);
}

TEST_F(producer_state_test, snapshot_on_segment_roll_is_used_by_the_restart) {
  log_config config;
  config.segment_bytes = 300;  // a few batches per segment
  {
    auto log = open_log(config);
    auto m = open_state();
    ASSERT_TRUE(m->reload(*log, start_ms).ok());
    for (int32_t i = 0; i < 12; ++i) leader_append(*log, *m, batch(1000, 0, 2 * i, 2));
    ASSERT_GT(log->segment_count(), 2u);
    EXPECT_EQ(m->snapshot_offsets().size(), producer_snapshots_retained);
    ASSERT_TRUE(m->take_snapshot(log->log_end_offset()).ok());  // clean close
    ASSERT_TRUE(log->close().ok());
  }
  auto log = open_log(config);
  auto m = open_state();
  int64_t replayed_from = -1;
  ASSERT_TRUE(m->reload(
                   log->log_start_offset(), log->log_end_offset(),
                   [&](int64_t from, int64_t to, const log_batch_visitor& visit) {
                     replayed_from = from;
                     return scan_log_batches(*log, from, to, visit);
                   },
                   start_ms)
                  .ok());
  EXPECT_EQ(replayed_from, -1);  // the close snapshot covers the whole log
  EXPECT_EQ(code_of(m->check(header(1000, 0, 24))), error_code::none);
  auto dup = m->check(header(1000, 0, 22, 2));
  ASSERT_TRUE(dup.ok());
  EXPECT_TRUE(dup->is_duplicate());
}

TEST_F(producer_state_test, truncation_reloads_the_state_below_the_offset) {
  auto log = open_log();
  auto m = open_state();
  ASSERT_TRUE(m->reload(*log, start_ms).ok());
  for (int32_t i = 0; i < 3; ++i) leader_append(*log, *m, batch(1000, 0, 2 * i, 2));  // offsets 0-5
  ASSERT_TRUE(m->take_snapshot(log->log_end_offset()).ok());                          // 6
  for (int32_t i = 3; i < 6; ++i) leader_append(*log, *m, batch(1000, 0, 2 * i, 2));  // 6-11
  leader_append(*log, *m, batch(2000, 0, 0, 1));                                      // 12
  ASSERT_TRUE(m->take_snapshot(log->log_end_offset()).ok());                          // 13
  leader_append(*log, *m, batch(1000, 1, 0, 1));                                      // 13, epoch bump

  // Truncate to 8: the snapshot at 13 goes, the one at 6 plus the batch at 6-7 rebuild the state.
  ASSERT_TRUE(log->truncate_to(8).ok());
  ASSERT_TRUE(m->reload(*log, start_ms).ok());
  EXPECT_EQ(m->map_end_offset(), 8);
  EXPECT_EQ(m->find(2000), nullptr);
  const auto* e = m->find(1000);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->producer_epoch, 0);
  EXPECT_EQ(e->last_sequence(), 7);
  EXPECT_EQ(e->last_offset(), 7);
  EXPECT_EQ(code_of(m->check(header(1000, 0, 8, 2))), error_code::none);
  EXPECT_EQ(code_of(m->check(header(1000, 0, 10, 2))), error_code::out_of_order_sequence_number);
  EXPECT_EQ(snapshot_files(),
            (std::vector<std::string>{"00000000000000000006.snapshot", "00000000000000000008.snapshot"}));

  // Below every snapshot: replay from the log start.
  ASSERT_TRUE(log->truncate_to(4).ok());
  ASSERT_TRUE(m->reload(*log, start_ms).ok());
  EXPECT_EQ(m->find(1000)->last_sequence(), 3);
  EXPECT_EQ(m->find(1000)->batches.size(), 2u);
  EXPECT_EQ(snapshot_files(), (std::vector<std::string>{"00000000000000000004.snapshot"}));

  // A follower far behind starts over.
  ASSERT_TRUE(log->truncate_fully_and_start_at(50).ok());
  ASSERT_TRUE(m->truncate_fully_and_start_at(50).ok());
  EXPECT_EQ(m->producer_count(), 0u);
  EXPECT_TRUE(snapshot_files().empty());
  EXPECT_EQ(m->map_end_offset(), 50);
}

TEST_F(producer_state_test, corrupt_latest_snapshot_falls_back_to_the_previous_one) {
  auto log = open_log();
  auto m = open_state();
  ASSERT_TRUE(m->reload(*log, start_ms).ok());
  leader_append(*log, *m, batch(1000, 0, 0, 2));
  ASSERT_TRUE(m->take_snapshot(2).ok());
  leader_append(*log, *m, batch(1000, 0, 2, 2));
  ASSERT_TRUE(m->take_snapshot(4).ok());
  {
    std::ofstream out(_dir / "00000000000000000004.snapshot", std::ios::binary | std::ios::trunc);
    out << "garbage";
  }
  auto restarted = open_state();
  ASSERT_TRUE(restarted->reload(*log, start_ms).ok());
  EXPECT_EQ(*restarted->find(1000), *m->find(1000));
  // The corrupt one was deleted and a new one written at the log end.
  EXPECT_EQ(snapshot_files(),
            (std::vector<std::string>{"00000000000000000002.snapshot", "00000000000000000004.snapshot"}));
  auto reread = open_state();
  ASSERT_TRUE(reread->reload(*log, start_ms).ok());
  EXPECT_EQ(reread->find(1000)->last_sequence(), 3);
}

TEST_F(producer_state_test, expired_producers_are_not_loaded_from_a_snapshot) {
  auto log = open_log();
  auto m = open_state({.producer_id_expiration_ms = 1000});
  ASSERT_TRUE(m->reload(*log, start_ms).ok());
  leader_append(*log, *m, batch(1, 0, 0, 1, start_ms));
  leader_append(*log, *m, batch(2, 0, 0, 1, start_ms + 5000));
  ASSERT_TRUE(m->take_snapshot(log->log_end_offset()).ok());
  auto restarted = open_state({.producer_id_expiration_ms = 1000});
  ASSERT_TRUE(restarted->reload(*log, start_ms + 5500).ok());
  EXPECT_EQ(restarted->find(1), nullptr);
  EXPECT_NE(restarted->find(2), nullptr);
}

}  // namespace
}  // namespace mala::storage
