// Transactions in the storage layer: open and unreplicated transactions in the producer state, the first
// unstable offset, markers completing them, the coordinator's marker checks, and the aborted-transaction
// index (.txnindex) written on aborts, truncated, and rebuilt by the producer-state replay after a crash.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/storage/file_worker.h"
#include "mala/storage/partition_log.h"
#include "mala/storage/producer_state.h"
#include "mala/storage/transaction_index.h"
#include "mala/storage/txn_marker.h"

namespace mala::storage {
namespace {

namespace fs = std::filesystem;
namespace proto = mala::protocol;

constexpr int64_t start_ms = 1'700'000'000'000;

std::vector<uint8_t> data_batch(int64_t producer_id, int16_t epoch, int32_t sequence, bool transactional,
                                int records = 1) {
  proto::record_batch_builder b;
  b.producer(producer_id, epoch, sequence).transactional(transactional);
  const std::string value = "value";
  for (int r = 0; r < records; ++r) {
    b.add(start_ms + r, std::nullopt,
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
  }
  return b.build();
}

std::vector<uint8_t> marker_batch(int64_t producer_id, int16_t epoch, bool commit,
                                  int32_t coordinator_epoch = 0) {
  return encode_txn_marker_batch({.producer_id = producer_id,
                                  .producer_epoch = epoch,
                                  .type = commit ? txn_marker_type::commit : txn_marker_type::abort,
                                  .coordinator_epoch = coordinator_epoch,
                                  .timestamp = start_ms + 100});
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class transaction_state_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = fs::temp_directory_path() / ("mala-txn-state-test-" + std::to_string(std::random_device{}()));
    _dir = _root / "orders-0";
    fs::create_directories(_dir);
  }
  void TearDown() override {
    _state.reset();
    _log.reset();
    fs::remove_all(_root);
  }

  // A log and its producer state, as the replication layer wires them (clean_shutdown false: a crash).
  void open(log_config config = {}, bool clean = true, int64_t now = start_ms,
            std::shared_ptr<file_worker> worker = {}) {
    _state.reset();
    _log.reset();
    log_open_options o;
    o.clean_shutdown = clean;
    o.worker = std::move(worker);
    o.clock_ms = [] { return start_ms; };
    auto log = partition_log::open(_dir, {"orders", 0}, config, std::move(o));
    ASSERT_TRUE(log.ok()) << log.error().message;
    _log = std::move(*log);
    auto state = producer_state_manager::open(_dir, {});
    ASSERT_TRUE(state.ok());
    _state = std::move(*state);
    _log->set_roll_listener([this](int64_t base) -> std::optional<fs::path> {
      auto written = _state->take_snapshot(base);
      return written.ok() ? *written : std::nullopt;
    });
    ASSERT_TRUE(_state->reload(*_log, now).ok());
  }

  // Leader append of data: checked, written, recorded. Returns the base offset.
  int64_t append(std::vector<uint8_t> bytes) {
    auto checked = _state->check_records(bytes);
    EXPECT_TRUE(checked.ok()) << checked.error().message;
    auto appended = _log->append_as_leader(bytes, 0);
    EXPECT_TRUE(appended.ok()) << appended.error().message;
    EXPECT_TRUE(_state->on_append(bytes).empty());
    return appended->first_offset;
  }

  // A coordinator's marker: checked, written, the transaction it completed indexed when aborted.
  result<std::vector<completed_txn>> append_marker(const txn_marker_request& m) {
    if (auto st = _state->check_marker(m); !st.ok()) return st;
    auto bytes = marker_batch(m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch);
    auto appended = _log->append_as_leader(bytes, 0);
    if (!appended) return appended.error();
    auto completed = _state->on_append(bytes);
    for (const auto& t : completed) {
      if (!t.aborted) continue;
      auto st =
          _log->append_aborted_txn({t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset});
      if (!st.ok()) return st;
    }
    return completed;
  }

  std::map<std::string, std::string> txn_index_files() const {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::directory_iterator(_dir)) {
      if (e.path().extension() == ".txnindex") out[e.path().filename().string()] = file_bytes(e.path());
    }
    return out;
  }

