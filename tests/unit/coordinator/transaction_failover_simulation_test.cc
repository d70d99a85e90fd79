// A deterministic simulation of transaction coordinator failover. Two nodes take turns leading the one
// partition of __transaction_state; the replicated log is what the replicas agree on. Producers (some on
// transactions v1, some on v2) loop InitProducerId, AddPartitionsToTxn, EndTxn against whichever node leads,
// retrying as Kafka's clients do; their data batches and the markers land at four data partitions whose
// leaders check markers as Kafka's do (coordinator epoch, producer epoch). A seeded schedule interleaves log
// writes that complete or fail, marker sends that are answered, refused by a moved leader or written with the
// answer lost, clock ticks (timeouts, retries) and failovers whose in-flight writes either survive in the new
// leader's log or vanish.
//
// After a drain with no more faults, for every seed: no transaction hangs (every data batch is closed by a
// marker, every id is Empty or Complete*), every transaction was decided once and the same way at every
// partition it touched, a commit or abort a producer was told succeeded is the one its markers carry, and a
// coordinator replaying the log sees what the leader has.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "mala/coordinator/transaction_coordinator.h"
#include "mala/coordinator/transaction_records.h"

namespace mala::coordinator {
namespace {

constexpr int64_t start_ms = 1'700'000'000'000;
constexpr int32_t txn_timeout_ms = 4'000;
constexpr int data_partitions = 4;

bool retriable(error_code e) {
  return e == error_code::concurrent_transactions || e == error_code::not_coordinator ||
         e == error_code::coordinator_load_in_progress || e == error_code::coordinator_not_available;
}

class simulation;

// The leader's appends to __transaction_state: pending until the schedule completes them.
struct sim_log_writer : transaction_log_writer {
  struct pending_write {
    coordinator_record record;
    std::function<void(error_code)> done;
  };
  std::deque<pending_write> pending;

  void append(int32_t, coordinator_record record, int32_t, std::function<void(error_code)> done) override {
    pending.push_back({std::move(record), std::move(done)});
  }
};

struct sim_marker_sender : txn_marker_sender {
  struct pending_send {
    txn_marker_request request;
    std::function<void(std::vector<txn_marker_result>)> done;
  };
  std::deque<pending_send> pending;

  void send(txn_marker_request request, std::function<void(std::vector<txn_marker_result>)> done) override {
    pending.push_back({std::move(request), std::move(done)});
  }
};

// A data partition's leader: per producer, its epoch, the coordinator epoch of its last marker, and the
// transactions (the simulation's numbers) with data since its last marker.
struct data_partition_leader {
  struct producer_entry {
    int16_t epoch = -1;
    int32_t coordinator_epoch = -1;
    std::vector<int> open_transactions;
  };
  std::map<int64_t, producer_entry> producers;
};

struct transaction_record {
  std::set<int> partitions_written;
  std::map<int, std::vector<bool>> decisions;  // per partition: the markers that closed it (commit?)
  std::optional<bool> told;                    // the EndTxn outcome the producer was told succeeded
};

struct sim_producer {
  enum class phase { need_init, ready, adding, in_transaction, ending, done };
  std::string id;
  int16_t transaction_version = 0;
  phase at = phase::need_init;
  bool busy = false;
  producer_id_and_epoch producer;
  int transaction = -1;
  std::set<txn_partition> adding;
  bool commit = false;
};

class simulation {
 public:
  simulation(uint64_t seed, int16_t server_transaction_version) : _random(seed) {
    transaction_coordinator_config config;
    config.state_log_partitions = 1;
    config.offsets_topic_partitions = 1;
    config.abort_timed_out_interval_ms = 1'000;
    for (int n = 0; n < 2; ++n) {
      _nodes.push_back(std::make_unique<node>());
      auto& nd = *_nodes.back();
      nd.coordinator = std::make_unique<transaction_coordinator>(
          config, nd.writer, nd.markers, [this]() -> result<int64_t> { return _next_producer_id++; },
          [this] { return _now; });
      nd.coordinator->set_transaction_version(server_transaction_version);
    }
    for (int i = 0; i < 4; ++i) {
      sim_producer p;
      p.id = "txn-" + std::to_string(i);
      p.transaction_version = i % 2 == 0 ? 0 : 2;
      _producers.push_back(p);
    }
    elect(0);
  }

