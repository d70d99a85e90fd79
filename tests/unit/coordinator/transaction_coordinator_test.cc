// The transaction coordinator on its own: a log writer and a marker sender that complete when told to, a
// manual clock. Covers the transitions of Kafka's TransactionState (InitProducerId, AddPartitionsToTxn,
// EndTxn under transactions v1 and v2, fencing, timeouts, expiration), the records it writes (read back into
// a second coordinator: a failover that finishes a Prepare* transaction) and the coordinator epoch checks.
#include <gtest/gtest.h>

#include <deque>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mala/coordinator/transaction_coordinator.h"
#include "mala/coordinator/transaction_records.h"

namespace mala::coordinator {
namespace {

constexpr int64_t start_ms = 1'700'000'000'000;

struct test_log_writer : transaction_log_writer {
  struct pending_write {
    int32_t partition;
    coordinator_record record;
    std::function<void(error_code)> done;
  };
  std::deque<pending_write> pending;
  std::vector<std::pair<int32_t, coordinator_record>> committed;

  void append(int32_t partition, coordinator_record record, int32_t,
              std::function<void(error_code)> done) override {
    pending.push_back({partition, std::move(record), std::move(done)});
  }
  // Completes the writes in order, and those they cause.
  void complete_all(error_code e = error_code::none) {
    while (!pending.empty()) {
      auto w = std::move(pending.front());
      pending.pop_front();
      if (e == error_code::none) committed.emplace_back(w.partition, std::move(w.record));
      w.done(e);
    }
  }
  std::optional<transaction_transition> last_state(const std::string& id) const {
    std::optional<transaction_transition> out;
    for (const auto& [p, r] : committed) {
      std::optional<std::span<const uint8_t>> v;
      if (r.value) v = std::span<const uint8_t>(*r.value);
      auto e = decode_transaction_log_record(r.key, v);
      if (e && e->transactional_id == id) out = e->value;
    }
    return out;
  }
};

struct test_marker_sender : txn_marker_sender {
  struct pending_send {
    txn_marker_request request;
    std::function<void(std::vector<txn_marker_result>)> done;
  };
  std::deque<pending_send> pending;
  std::vector<txn_marker_request> sent;

  void send(txn_marker_request request, std::function<void(std::vector<txn_marker_result>)> done) override {
    sent.push_back(request);
    pending.push_back({std::move(request), std::move(done)});
  }
  // Answers every pending send with `e` for each partition.
  void answer_all(error_code e = error_code::none) {
    while (!pending.empty()) {
      auto s = std::move(pending.front());
      pending.pop_front();
      std::vector<txn_marker_result> results;
      for (const auto& p : s.request.partitions) results.push_back({p, e, false});
      s.done(std::move(results));
    }
  }
};

class transaction_coordinator_test : public ::testing::Test {
 protected:
  transaction_coordinator_test() { make(); }

  void make() {
    transaction_coordinator_config config;
    config.state_log_partitions = 1;
    config.offsets_topic_partitions = 1;
    coordinator =
        std::make_unique<transaction_coordinator>(config, writer, markers, next_id_source(), clock());
    coordinator->begin_loading(0, 5);
    coordinator->complete_loading(0);
  }
  transaction_coordinator::producer_id_source next_id_source() {
    return [this]() -> result<int64_t> { return next_producer_id++; };
  }
  std::function<int64_t()> clock() {
    return [this] { return now; };
  }

  init_producer_id_result init(const std::string& id, std::optional<producer_id_and_epoch> expected = {},
                               int32_t timeout = 60'000) {
    std::optional<init_producer_id_result> out;
    coordinator->init_producer_id(id, timeout, expected, [&out](init_producer_id_result r) { out = r; });
    writer.complete_all();
    EXPECT_TRUE(out);
    return out.value_or(init_producer_id_result{error_code::unknown_server_error, {}});
  }
  error_code add(const std::string& id, producer_id_and_epoch p, std::set<txn_partition> parts) {
    std::optional<error_code> out;
    coordinator->add_partitions(id, p.producer_id, p.producer_epoch, std::move(parts), 0,
                                [&out](error_code e) { out = e; });
    writer.complete_all();
    EXPECT_TRUE(out);
    return out.value_or(error_code::unknown_server_error);
  }
  // EndTxn; the markers are left pending.
  end_txn_result end(const std::string& id, producer_id_and_epoch p, bool commit, int16_t tv) {
    std::optional<end_txn_result> out;
    coordinator->end_transaction(id, p.producer_id, p.producer_epoch, commit, tv,
                                 [&out](end_txn_result r) { out = r; });
    writer.complete_all();
    EXPECT_TRUE(out);
    return out.value_or(end_txn_result{error_code::unknown_server_error, {}});
  }
  transaction_state state(const std::string& id) const { return coordinator->describe(id).state; }