  fs::path _root;
  fs::path _dir;
  std::unique_ptr<partition_log> _log;
  std::unique_ptr<producer_state_manager> _state;
};

TEST(transaction_index_test, entries_use_kafkas_34_byte_layout) {
  const auto bytes = encode_aborted_txn(
      {.producer_id = 0x0102, .first_offset = 3, .last_offset = 9, .last_stable_offset = 4});
  ASSERT_EQ(bytes.size(), aborted_txn_entry_size);
  const std::string expected(
      "\x00\x00"                           // version 0
      "\x00\x00\x00\x00\x00\x00\x01\x02"   // producer id
      "\x00\x00\x00\x00\x00\x00\x00\x03"   // first offset
      "\x00\x00\x00\x00\x00\x00\x00\x09"   // last offset
      "\x00\x00\x00\x00\x00\x00\x00\x04",  // last stable offset
      34);
  EXPECT_EQ(bytes, expected);
  auto decoded =
      decode_aborted_txns(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), 34));
  ASSERT_TRUE(decoded.ok());
  ASSERT_EQ(decoded->size(), 1u);
  EXPECT_EQ((*decoded)[0], (aborted_txn{0x0102, 3, 9, 4}));
  std::string wrong_version = bytes;
  wrong_version[1] = 1;
  EXPECT_FALSE(decode_aborted_txns(
                   std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(wrong_version.data()), 34))
                   .ok());
}

TEST_F(transaction_state_test, index_file_appends_skips_known_entries_truncates_and_drops_a_torn_tail) {
  const auto path = (_dir / "00000000000000000100.txnindex").string();
  {
    transaction_index index(path, 100);
    ASSERT_TRUE(index.append({1, 100, 105, 106}).ok());
    ASSERT_TRUE(index.append({2, 101, 107, 108}).ok());
    ASSERT_TRUE(index.append({1, 100, 105, 106}).ok());  // a replay over an indexed range adds nothing
    EXPECT_EQ(index.append({3, 1, 99, 100}).code, error_code::corrupt_message);  // below the segment
    EXPECT_EQ(fs::file_size(path), 2 * aborted_txn_entry_size);
  }
  {
    std::ofstream torn(path, std::ios::binary | std::ios::app);
    torn << std::string(10, '\x00');
  }
  transaction_index reread(path, 100);
  auto entries = reread.entries();
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(*entries, (std::vector<aborted_txn>{{1, 100, 105, 106}, {2, 101, 107, 108}}));
  ASSERT_TRUE(reread.append({4, 109, 110, 111}).ok());  // overwrites the torn bytes
  EXPECT_EQ(fs::file_size(path), 3 * aborted_txn_entry_size);
  ASSERT_TRUE(reread.truncate_to(107).ok());
  EXPECT_EQ(*reread.entries(), (std::vector<aborted_txn>{{1, 100, 105, 106}}));
  EXPECT_EQ(fs::file_size(path), aborted_txn_entry_size);
}

TEST_F(transaction_state_test, collect_follows_kafkas_overlap_and_completeness_rules) {
  transaction_index index((_dir / "x.txnindex").string(), 0);
  ASSERT_TRUE(index.append({1, 0, 10, 5}).ok());
  ASSERT_TRUE(index.append({2, 5, 20, 21}).ok());
  ASSERT_TRUE(index.append({3, 21, 30, 31}).ok());
  std::vector<aborted_txn> out;
  // lastOffset >= fetch offset and firstOffset < upper bound; complete once an LSO reaches the bound.
  auto complete = index.collect(11, 21, out);
  ASSERT_TRUE(complete.ok());
  EXPECT_TRUE(*complete);
  EXPECT_EQ(out, (std::vector<aborted_txn>{{2, 5, 20, 21}}));
  out.clear();
  complete = index.collect(0, 100, out);
  EXPECT_FALSE(*complete);  // a later segment may hold an entry below 100
  EXPECT_EQ(out.size(), 3u);
}