  void run(int steps) {
    for (int i = 0; i < steps; ++i) step(true);
    _draining = true;
    const int64_t drain_until = _now + 3 * txn_timeout_ms;
    for (int i = 0; i < 100'000 && (_now < drain_until || !quiet()); ++i) step(false);
  }

  void check() {
    ASSERT_TRUE(quiet()) << "work left after the drain";
    auto& leader = *_nodes[_leader]->coordinator;
    for (const auto& p : _producers) {
      auto d = leader.describe(p.id);
      if (d.error == error_code::transactional_id_not_found) continue;
      ASSERT_EQ(d.error, error_code::none) << p.id;
      EXPECT_TRUE(d.state == transaction_state::empty || d.state == transaction_state::complete_commit ||
                  d.state == transaction_state::complete_abort)
          << p.id << " left in " << transaction_state_name(d.state);
    }
    for (int part = 0; part < data_partitions; ++part) {
      for (const auto& [pid, e] : _partitions[part].producers) {
        EXPECT_TRUE(e.open_transactions.empty()) << "producer " << pid << " hangs at partition " << part
                                                 << " (transaction " << e.open_transactions.front() << ")";
      }
    }
    int committed = 0, aborted = 0;
    for (size_t t = 0; t < _transactions.size(); ++t) {
      const auto& tr = _transactions[t];
      std::optional<bool> decision;
      for (int part : tr.partitions_written) {
        auto it = tr.decisions.find(part);
        ASSERT_TRUE(it != tr.decisions.end() && !it->second.empty())
            << "transaction " << t << " never closed at " << part;
        for (bool d : it->second) {
          if (!decision) decision = d;
          EXPECT_EQ(*decision, d) << "transaction " << t << " torn: committed and aborted";
        }
      }
      if (tr.told && decision) {
        EXPECT_EQ(*tr.told, *decision) << "transaction " << t << " told one outcome, marked the other";
      }
      if (decision) (*decision ? committed : aborted)++;
    }
    // Something happened: the schedule is not degenerate.
    EXPECT_GT(committed, 0);
    EXPECT_GT(aborted, 0);
    EXPECT_GT(_failovers, 0);

    // A coordinator that replays the whole log agrees with the leader.
    sim_log_writer writer;
    sim_marker_sender markers;
    transaction_coordinator_config config;
    config.state_log_partitions = 1;
    transaction_coordinator replayed(
        config, writer, markers, [] { return result<int64_t>(1); }, [this] { return _now; });
    replayed.begin_loading(0, _coordinator_epoch + 1);
    for (const auto& r : _log) {
      std::optional<std::span<const uint8_t>> v;
      if (r.value) v = std::span<const uint8_t>(*r.value);
      ASSERT_TRUE(replayed.replay(0, r.key, v).ok());
    }
    replayed.complete_loading(0);
    EXPECT_TRUE(markers.pending.empty()) << "the log holds an unfinished transaction";
    for (const auto& p : _producers) {
      auto a = leader.describe(p.id);
      auto b = replayed.describe(p.id);
      EXPECT_EQ(a.error, b.error);
      EXPECT_EQ(a.state, b.state) << p.id;
      EXPECT_EQ(a.producer_id, b.producer_id) << p.id;
      EXPECT_EQ(a.producer_epoch, b.producer_epoch) << p.id;
    }
    check_log_decisions();
  }

 private:
  struct node {
    sim_log_writer writer;
    sim_marker_sender markers;
    std::unique_ptr<transaction_coordinator> coordinator;
  };

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(_random); }
  bool chance(int percent) { return pick(100) < percent; }

  bool quiet() const {
    for (const auto& n : _nodes) {
      if (!n->writer.pending.empty() || !n->markers.pending.empty()) return false;
    }
    if (!_late_answers.empty()) return false;
    for (const auto& p : _producers) {
      if (p.busy || (p.at != sim_producer::phase::done && p.at != sim_producer::phase::need_init))
        return false;
    }
    return true;
  }

  void elect(int next) {
    if (_leader >= 0) {
      auto& old = *_nodes[_leader];
      old.coordinator->unload(0);
      // The writes in flight reached the new leader's log, or not; their answers come later either way.
      while (!old.writer.pending.empty()) {
        auto w = std::move(old.writer.pending.front());
        old.writer.pending.pop_front();
        const bool survived = chance(50);
        if (survived) _log.push_back(w.record);
        _late_answers.push_back([done = std::move(w.done), survived, this] {
          done(survived && chance(50) ? error_code::none : error_code::not_leader_or_follower);
        });
      }
      ++_failovers;
    }
    _leader = next;
    ++_coordinator_epoch;
    auto& c = *_nodes[_leader]->coordinator;
    c.begin_loading(0, _coordinator_epoch);
    for (const auto& r : _log) {
      std::optional<std::span<const uint8_t>> v;
      if (r.value) v = std::span<const uint8_t>(*r.value);
      ASSERT_TRUE(c.replay(0, r.key, v).ok());
    }
    c.complete_loading(0);
  }