  int64_t now = start_ms;
  int64_t next_producer_id = 1000;
  test_log_writer writer;
  test_marker_sender markers;
  std::unique_ptr<transaction_coordinator> coordinator;
};

const txn_partition topic_a0{"a", 0};
const txn_partition topic_a1{"a", 1};
const txn_partition topic_b0{"b", 0};

TEST_F(transaction_coordinator_test, commit_under_v1_writes_prepare_then_markers_then_complete) {
  auto p = init("t1");
  ASSERT_EQ(p.error, error_code::none);
  EXPECT_EQ(p.producer.producer_id, 1000);
  EXPECT_EQ(p.producer.producer_epoch, 0);
  EXPECT_EQ(state("t1"), transaction_state::empty);

  ASSERT_EQ(add("t1", p.producer, {topic_a0, topic_b0}), error_code::none);
  EXPECT_EQ(state("t1"), transaction_state::ongoing);
  EXPECT_EQ(coordinator->describe("t1").partitions, (std::set<txn_partition>{topic_a0, topic_b0}));
  // Adding what is already in: no write.
  const size_t writes = writer.committed.size();
  EXPECT_EQ(add("t1", p.producer, {topic_a0}), error_code::none);
  EXPECT_EQ(writer.committed.size(), writes);

  auto r = end("t1", p.producer, true, 0);
  ASSERT_EQ(r.error, error_code::none);
  EXPECT_EQ(r.producer.producer_epoch, 0);  // v1: no bump
  EXPECT_EQ(writer.last_state("t1")->state, transaction_state::prepare_commit);
  ASSERT_EQ(markers.sent.size(), 1u);
  EXPECT_TRUE(markers.sent[0].commit);
  EXPECT_EQ(markers.sent[0].producer_epoch, 0);
  EXPECT_EQ(markers.sent[0].coordinator_epoch, 5);
  EXPECT_EQ(markers.sent[0].partitions.size(), 2u);
  // While the markers are out: PrepareCommit, and a second EndTxn waits.
  EXPECT_EQ(state("t1"), transaction_state::prepare_commit);
  EXPECT_EQ(end("t1", p.producer, true, 0).error, error_code::concurrent_transactions);
  EXPECT_EQ(add("t1", p.producer, {topic_a1}), error_code::concurrent_transactions);

  markers.answer_all();
  writer.complete_all();
  EXPECT_EQ(state("t1"), transaction_state::complete_commit);
  EXPECT_EQ(writer.last_state("t1")->state, transaction_state::complete_commit);
  EXPECT_TRUE(coordinator->describe("t1").partitions.empty());
  // A retried EndTxn of the same result: NONE; of the other: INVALID_TXN_STATE.
  EXPECT_EQ(end("t1", p.producer, true, 0).error, error_code::none);
  EXPECT_EQ(end("t1", p.producer, false, 0).error, error_code::invalid_txn_state);
  // The next transaction.
  EXPECT_EQ(add("t1", p.producer, {topic_a1}), error_code::none);
  EXPECT_EQ(coordinator->describe("t1").partitions, (std::set<txn_partition>{topic_a1}));
}

TEST_F(transaction_coordinator_test, markers_are_retried_until_every_leader_wrote_them) {
  auto p = init("t1").producer;
  ASSERT_EQ(add("t1", p, {topic_a0, topic_b0}), error_code::none);
  ASSERT_EQ(end("t1", p, false, 0).error, error_code::none);
  ASSERT_EQ(markers.pending.size(), 1u);
  // a-0's leader moved; b-0 wrote it.
  auto s = std::move(markers.pending.front());
  markers.pending.pop_front();
  s.done({{topic_a0, error_code::not_leader_or_follower, false}, {topic_b0, error_code::none, false}});
  EXPECT_EQ(state("t1"), transaction_state::prepare_abort);
  EXPECT_EQ(coordinator->describe("t1").partitions, (std::set<txn_partition>{topic_a0}));
  EXPECT_TRUE(markers.pending.empty());
  now += 100;
  coordinator->run_expired_timers();
  ASSERT_EQ(markers.pending.size(), 1u);
  EXPECT_EQ(markers.pending.front().request.partitions, (std::vector<txn_partition>{topic_a0}));
  markers.answer_all();
  writer.complete_all();
  EXPECT_EQ(state("t1"), transaction_state::complete_abort);
}

TEST_F(transaction_coordinator_test, a_partition_whose_topic_is_gone_is_dropped_from_the_markers) {
  auto p = init("t1").producer;
  ASSERT_EQ(add("t1", p, {topic_a0}), error_code::none);
  ASSERT_EQ(end("t1", p, true, 0).error, error_code::none);
  auto s = std::move(markers.pending.front());
  markers.pending.pop_front();
  s.done({{topic_a0, error_code::unknown_topic_or_partition, true}});
  writer.complete_all();
  EXPECT_EQ(state("t1"), transaction_state::complete_commit);
}

TEST_F(transaction_coordinator_test, v2_end_bumps_the_epoch_and_retries_are_recognised) {
  auto p = init("t1").producer;
  ASSERT_EQ(add("t1", p, {topic_a0}), error_code::none);
  auto r = end("t1", p, true, 2);
  ASSERT_EQ(r.error, error_code::none);
  EXPECT_EQ(r.producer.producer_id, p.producer_id);
  EXPECT_EQ(r.producer.producer_epoch, p.producer_epoch + 1);
  ASSERT_EQ(markers.sent.size(), 1u);
  EXPECT_EQ(markers.sent[0].producer_epoch, p.producer_epoch + 1);
  EXPECT_EQ(markers.sent[0].transaction_version, 2);
  // The retry (old epoch) while the markers are out.
  EXPECT_EQ(end("t1", p, true, 2).error, error_code::concurrent_transactions);
  markers.answer_all();
  writer.complete_all();
  // The retry after completion answers the stored producer.
  auto retry = end("t1", p, true, 2);
  EXPECT_EQ(retry.error, error_code::none);
  EXPECT_EQ(retry.producer.producer_epoch, p.producer_epoch + 1);
  // A retry with the other result, and a commit of a transaction with nothing in it: INVALID_TXN_STATE.
  EXPECT_EQ(end("t1", p, false, 2).error, error_code::invalid_txn_state);
  EXPECT_EQ(end("t1", r.producer, true, 2).error, error_code::invalid_txn_state);
  // An abort under the new epoch with nothing added: allowed under v2, no markers.
  const size_t sent = markers.sent.size();
  auto aborted = end("t1", r.producer, false, 2);
  ASSERT_EQ(aborted.error, error_code::none);
  EXPECT_EQ(aborted.producer.producer_epoch, r.producer.producer_epoch + 1);
  writer.complete_all();
  EXPECT_EQ(markers.sent.size(), sent);
  EXPECT_EQ(state("t1"), transaction_state::complete_abort);
  // A stale epoch: fenced.
  EXPECT_EQ(end("t1", p, false, 2).error, error_code::producer_fenced);
}

TEST_F(transaction_coordinator_test, v2_epoch_exhaustion_moves_to_the_next_producer_id) {
  auto p = init("t1").producer;
  // Load a record one below the last epoch instead of bumping 32765 times.
  transaction_transition t;
  t.producer_id = p.producer_id;
  t.producer_epoch = exhausted_producer_epoch - 1;
  t.timeout_ms = 60'000;
  t.state = transaction_state::ongoing;
  t.partitions = {topic_a0};
  t.start_timestamp_ms = now;
  t.last_update_timestamp_ms = now;
  t.client_transaction_version = 2;
  auto rec = transaction_log_record("t1", t, 1);
  coordinator->begin_loading(0, 6);
  ASSERT_TRUE(coordinator->replay(0, rec.key, std::span<const uint8_t>(*rec.value)).ok());
  coordinator->complete_loading(0);
  auto r = end("t1", {p.producer_id, static_cast<int16_t>(exhausted_producer_epoch - 1)}, true, 2);
  ASSERT_EQ(r.error, error_code::none);
  EXPECT_EQ(r.producer.producer_epoch, exhausted_producer_epoch);
  markers.answer_all();
  writer.complete_all();
  // Epoch 32766 is exhausted: the next transaction's end hands out a new producer id at epoch 0.
  ASSERT_EQ(add("t1", r.producer, {topic_a0}), error_code::none);
  auto next = end("t1", r.producer, true, 2);
  ASSERT_EQ(next.error, error_code::none);
  EXPECT_NE(next.producer.producer_id, p.producer_id);
  EXPECT_EQ(next.producer.producer_epoch, 0);
  markers.answer_all();
  writer.complete_all();
  EXPECT_EQ(coordinator->describe("t1").producer_id, next.producer.producer_id);
  // A retry of that end with the old id and the exhausted epoch: recognised.
  auto retry = end("t1", r.producer, true, 2);
  EXPECT_EQ(retry.error, error_code::none);
  EXPECT_EQ(retry.producer.producer_id, next.producer.producer_id);
}

TEST_F(transaction_coordinator_test, init_producer_id_fences_an_open_transaction) {
  auto p = init("t1").producer;
  ASSERT_EQ(add("t1", p, {topic_a0}), error_code::none);
  // A second producer with the same id: the open transaction is aborted under a higher epoch.
  auto second = init("t1");
  EXPECT_EQ(second.error, error_code::concurrent_transactions);
  ASSERT_EQ(markers.sent.size(), 1u);
  EXPECT_FALSE(markers.sent[0].commit);
  EXPECT_EQ(markers.sent[0].producer_epoch, p.producer_epoch + 1);
  markers.answer_all();
  writer.complete_all();
  EXPECT_EQ(state("t1"), transaction_state::complete_abort);
  second = init("t1");
  ASSERT_EQ(second.error, error_code::none);
  EXPECT_EQ(second.producer.producer_epoch, p.producer_epoch + 2);
  // The zombie is fenced everywhere.
  EXPECT_EQ(add("t1", p, {topic_a0}), error_code::producer_fenced);
  EXPECT_EQ(end("t1", p, true, 0).error, error_code::producer_fenced);
  EXPECT_EQ(end("t1", p, true, 2).error, error_code::producer_fenced);
  EXPECT_EQ(init("t1", p).error, error_code::producer_fenced);
}

TEST_F(transaction_coordinator_test, fencing_under_v1_bumps_once_for_the_abort) {
  coordinator->set_transaction_version(1);
  auto p = init("t1").producer;
  ASSERT_EQ(add("t1", p, {topic_a0}), error_code::none);
  EXPECT_EQ(init("t1").error, error_code::concurrent_transactions);
  ASSERT_EQ(markers.sent.size(), 1u);
  EXPECT_EQ(markers.sent[0].producer_epoch, p.producer_epoch + 1);
  EXPECT_EQ(markers.sent[0].transaction_version, 1);
  EXPECT_EQ(writer.last_state("t1")->producer_epoch, p.producer_epoch + 1);
}

TEST_F(transaction_coordinator_test, a_timed_out_transaction_is_aborted_and_its_producer_fenced) {
  auto p = init("t1", std::nullopt, 1000).producer;
  ASSERT_EQ(add("t1", p, {topic_a0}), error_code::none);
  now += 500;
  coordinator->abort_timed_out_transactions();
  EXPECT_EQ(state("t1"), transaction_state::ongoing);
  now += 600;
  coordinator->abort_timed_out_transactions();
  writer.complete_all();
  ASSERT_EQ(markers.sent.size(), 1u);
  EXPECT_FALSE(markers.sent[0].commit);
  EXPECT_GT(markers.sent[0].producer_epoch, p.producer_epoch);
  markers.answer_all();
  writer.complete_all();
  EXPECT_EQ(state("t1"), transaction_state::complete_abort);
  EXPECT_EQ(end("t1", p, true, 0).error, error_code::producer_fenced);
}

TEST_F(transaction_coordinator_test, the_periodic_timer_aborts_timed_out_transactions) {
  auto p = init("t1", std::nullopt, 1000).producer;
  ASSERT_EQ(add("t1", p, {topic_a0}), error_code::none);
  now += coordinator->config().abort_timed_out_interval_ms + 1;
  coordinator->run_expired_timers();
  writer.complete_all();
  EXPECT_EQ(markers.sent.size(), 1u);
  ASSERT_TRUE(coordinator->next_deadline());
  EXPECT_GT(*coordinator->next_deadline(), now);
}

TEST_F(transaction_coordinator_test, idle_ids_expire_with_a_tombstone) {
  auto p = init("t1").producer;
  ASSERT_EQ(add("t1", p, {topic_a0}), error_code::none);
  init("t2");
  now += coordinator->config().id_expiration_ms + 1;
  coordinator->remove_expired_transactional_ids();
  writer.complete_all();
  // t1 has an open transaction: kept. t2 is gone.
  EXPECT_EQ(coordinator->describe("t1").error, error_code::none);
  EXPECT_EQ(coordinator->describe("t2").error, error_code::transactional_id_not_found);
  ASSERT_FALSE(writer.committed.empty());
  EXPECT_FALSE(writer.committed.back().second.value.has_value());
}

TEST_F(transaction_coordinator_test, wrong_producer_ids_and_states_get_kafkas_errors) {
  EXPECT_EQ(init("").error, error_code::invalid_request);
  EXPECT_EQ(init("t1", std::nullopt, 0).error, error_code::invalid_transaction_timeout);
  EXPECT_EQ(init("t1", std::nullopt, 900'001).error, error_code::invalid_transaction_timeout);
  EXPECT_EQ(end("nobody", {1, 0}, true, 0).error, error_code::invalid_producer_id_mapping);
  auto p = init("t1").producer;
  EXPECT_EQ(add("t1", {p.producer_id + 1, 0}, {topic_a0}), error_code::invalid_producer_id_mapping);
  EXPECT_EQ(end("t1", p, true, 0).error, error_code::invalid_txn_state);  // nothing open
  EXPECT_EQ(end("t1", p, true, 2).error, error_code::invalid_txn_state);
}

TEST_F(transaction_coordinator_test, requests_for_partitions_not_led_or_loading_are_refused) {
  coordinator->unload(0);
  EXPECT_EQ(init("t1").error, error_code::not_coordinator);
  coordinator->begin_loading(0, 6);
  EXPECT_EQ(init("t1").error, error_code::coordinator_load_in_progress);
  EXPECT_EQ(coordinator->describe("t1").error, error_code::coordinator_load_in_progress);
  EXPECT_EQ(coordinator->list({}).error, error_code::coordinator_load_in_progress);
}

TEST_F(transaction_coordinator_test, a_write_finishing_after_a_reload_answers_not_coordinator) {
  auto p = init("t1").producer;
  std::optional<error_code> out;
  coordinator->add_partitions("t1", p.producer_id, p.producer_epoch, {topic_a0}, 0,
                              [&out](error_code e) { out = e; });
  // Leadership moved and came back under a new epoch before the append completed.
  coordinator->begin_loading(0, 9);
  coordinator->complete_loading(0);
  writer.complete_all();
  EXPECT_EQ(out, error_code::not_coordinator);
}

TEST_F(transaction_coordinator_test, a_new_coordinator_finishes_a_prepared_transaction_from_the_log) {
  auto p = init("t1").producer;
  ASSERT_EQ(add("t1", p, {topic_a0, topic_b0}), error_code::none);
  ASSERT_EQ(end("t1", p, true, 2).error, error_code::none);
  // The coordinator dies before the markers were answered: another node loads the log.
  test_log_writer writer2;
  test_marker_sender markers2;
  transaction_coordinator_config config;
  config.state_log_partitions = 1;
  transaction_coordinator second(config, writer2, markers2, next_id_source(), clock());
  second.begin_loading(0, 6);
  for (const auto& [part, r] : writer.committed) {
    std::optional<std::span<const uint8_t>> v;
    if (r.value) v = std::span<const uint8_t>(*r.value);
    ASSERT_TRUE(second.replay(0, r.key, v).ok());
  }
  EXPECT_EQ(second.describe("t1").error, error_code::coordinator_load_in_progress);
  second.complete_loading(0);
  ASSERT_EQ(markers2.sent.size(), 1u);
  EXPECT_TRUE(markers2.sent[0].commit);
  EXPECT_EQ(markers2.sent[0].producer_epoch, p.producer_epoch + 1);
  EXPECT_EQ(markers2.sent[0].coordinator_epoch, 6);
  EXPECT_EQ(markers2.sent[0].partitions.size(), 2u);
  markers2.answer_all();
  writer2.complete_all();
  EXPECT_EQ(second.describe("t1").state, transaction_state::complete_commit);
  // The old coordinator's late marker answers change nothing there (it lost the partition).
  coordinator->unload(0);
  markers.answer_all();
  EXPECT_TRUE(writer.pending.empty());
}

TEST_F(transaction_coordinator_test, list_and_describe_filter_as_kafka) {
  auto p1 = init("alpha-1").producer;
  auto p2 = init("beta-2").producer;
  ASSERT_EQ(add("alpha-1", p1, {topic_a0}), error_code::none);
  now += 5000;
  auto all = coordinator->list({});
  EXPECT_EQ(all.transactions.size(), 2u);
  list_transactions_filter f;
  f.states = {"Ongoing", "Bogus"};
  auto ongoing = coordinator->list(f);
  ASSERT_EQ(ongoing.transactions.size(), 1u);
  EXPECT_EQ(ongoing.transactions[0].transactional_id, "alpha-1");
  EXPECT_EQ(ongoing.unknown_state_filters, std::vector<std::string>{"Bogus"});
  f = {};
  f.producer_ids = {p2.producer_id};
  ASSERT_EQ(coordinator->list(f).transactions.size(), 1u);
  f = {};
  f.duration_ms = 4000;
  ASSERT_EQ(coordinator->list(f).transactions.size(), 1u);
  f.duration_ms = 6000;
  EXPECT_TRUE(coordinator->list(f).transactions.empty());
  f = {};
  f.id_pattern = "beta-.*";
  ASSERT_EQ(coordinator->list(f).transactions.size(), 1u);
  f.id_pattern = "beta";
  EXPECT_TRUE(coordinator->list(f).transactions.empty());
  auto d = coordinator->describe("alpha-1");
  EXPECT_EQ(transaction_state_name(d.state), "Ongoing");
  EXPECT_EQ(d.start_timestamp_ms, start_ms);
  EXPECT_EQ(d.producer_id, p1.producer_id);
}

TEST_F(transaction_coordinator_test, verification_answers_per_partition) {
  auto p = init("t1").producer;
  ASSERT_EQ(add("t1", p, {topic_a0}), error_code::none);
  auto v = coordinator->verify_partitions("t1", p.producer_id, p.producer_epoch, {topic_a0, topic_b0});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].second, error_code::none);
  EXPECT_EQ(v[1].second, error_code::transaction_abortable);
  EXPECT_EQ(coordinator->verify_partitions("t1", p.producer_id, 7, {topic_a0})[0].second,
            error_code::producer_fenced);
}

TEST(transaction_records_test, values_round_trip_at_both_versions) {
  transaction_transition t;
  t.producer_id = 42;
  t.prev_producer_id = 41;
  t.producer_epoch = 3;
  t.timeout_ms = 60000;
  t.state = transaction_state::prepare_commit;
  t.partitions = {{"a", 0}, {"a", 2}, {"b", 1}};
  t.start_timestamp_ms = 10;
  t.last_update_timestamp_ms = 20;
  t.client_transaction_version = 2;
  for (int16_t version : {0, 1}) {
    auto r = transaction_log_record("tx", t, version);
    // Key: int16 type 0, int16 length, "tx".
    EXPECT_EQ(r.key, (std::vector<uint8_t>{0, 0, 0, 2, 't', 'x'}));
    auto back = decode_transaction_log_record(r.key, std::span<const uint8_t>(*r.value));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->transactional_id, "tx");
    ASSERT_TRUE(back->value);
    EXPECT_EQ(back->value->producer_id, 42);
    EXPECT_EQ(back->value->partitions, t.partitions);
    EXPECT_EQ(back->value->state, transaction_state::prepare_commit);
    EXPECT_EQ(back->value->client_transaction_version, version == 1 ? 2 : 0);
    EXPECT_EQ(back->value->prev_producer_id, version == 1 ? 41 : -1);
  }
  // Empty writes null partitions.
  t.state = transaction_state::empty;
  auto r = transaction_log_record("tx", t, 0);
  auto back = decode_transaction_log_record(r.key, std::span<const uint8_t>(*r.value));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->value->partitions.empty());
  // A tombstone; an unknown key type; a truncated value.
  auto tomb = transaction_log_tombstone("tx");
  auto dead = decode_transaction_log_record(tomb.key, std::nullopt);
  ASSERT_TRUE(dead.ok());
  EXPECT_FALSE(dead->value);
  std::vector<uint8_t> other_key{0, 1, 0, 2, 't', 'x'};
  EXPECT_EQ(decode_transaction_log_record(other_key, std::nullopt).error().code,
            error_code::unsupported_version);
  std::vector<uint8_t> cut(r.value->begin(), r.value->begin() + 5);
  EXPECT_EQ(decode_transaction_log_record(r.key, std::span<const uint8_t>(cut)).error().code,
            error_code::corrupt_message);
}

}  // namespace
}  // namespace mala::coordinator