TEST_F(transaction_state_test, interleaved_transactions_keep_the_first_unstable_offset_at_the_oldest) {
  open();
  EXPECT_EQ(_state->first_unstable_offset(), std::nullopt);
  append(data_batch(1, 0, 0, true));   // 0: producer 1 opens a transaction
  append(data_batch(2, 0, 0, true));   // 1: producer 2 opens one
  append(data_batch(1, 0, 1, true));   // 2
  append(data_batch(3, 0, 0, false));  // 3: idempotent, no transaction
  EXPECT_EQ(_state->first_unstable_offset(), 0);
  EXPECT_EQ(_state->ongoing_txns(), (std::map<int64_t, int64_t>{{0, 1}, {1, 2}}));

  // Producer 2 commits at 4: producer 1's transaction still holds the LSO at 0.
  auto committed = append_marker({.producer_id = 2, .producer_epoch = 0, .commit = true});
  ASSERT_TRUE(committed.ok());
  ASSERT_EQ(committed->size(), 1u);
  EXPECT_EQ((*committed)[0], (completed_txn{2, 1, 4, false, 0}));
  EXPECT_EQ(_state->first_unstable_offset(), 0);
  _state->on_high_watermark_updated(5);
  EXPECT_EQ(_state->first_unstable_offset(), 0);

  // Producer 1 aborts at 5: nothing else open, so the index entry's LSO is the marker + 1.
  auto aborted = append_marker({.producer_id = 1, .producer_epoch = 0, .commit = false});
  ASSERT_TRUE(aborted.ok());
  EXPECT_EQ((*aborted)[0], (completed_txn{1, 0, 5, true, 6}));
  // The marker is not replicated yet: the LSO waits for the high watermark to pass it.
  EXPECT_EQ(_state->first_unstable_offset(), 0);
  _state->on_high_watermark_updated(5);
  EXPECT_EQ(_state->first_unstable_offset(), 0);
  _state->on_high_watermark_updated(6);
  EXPECT_EQ(_state->first_unstable_offset(), std::nullopt);
  EXPECT_EQ(_state->unreplicated_txn_count(), 0u);
}

TEST_F(transaction_state_test, abort_index_entry_records_the_lso_of_the_other_open_transaction) {
  open();
  append(data_batch(1, 0, 0, true, 2));                                                       // 0-1
  append(data_batch(2, 0, 0, true));                                                          // 2
  ASSERT_TRUE(append_marker({.producer_id = 1, .producer_epoch = 0, .commit = false}).ok());  // 3
  append(data_batch(3, 0, 0, true));                                                          // 4
  ASSERT_TRUE(append_marker({.producer_id = 3, .producer_epoch = 0, .commit = false}).ok());  // 5
  auto aborted = _log->collect_aborted_transactions(0, 6);
  ASSERT_TRUE(aborted.ok());
  // Producer 2's open transaction (first offset 2) bounds both entries' LSO.
  EXPECT_EQ(*aborted, (std::vector<aborted_txn>{{1, 0, 3, 2}, {3, 4, 5, 2}}));
  _state->on_high_watermark_updated(6);
  EXPECT_EQ(_state->first_unstable_offset(), 2);
}

TEST_F(transaction_state_test, coordinator_markers_are_checked_for_epochs) {
  open();
  append(data_batch(7, 3, 0, true));
  // Transactions v0/v1: a marker at the producer's epoch or above.
  EXPECT_EQ(_state->check_marker({.producer_id = 7, .producer_epoch = 2, .commit = true}).code,
            error_code::invalid_producer_epoch);
  EXPECT_TRUE(_state->check_marker({.producer_id = 7, .producer_epoch = 3, .commit = true}).ok());
  // Transactions v2: the coordinator bumped the epoch, the marker must carry a higher one.
  EXPECT_EQ(
      _state->check_marker({.producer_id = 7, .producer_epoch = 3, .commit = true, .transaction_version = 2})
          .code,
      error_code::invalid_producer_epoch);
  ASSERT_TRUE(append_marker({.producer_id = 7,
                             .producer_epoch = 4,
                             .commit = true,
                             .coordinator_epoch = 5,
                             .transaction_version = 2})
                  .ok());
  EXPECT_EQ(_state->find(7)->producer_epoch, 4);
  // KAFKA-19999: the same marker again (a lost response, a reloaded coordinator) is written and completes
  // nothing.
  auto retry = append_marker({.producer_id = 7,
                              .producer_epoch = 4,
                              .commit = true,
                              .coordinator_epoch = 5,
                              .transaction_version = 2});
  ASSERT_TRUE(retry.ok()) << retry.error().message;
  EXPECT_TRUE(retry->empty());
  // A coordinator epoch older than the producer's last marker's is fenced; nothing is written.
  const int64_t end = _log->log_end_offset();
  auto fenced =
      append_marker({.producer_id = 7, .producer_epoch = 5, .commit = false, .coordinator_epoch = 4});
  ASSERT_FALSE(fenced.ok());
  EXPECT_EQ(fenced.error().code, error_code::transaction_coordinator_fenced);
  EXPECT_EQ(_log->log_end_offset(), end);
  // An unknown producer takes any marker (a TV2 abort of a transaction that wrote nothing here).
  EXPECT_TRUE(_state->check_marker({.producer_id = 99, .producer_epoch = 0, .transaction_version = 2}).ok());
}