  void step(bool faults) {
    switch (pick(10)) {
      case 0:
      case 1:
      case 2:
        producer_step(_producers[pick(static_cast<int>(_producers.size()))]);
        break;
      case 3:
      case 4:
        complete_write(faults);
        break;
      case 5:
      case 6:
        answer_markers(faults);
        break;
      case 7:
        if (!_late_answers.empty()) {
          auto answer = std::move(_late_answers.front());
          _late_answers.pop_front();
          answer();
        }
        break;
      case 8:
        _now += pick(faults ? 400 : 150);
        for (auto& n : _nodes) n->coordinator->run_expired_timers();
        break;
      case 9:
        if (faults && chance(8)) elect(pick(2));
        break;
    }
  }

  void complete_write(bool faults) {
    auto& w = _nodes[_leader]->writer;
    if (w.pending.empty()) return;
    auto write = std::move(w.pending.front());
    w.pending.pop_front();
    if (faults && chance(10)) {
      write.done(error_code::not_enough_replicas);  // not written: too few in sync
      return;
    }
    _log.push_back(write.record);
    write.done(error_code::none);
  }

  void answer_markers(bool faults) {
    auto& n = *_nodes[pick(2)];
    if (n.markers.pending.empty()) return;
    auto s = std::move(n.markers.pending.front());
    n.markers.pending.pop_front();
    std::vector<txn_marker_result> results;
    for (const auto& p : s.request.partitions) {
      if (faults && chance(15)) {
        results.push_back({p, error_code::not_leader_or_follower, false});
        continue;
      }
      const error_code written = write_marker(p.partition, s.request);
      // Written, but the answer is lost on the way back: the coordinator retries a marker already there.
      const bool answer_lost = faults && written == error_code::none && chance(10);
      results.push_back({p, answer_lost ? error_code::request_timed_out : written, false});
    }
    s.done(std::move(results));
  }

  // What a partition leader does with a marker: below the producer's epoch (under transactions v2, not above
  // it unless it repeats the last marker of a producer with nothing open, KAFKA-19999) is
  // INVALID_PRODUCER_EPOCH; a coordinator epoch below the last marker's is TRANSACTION_COORDINATOR_FENCED.
  error_code write_marker(int partition, const txn_marker_request& m) {
    auto& e = _partitions[partition].producers[m.producer_id];
    if (m.producer_epoch < e.epoch) return error_code::invalid_producer_epoch;
    if (m.transaction_version >= 2 && m.producer_epoch == e.epoch && !e.open_transactions.empty()) {
      return error_code::invalid_producer_epoch;
    }
    if (m.coordinator_epoch < e.coordinator_epoch) return error_code::transaction_coordinator_fenced;
    e.coordinator_epoch = m.coordinator_epoch;
    e.epoch = m.producer_epoch;
    for (int t : e.open_transactions) _transactions[t].decisions[partition].push_back(m.commit);
    e.open_transactions.clear();
    return error_code::none;
  }

  bool write_data(int partition, const sim_producer& p) {
    auto& e = _partitions[partition].producers[p.producer.producer_id];
    if (p.producer.producer_epoch < e.epoch) return false;  // fenced at the leader
    e.epoch = p.producer.producer_epoch;
    if (std::find(e.open_transactions.begin(), e.open_transactions.end(), p.transaction) ==
        e.open_transactions.end()) {
      e.open_transactions.push_back(p.transaction);
    }
    _transactions[p.transaction].partitions_written.insert(partition);
    return true;
  }