TEST_F(transaction_state_test, non_transactional_batch_inside_a_transaction_is_invalid_txn_state) {
  open();
  append(data_batch(7, 0, 0, true));
  auto checked = _state->check_records(data_batch(7, 0, 1, false));
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.error().code, error_code::invalid_txn_state);
  // After the marker the producer writes outside a transaction again.
  ASSERT_TRUE(append_marker({.producer_id = 7, .producer_epoch = 0, .commit = true}).ok());
  EXPECT_TRUE(_state->check_records(data_batch(7, 0, 1, false)).ok());
}

// KIP-890 part 1: the verification guard of a producer with no open transaction.
proto::record_batch_header header_of(const std::vector<uint8_t>& bytes) {
  auto h = proto::parse_batch_header(bytes);
  EXPECT_TRUE(h.has_value());
  return *h;
}

result<producer_check_outcome> check_verified(const producer_state_manager& state,
                                              const std::vector<uint8_t>& bytes, uint64_t guard) {
  const auto h = header_of(bytes);
  const txn_verification v{guard};
  return state.check(std::span<const proto::record_batch_header>(&h, 1), false, append_origin::client, &v);
}

TEST_F(transaction_state_test, verified_transactional_batch_opens_a_transaction_only_with_the_stored_guard) {
  open();
  // No guard at all (a late write that was never verified): INVALID_TXN_STATE.
  auto unverified = check_verified(*_state, data_batch(7, 0, 0, true), 0);
  ASSERT_FALSE(unverified.ok());
  EXPECT_EQ(unverified.error().code, error_code::invalid_txn_state);
  // A guard that is not the stored one.
  const uint64_t guard = _state->create_verification_guard(7, 0, 0, start_ms);
  ASSERT_NE(guard, 0u);
  auto stale = check_verified(*_state, data_batch(7, 0, 0, true), guard + 1);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, error_code::invalid_txn_state);
  // The stored guard: accepted; writing the batch clears the guard and opens the transaction, after which
  // the producer needs no guard (create_verification_guard answers 0) and later batches pass with none.
  ASSERT_TRUE(check_verified(*_state, data_batch(7, 0, 0, true), guard).ok());
  append(data_batch(7, 0, 0, true));
  EXPECT_EQ(_state->find_verification(7), nullptr);
  EXPECT_EQ(_state->create_verification_guard(7, 1, 0, start_ms), 0u);
  EXPECT_TRUE(check_verified(*_state, data_batch(7, 0, 1, true), 0).ok());
  // Non-transactional batches are not concerned.
  EXPECT_TRUE(check_verified(*_state, data_batch(8, 0, 0, false), 0).ok());
  // Transactions v2: the next transaction's batch with the bumped epoch, before the open one's marker, is not
  // part of the open transaction: it needs its own guard.
  auto bumped = check_verified(*_state, data_batch(7, 1, 0, true), 0);
  ASSERT_FALSE(bumped.ok());
  EXPECT_EQ(bumped.error().code, error_code::invalid_txn_state);
  EXPECT_NE(_state->create_verification_guard(7, 0, 1, start_ms), 0u);
}

TEST_F(transaction_state_test, abort_marker_between_verification_and_append_invalidates_the_guard) {
  open();
  append(data_batch(7, 0, 0, true));
  // The producer's transaction is open: the request needs no verification (guard 0)...
  const uint64_t sentinel = _state->create_verification_guard(7, 1, 0, start_ms);
  EXPECT_EQ(sentinel, 0u);
  // ...but the coordinator aborts it before the append (timeout): the late batch may not open a new one.
  ASSERT_TRUE(append_marker({.producer_id = 7, .producer_epoch = 0, .commit = false}).ok());
  auto late = check_verified(*_state, data_batch(7, 0, 1, true), sentinel);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, error_code::invalid_txn_state);

  // ABA: verified with a guard, then a marker of the producer clears it before the append; a new guard for
  // the next verification is another identity, so the first request's append is refused.
  const uint64_t first = _state->create_verification_guard(7, 1, 0, start_ms);
  ASSERT_NE(first, 0u);
  ASSERT_TRUE(append_marker({.producer_id = 7, .producer_epoch = 0, .commit = false}).ok());
  EXPECT_EQ(_state->find_verification(7), nullptr);
  const uint64_t second = _state->create_verification_guard(7, 1, 0, start_ms);
  ASSERT_NE(second, 0u);
  EXPECT_NE(first, second);
  auto aba = check_verified(*_state, data_batch(7, 0, 1, true), first);
  ASSERT_FALSE(aba.ok());
  EXPECT_EQ(aba.error().code, error_code::invalid_txn_state);
  EXPECT_TRUE(check_verified(*_state, data_batch(7, 0, 1, true), second).ok());
}

TEST_F(transaction_state_test, verification_entry_keeps_its_guard_and_the_lowest_sequence_and_newest_epoch) {
  open();
  const uint64_t guard = _state->create_verification_guard(7, 5, 1, start_ms);
  ASSERT_NE(guard, 0u);
  // A lower sequence at the same epoch lowers it; a higher one does not; the guard stays.
  EXPECT_EQ(_state->create_verification_guard(7, 3, 1, start_ms), guard);
  EXPECT_EQ(_state->find_verification(7)->lowest_sequence, 3);
  EXPECT_EQ(_state->create_verification_guard(7, 9, 1, start_ms), guard);
  EXPECT_EQ(_state->find_verification(7)->lowest_sequence, 3);
  // An older epoch changes nothing; a newer one takes its sequence.
  EXPECT_EQ(_state->create_verification_guard(7, 0, 0, start_ms), guard);
  EXPECT_EQ(_state->find_verification(7)->epoch, 1);
  EXPECT_EQ(_state->find_verification(7)->lowest_sequence, 3);
  EXPECT_EQ(_state->create_verification_guard(7, 8, 2, start_ms), guard);
  EXPECT_EQ(_state->find_verification(7)->epoch, 2);
  EXPECT_EQ(_state->find_verification(7)->lowest_sequence, 8);
  // Another producer gets its own guard; entries expire with producer.id.expiration.ms.
  EXPECT_NE(_state->create_verification_guard(9, 0, 0, start_ms), guard);
  _state->remove_expired_producers(start_ms + default_producer_id_expiration_ms);
  EXPECT_EQ(_state->find_verification(7), nullptr);
  EXPECT_EQ(_state->find_verification(9), nullptr);
}

TEST_F(transaction_state_test, a_batch_above_the_lowest_sequence_being_verified_is_out_of_order) {
  open();
  append(data_batch(7, 0, 0, true));
  ASSERT_TRUE(append_marker({.producer_id = 7, .producer_epoch = 0, .commit = true}).ok());
  // The next transaction's first batch (sequence 1) is being verified; its verification fails with a
  // retriable error, and the batch after it (sequence 2) comes with its own verification of the same
  // producer: it may not be written ahead of sequence 1, which would leave 1 out of order for ever.
  const uint64_t guard = _state->create_verification_guard(7, 1, 0, start_ms);
  ASSERT_NE(guard, 0u);
  EXPECT_EQ(_state->create_verification_guard(7, 2, 0, start_ms), guard);
  auto ahead = check_verified(*_state, data_batch(7, 0, 2, true), guard);
  ASSERT_FALSE(ahead.ok());
  EXPECT_EQ(ahead.error().code, error_code::out_of_order_sequence_number);
  // The coordinator's own writes are not sequence-checked; the lowest batch itself is accepted.
  const auto h = header_of(data_batch(7, 0, 2, true));
  const txn_verification v{guard};
  EXPECT_TRUE(
      _state->check(std::span<const proto::record_batch_header>(&h, 1), false, append_origin::coordinator, &v)
          .ok());
  EXPECT_TRUE(check_verified(*_state, data_batch(7, 0, 1, true), guard).ok());
  // Once the lowest batch is written the entry is gone, and the next batch is in sequence.
  append(data_batch(7, 0, 1, true));
  EXPECT_EQ(_state->find_verification(7), nullptr);
  EXPECT_TRUE(check_verified(*_state, data_batch(7, 0, 2, true), 0).ok());
}