  void producer_step(sim_producer& p) {
    if (p.busy) return;
    auto& c = *_nodes[_leader]->coordinator;
    using phase = sim_producer::phase;
    switch (p.at) {
      case phase::done:
        return;
      case phase::need_init: {
        if (_draining) return;
        p.busy = true;
        c.init_producer_id(p.id, txn_timeout_ms, std::nullopt, [&p](init_producer_id_result r) {
          p.busy = false;
          if (r.error == error_code::none) {
            p.producer = r.producer;
            p.at = phase::ready;
          }
        });
        return;
      }
      case phase::ready: {
        if (_draining) {
          p.at = phase::done;
          return;
        }
        p.transaction = static_cast<int>(_transactions.size());
        _transactions.emplace_back();
        p.adding = random_partitions();
        p.at = phase::adding;
        return producer_step(p);
      }
      case phase::adding: {
        p.busy = true;
        c.add_partitions(p.id, p.producer.producer_id, p.producer.producer_epoch, p.adding,
                         p.transaction_version, [this, &p](error_code e) {
                           p.busy = false;
                           if (retriable(e)) return;
                           if (e != error_code::none) {
                             p.at = phase::need_init;
                             return;
                           }
                           for (const auto& part : p.adding) {
                             if (!write_data(part.partition, p)) {
                               p.at = phase::need_init;
                               return;
                             }
                           }
                           p.at = phase::in_transaction;
                         });
        return;
      }
      case phase::in_transaction: {
        if (!_draining && chance(25)) {
          p.adding = random_partitions();
          p.at = phase::adding;
          return;
        }
        p.commit = chance(60);
        p.at = phase::ending;
        return producer_step(p);
      }
      case phase::ending: {
        p.busy = true;
        c.end_transaction(p.id, p.producer.producer_id, p.producer.producer_epoch, p.commit,
                          p.transaction_version, [this, &p](end_txn_result r) {
                            p.busy = false;
                            if (retriable(r.error)) return;
                            if (r.error != error_code::none) {
                              p.at = phase::need_init;
                              return;
                            }
                            _transactions[p.transaction].told = p.commit;
                            if (p.transaction_version >= 2) p.producer = r.producer;
                            p.at = phase::ready;
                          });
        return;
      }
    }
  }

  std::set<txn_partition> random_partitions() {
    std::set<txn_partition> out;
    const int count = 1 + pick(3);
    while (static_cast<int>(out.size()) < count) out.insert({"data", pick(data_partitions)});
    return out;
  }

  // Once a transaction's Prepare* is in the log, the log never records the other decision for it.
  void check_log_decisions() {
    std::map<std::string, transaction_transition> last;
    for (const auto& r : _log) {
      std::optional<std::span<const uint8_t>> v;
      if (r.value) v = std::span<const uint8_t>(*r.value);
      auto e = decode_transaction_log_record(r.key, v);
      ASSERT_TRUE(e.ok());
      if (!e->value) continue;
      auto prev = last.find(e->transactional_id);
      if (prev != last.end()) {
        const auto before = prev->second.state;
        const auto now = e->value->state;
        if (before == transaction_state::prepare_commit) {
          EXPECT_TRUE(now == transaction_state::prepare_commit || now == transaction_state::complete_commit)
              << e->transactional_id << ": PrepareCommit followed by " << transaction_state_name(now);
        }
        if (before == transaction_state::prepare_abort) {
          EXPECT_TRUE(now == transaction_state::prepare_abort || now == transaction_state::complete_abort)
              << e->transactional_id << ": PrepareAbort followed by " << transaction_state_name(now);
        }
      }
      last[e->transactional_id] = *e->value;
    }
  }

  std::mt19937_64 _random;
  int64_t _now = start_ms;
  int64_t _next_producer_id = 5000;
  std::vector<std::unique_ptr<node>> _nodes;
  int _leader = -1;
  int32_t _coordinator_epoch = 0;
  int _failovers = 0;
  bool _draining = false;
  std::vector<coordinator_record> _log;
  std::deque<std::function<void()>> _late_answers;
  data_partition_leader _partitions[data_partitions];
  std::vector<transaction_record> _transactions;
  std::vector<sim_producer> _producers;
};

class transaction_failover_simulation : public ::testing::TestWithParam<std::tuple<uint64_t, int16_t>> {};

TEST_P(transaction_failover_simulation, no_transaction_is_torn_lost_or_left_hanging) {
  auto [seed, server_version] = GetParam();
  simulation sim(seed, server_version);
  sim.run(6'000);
  sim.check();
}

INSTANTIATE_TEST_SUITE_P(seeds, transaction_failover_simulation,
                         ::testing::Combine(::testing::Range<uint64_t>(1, 21),
                                            ::testing::Values<int16_t>(1, 2)));

}  // namespace
}  // namespace mala::coordinator