TEST_F(transaction_state_test, open_transactions_survive_snapshots_and_expiry) {
  log_config config;
  open(config);
  append(data_batch(1, 0, 0, true));   // 0: stays open
  append(data_batch(2, 0, 0, false));  // 1: idle idempotent producer
  ASSERT_TRUE(_state->take_snapshot(_log->log_end_offset()).ok());
  ASSERT_TRUE(_log->close().ok());
  // A day and more later both are idle past producer.id.expiration.ms; only the one without a transaction
  // goes, at load and by the expiry pass.
  open(config, true, start_ms + 2 * default_producer_id_expiration_ms);
  EXPECT_EQ(_state->find(2), nullptr);
  ASSERT_NE(_state->find(1), nullptr);
  EXPECT_EQ(_state->find(1)->current_txn_first_offset, 0);
  EXPECT_EQ(_state->ongoing_txns(), (std::map<int64_t, int64_t>{{0, 1}}));
  EXPECT_EQ(_state->first_unstable_offset(), 0);
  EXPECT_EQ(_state->remove_expired_producers(start_ms + 3 * default_producer_id_expiration_ms), 0u);
  // The marker after the restart completes the transaction the snapshot carried.
  auto aborted = append_marker({.producer_id = 1, .producer_epoch = 0, .commit = false});
  ASSERT_TRUE(aborted.ok());
  EXPECT_EQ((*aborted)[0], (completed_txn{1, 0, 2, true, 3}));
}

TEST_F(transaction_state_test, truncation_across_a_marker_reopens_the_transaction) {
  open();
  append(data_batch(1, 0, 0, true, 2));                                                       // 0-1
  ASSERT_TRUE(append_marker({.producer_id = 1, .producer_epoch = 0, .commit = false}).ok());  // 2
  append(data_batch(2, 0, 0, false));                                                         // 3
  EXPECT_EQ(_log->collect_aborted_transactions(0, 4)->size(), 1u);
  _state->on_high_watermark_updated(4);
  EXPECT_EQ(_state->first_unstable_offset(), std::nullopt);

  // A follower finds its log diverged at 2: the marker goes, and the transaction is open again.
  ASSERT_TRUE(_log->truncate_to(2).ok());
  ASSERT_TRUE(_state->reload(*_log, start_ms).ok());
  EXPECT_TRUE(_log->collect_aborted_transactions(0, 4)->empty());
  EXPECT_EQ(_state->first_unstable_offset(), 0);
  EXPECT_EQ(_state->find(1)->current_txn_first_offset, 0);
  EXPECT_EQ(txn_index_files().begin()->second, "");
}

TEST_F(transaction_state_test, an_abort_is_indexed_in_memory_at_once_and_written_off_the_shard) {
  auto worker = std::make_shared<file_worker>();
  open({}, true, start_ms, worker);
  auto worker_idle = [&] {
    for (int i = 0; i < 1000 && worker->pending() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return worker->pending() == 0;
  };
  // The worker held up: the entry's write waits for it.
  std::promise<void> release;
  worker->post([f = release.get_future().share()] { f.wait(); });
  append(data_batch(1, 0, 0, true, 2));
  ASSERT_TRUE(append_marker({.producer_id = 1, .producer_epoch = 0, .commit = false}).ok());
  const aborted_txn expected{1, 0, 2, 3};  // the LSO once the marker (offset 2) is written
  // read_committed fetches see it before the file has it.
  auto collected = _log->collect_aborted_transactions(0, _log->log_end_offset());
  ASSERT_TRUE(collected.ok());
  ASSERT_EQ(collected->size(), 1u);
  EXPECT_EQ((*collected)[0], expected);
  EXPECT_EQ(txn_index_files().begin()->second, "");
  release.set_value();
  ASSERT_TRUE(worker_idle());
  EXPECT_EQ(txn_index_files().begin()->second, encode_aborted_txn(expected));

  // A flush writes what the worker has not written yet, then syncs it.
  release = {};
  worker->post([f = release.get_future().share()] { f.wait(); });
  append(data_batch(1, 1, 0, true));
  ASSERT_TRUE(append_marker({.producer_id = 1, .producer_epoch = 1, .commit = false}).ok());
  append(data_batch(1, 2, 0, true));
  ASSERT_TRUE(append_marker({.producer_id = 1, .producer_epoch = 2, .commit = false}).ok());
  EXPECT_EQ(worker->pending(), 2u);  // the two entries make one job behind the held one
  auto work = _log->sync_all_work(start_ms);
  ASSERT_TRUE(work.ok());
  for (const auto& file : work->files) EXPECT_TRUE(file->sync().ok());
  EXPECT_EQ(txn_index_files().begin()->second.size(), 3 * aborted_txn_entry_size);
  release.set_value();
  ASSERT_TRUE(worker_idle());

  // The entries are read when the log opens: what the file holds after that is not read again.
  collected = _log->collect_aborted_transactions(0, _log->log_end_offset());
  ASSERT_TRUE(collected.ok());
  open({}, true, start_ms, worker);
  const auto index = _dir / txn_index_files().begin()->first;
  fs::resize_file(index, 0);
  EXPECT_EQ(*_log->collect_aborted_transactions(0, _log->log_end_offset()), *collected);
}

TEST_F(transaction_state_test, crash_recovery_rebuilds_the_txn_index_as_it_was) {
  log_config config;
  config.segment_bytes = 400;  // a few batches per segment
  open(config);
  int16_t epoch = 0;
  for (int round = 0; round < 8; ++round) {
    // Two producers with overlapping transactions, one aborting every time, the other committing.
    append(data_batch(1, epoch, 0, true));
    append(data_batch(2, epoch, 0, true));
    append(data_batch(1, epoch, 1, true));
    ASSERT_TRUE(append_marker({.producer_id = 1, .producer_epoch = epoch, .commit = false}).ok());
    append(data_batch(3, 0, round, false));
    ASSERT_TRUE(append_marker({.producer_id = 2, .producer_epoch = epoch, .commit = true}).ok());
    ++epoch;
  }
  // The last marker (an abort) is in the active segment.
  append(data_batch(1, epoch, 0, true));
  ASSERT_TRUE(append_marker({.producer_id = 1, .producer_epoch = epoch, .commit = false}).ok());
  ASSERT_GT(_log->segment_count(), 3u);
  ASSERT_TRUE(_log->flush().ok());
  const auto before = txn_index_files();
  size_t entries = 0;
  for (const auto& [name, bytes] : before) entries += bytes.size() / aborted_txn_entry_size;
  EXPECT_EQ(entries, 9u);
  const auto collected = _log->collect_aborted_transactions(0, _log->log_end_offset());
  ASSERT_TRUE(collected.ok());
  EXPECT_EQ(collected->size(), 9u);

  // Crash: the active segment's index lost its entries (never synced). The replay from the newest roll
  // snapshot (at the active segment's base) writes them again.
  const auto active_index = _dir / std::prev(before.end())->first;
  ASSERT_GT(fs::file_size(active_index), 0u);
  _state.reset();
  _log.reset();
  fs::resize_file(active_index, 0);
  open(config, /*clean=*/false);
  EXPECT_EQ(txn_index_files(), before);

  // Crash without any snapshot and every index emptied: the replay from the log start rebuilds them all.
  _state.reset();
  _log.reset();
  for (const auto& e : fs::directory_iterator(_dir)) {
    if (e.path().extension() == ".snapshot") fs::remove(e.path());
  }
  for (const auto& [name, bytes] : before) fs::resize_file(_dir / name, 0);
  open(config, /*clean=*/false);
  EXPECT_EQ(txn_index_files(), before);
  EXPECT_EQ(*_log->collect_aborted_transactions(0, _log->log_end_offset()), *collected);
}

}  // namespace
}  // namespace mala::storage
