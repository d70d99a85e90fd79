// A deterministic simulation of a Raft quorum: raft::replica instances over a simulated clock and a simulated
// network (drop, delay, duplication, reordering, partitions), with crashes and restarts, driven by one seed.
// Every effect a replica returns is applied the way the real glue must apply it: the quorum state and the log
// operations go to a per-node "disk" that survives a crash (the replica's own in-memory log is rebuilt from
// it on restart), then the messages go on the network.
//
// After every step (one tick or one delivered message) the harness checks:
//   election safety      at most one leader per epoch, and every node that names a leader for an epoch (its
//                        persisted quorum state) names the same one;
//   vote safety          a node's persisted epoch never goes backwards, and its vote in an epoch never
//                        changes;
//   leader append-only   a leader never truncates its log;
//   log matching         two logs holding an entry with the same offset and epoch hold the same entries up to
//                        it (a hash of each log prefix, checked per appended entry);
//   durability           the in-memory log always equals the log rebuilt from the effects (nothing is written
//                        that the glue would not have made durable); a granted vote is persisted and a fetch
//                        position is on disk before the message announcing it is sent;
//   commit safety        a node's committed prefix (below its high watermark) equals the cluster's committed
//                        log: a committed entry is never changed; the last committed entry is on the disk of
//                        a majority of voters (so it is never lost); a leader of epoch E holds every entry
//                        that was committed in epoch E or before (leader completeness);
//   whole writes         a node's log and its high watermark end at a write boundary (the last entry of a
//                        leader append, log_entry::batch_end): a write is committed whole or not at all;
//   monotonic commit     a node's high watermark never goes backwards (within one incarnation: it is not
//                        persisted, as in Kafka) and never passes its log end;
//   snapshots            (KIP-630) take_snapshot() snapshots a node's committed prefix (the payload: every
//                        entry's offset, epoch, type and payload, concatenated) and may drop the entries
//                        before it; a snapshot written or installed equals the cluster's committed prefix it
//                        claims, byte for byte; an entry below a log's start counts as held (the snapshot
//                        holds it) for durability and leader completeness.
// A violation is recorded in `failure` (the first one) and stops the run.
//
// Not thread-safe; one cluster per test.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "mala/raft/log.h"
#include "mala/raft/replica.h"

namespace mala::raft::sim {

class sim_random {
 public:
  explicit sim_random(uint64_t seed) : _state(seed) {}
  uint64_t next() {
    uint64_t z = (_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // [lo, hi]
  int64_t uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return p > 0 && static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(uniform(0, static_cast<int64_t>(v.size()) - 1))];
  }

 private:
  uint64_t _state;
};

struct network_faults {
  double drop = 0;       // probability a message is lost
  double duplicate = 0;  // probability a message is delivered twice
  int64_t min_delay_ms = 1;
  int64_t max_delay_ms = 10;  // delays are uniform in [min, max]: messages overtake each other
};

struct cluster_options {
  int voters = 3;
  int observers = 1;
  uint64_t seed = 1;
  network_faults faults;
  raft_config base;  // timeouts; node_id, voters and random_seed are filled in per node
  // KIP-853: observers know no voters, only one bootstrap server per voter (bootstrap_server_id(i) reaches
  // voter i + 1); the answers come back from the bootstrap id, as raft_node delivers them.
  bool observers_use_bootstrap = false;
};

struct sim_node {
  int32_t id = -1;
  bool voter = false;
  bool up = true;
  int incarnation = 0;
  memory_raft_log log;   // the page cache the replica reads and writes
  memory_raft_log disk;  // rebuilt from the effects only: what survives a crash
  std::vector<uint64_t> disk_prefix_hash;
  std::optional<quorum_state> disk_state;
  std::unique_ptr<replica> raft;
  int64_t committed = 0;  // high watermark in this incarnation
};

struct sim_stats {
  int64_t messages_sent = 0;
  int64_t messages_delivered = 0;
  int64_t steps = 0;
  int32_t max_epoch = 0;
  int64_t commits = 0;
  int64_t truncations = 0;
  int64_t snapshots_written = 0;
  int64_t snapshots_installed = 0;
};

class cluster {
 public:
  static constexpr int64_t never = INT64_MAX;

  explicit cluster(cluster_options options) : _options(std::move(options)), _random(_options.seed) {
    for (int i = 0; i < _options.voters; ++i) _voter_ids.push_back(i + 1);
    for (int i = 0; i < _options.voters + _options.observers; ++i) {
      auto n = std::make_unique<sim_node>();
      n->id = i + 1;
      n->voter = i < _options.voters;
      _nodes.push_back(std::move(n));
    }
    for (auto& n : _nodes) start(*n);
  }

  // --- time ---
  int64_t now() const { return _now; }

  void run_until(int64_t end_ms) {
    int64_t steps_at_this_time = 0;
    while (failure.empty()) {
      int64_t next = _queue.empty() ? never : _queue.top().deliver_at;
      for (auto& n : _nodes) {
        if (n->up) next = std::min(next, n->raft->next_deadline_ms());
      }
      if (next > end_ms) {
        _now = std::max(_now, end_ms);
        return;
      }
      if (next > _now) {
        _now = next;
        steps_at_this_time = 0;
      }
      if (++steps_at_this_time > 100000) {
        fail(fmt::format("no progress: more than 100000 steps at time {}", _now));
        return;
      }
      for (auto& n : _nodes) {
        if (failure.empty() && n->up && n->raft->next_deadline_ms() <= _now) {
          n->raft->tick(_now);
          after_step(*n);
        }
      }
      while (failure.empty() && !_queue.empty() && _queue.top().deliver_at <= _now) {
        in_flight m = _queue.top();
        _queue.pop();
        deliver(m);
      }
    }
  }
  void run_for(int64_t ms) { run_until(_now + ms); }

  // --- faults ---
  network_faults& faults() { return _options.faults; }
  // Nodes in different groups cannot exchange messages (in either direction); nodes in no group are alone.
  void partition(const std::vector<std::vector<int32_t>>& groups) {
    _group.assign(_nodes.size() + 1, -1);
    int next_alone = 1000;
    for (size_t g = 0; g < groups.size(); ++g) {
      for (int32_t id : groups[g]) _group[static_cast<size_t>(id)] = static_cast<int>(g);
    }
    for (size_t id = 1; id < _group.size(); ++id) {
      if (_group[id] < 0) _group[id] = next_alone++;
    }
  }
  void isolate(int32_t id) {
    std::vector<int32_t> rest;
    for (auto& n : _nodes) {
      if (n->id != id) rest.push_back(n->id);
    }
    partition({rest});
  }
  void heal() { _group.clear(); }
  bool linked(int32_t a, int32_t b) const {
    return _group.empty() || _group[static_cast<size_t>(a)] == _group[static_cast<size_t>(b)];
  }

  void crash(int32_t id) {
    sim_node& n = node(id);
    if (!n.up) return;
    n.up = false;
    n.raft.reset();  // everything not on disk is gone
  }
  void restart(int32_t id) {
    sim_node& n = node(id);
    if (n.up) return;
    n.up = true;
    start(n);
  }

  // --- client ---
  // Appends `count` records through the leader with the highest epoch, if any node is leader.
  std::optional<append_info> client_append(int count = 1) {
    sim_node* leader = nullptr;
    for (auto& n : _nodes) {
      if (n->up && n->raft->current_role() == role::leader &&
          (!leader || n->raft->epoch() > leader->raft->epoch())) {
        leader = n.get();
      }
    }
    if (!leader) return std::nullopt;
    std::vector<std::vector<uint8_t>> records;
    for (int i = 0; i < count; ++i) {
      const uint64_t value = ++_next_payload;
      std::vector<uint8_t> payload(sizeof(value));
      std::memcpy(payload.data(), &value, sizeof(value));
      records.push_back(std::move(payload));
    }
    leader->raft->tick(_now);
    after_step(*leader);
    auto appended = leader->raft->append(records);
    after_step(*leader);
    if (!appended.ok()) return std::nullopt;
    return appended.value();
  }
  void resign_leader() {
    for (auto& n : _nodes) {
      if (n->up && n->raft->current_role() == role::leader) {
        n->raft->tick(_now);
        after_step(*n);
        n->raft->resign();
        after_step(*n);
      }
    }
  }

  // --- snapshots ---
  // Node `id` snapshots its committed prefix (as its state machine would), then with `delete_entries` drops
  // the entries before it. Nothing happens when the node is down or has nothing new committed.
  void take_snapshot(int32_t id, bool delete_entries) {
    sim_node& n = node(id);
    if (!n.up || !failure.empty()) return;
    const int64_t offset = n.committed;
    const auto latest = n.log.latest_snapshot();
    const int64_t from = latest ? latest->offset : n.log.start_offset();
    if (offset > from && offset > n.log.start_offset()) {
      // The payload from what the node itself holds: its latest snapshot, then its committed entries.
      std::vector<uint8_t> payload;
      if (latest) payload = *n.log.read_snapshot(*latest);
      for (int64_t o = from; o < offset; ++o) append_encoding(payload, *n.log.entry_at(o));
      const offset_and_epoch snapshot{offset, n.log.entry_at(offset - 1)->epoch};
      if (!n.raft->create_snapshot(snapshot, payload)) {
        fail(fmt::format("node {} could not snapshot its committed prefix {}@{}", n.id, snapshot.offset,
                         snapshot.epoch));
        return;
      }
      check_snapshot(n, snapshot, payload, "wrote");
      n.disk.write_snapshot(snapshot, payload);
      ++_stats.snapshots_written;
    }
    if (delete_entries) {
      n.raft->delete_before_snapshot();
      if (const auto s = n.disk.latest_snapshot()) n.disk.delete_before(s->offset);
    }
    after_step(n);
  }

  // --- queries ---
  sim_node& node(int32_t id) { return *_nodes[static_cast<size_t>(id - 1)]; }
  const std::vector<std::unique_ptr<sim_node>>& nodes() const { return _nodes; }
  const std::vector<int32_t>& voter_ids() const { return _voter_ids; }
  const std::vector<log_entry>& committed_log() const { return _committed; }
  const sim_stats& stats() const { return _stats; }

  // A leader that every up voter follows in its epoch; nullopt if there is none.
  std::optional<int32_t> stable_leader() const {
    std::optional<int32_t> leader;
    for (auto& n : _nodes) {
      if (n->up && n->raft->current_role() == role::leader) {
        if (leader) return std::nullopt;
        leader = n->id;
      }
    }
    if (!leader) return std::nullopt;
    const int32_t epoch = _nodes[static_cast<size_t>(*leader - 1)]->raft->epoch();
    for (auto& n : _nodes) {
      if (!n->up || !n->voter || n->id == *leader) continue;
      if (n->raft->current_role() != role::follower || n->raft->leader_id() != *leader ||
          n->raft->epoch() != epoch) {
        return std::nullopt;
      }
    }
    return leader;
  }

  std::string failure;  // the first invariant violation, with context

 private:
  // (requester, correlation id) -> (the bootstrap id it was sent to, the voter that id reached).
  std::map<std::pair<int32_t, int64_t>, std::pair<int32_t, int32_t>> _bootstrap_requests;

  struct in_flight {
    int64_t deliver_at;
    uint64_t sequence;
    int32_t from;
    int32_t to;
    raft_message message;
  };
  struct later {
    bool operator()(const in_flight& a, const in_flight& b) const {
      return a.deliver_at != b.deliver_at ? a.deliver_at > b.deliver_at : a.sequence > b.sequence;
    }
  };

  void start(sim_node& n) {
    ++n.incarnation;
    n.log = n.disk;  // the page cache is rebuilt from what was made durable
    n.committed = 0;
    raft_config config = _options.base;
    config.node_id = n.id;
    config.voters = _voter_ids;
    if (!n.voter && _options.observers_use_bootstrap) {
      config.voters.clear();
      config.bootstrap_servers = _options.voters;
    }
    std::erase_if(_bootstrap_requests, [&](const auto& kv) { return kv.first.first == n.id; });
    config.random_seed = _options.seed * 1000003 + static_cast<uint64_t>(n.incarnation);
    n.raft = std::make_unique<replica>(config, n.log, n.disk_state, _now);
    after_step(n);
  }

  void deliver(const in_flight& m) {
    sim_node& n = node(m.to);
    if (!n.up || !linked(m.from, m.to)) return;
    ++_stats.messages_delivered;
    n.raft->tick(_now);
    after_step(n);
    if (!failure.empty()) return;
    // The answer to a request sent to a bootstrap server comes back from that server's id.
    int32_t from = m.from;
    if (auto it = _bootstrap_requests.find({m.to, m.message.correlation_id});
        it != _bootstrap_requests.end() && it->second.second == m.from && is_answer(m.message.body)) {
      from = it->second.first;
    }
    n.raft->on_message(from, m.message);
    after_step(n);
  }

  void send(int32_t from, const outbound_message& out) {
    ++_stats.messages_sent;
    int32_t to = out.destination;
    if (to <= bootstrap_server_id(0)) {
      const int32_t index = bootstrap_server_id(0) - to;
      if (!_options.observers_use_bootstrap || index >= _options.voters) {
        fail(fmt::format("node {} sent to unknown bootstrap server {}", from, to));
        return;
      }
      to = index + 1;
      _bootstrap_requests[{from, out.message.correlation_id}] = {out.destination, to};
    }
    if (to < 1 || to > static_cast<int32_t>(_nodes.size())) {
      fail(fmt::format("node {} sent to unknown node {}", from, out.destination));
      return;
    }
    if (!linked(from, to) || _random.chance(_options.faults.drop)) return;
    const int copies = _random.chance(_options.faults.duplicate) ? 2 : 1;
    for (int i = 0; i < copies; ++i) {
      const int64_t delay = _random.uniform(_options.faults.min_delay_ms, _options.faults.max_delay_ms);
      _queue.push(in_flight{_now + delay, _sequence++, from, to, out.message});
    }
  }

  static bool is_answer(const raft_message_body& body) {
    return std::holds_alternative<vote_response>(body) ||
           std::holds_alternative<begin_quorum_epoch_response>(body) ||
           std::holds_alternative<end_quorum_epoch_response>(body) ||
           std::holds_alternative<fetch_response>(body) ||
           std::holds_alternative<fetch_snapshot_response>(body);
  }

  void fail(std::string what) {
    if (failure.empty()) failure = fmt::format("t={} ms: {}", _now, what);
  }

  static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
  }
  static uint64_t entry_hash(uint64_t previous, const log_entry& e) {
    uint64_t h = mix(previous, static_cast<uint64_t>(e.offset));
    h = mix(h, static_cast<uint64_t>(e.epoch));
    h = mix(h, static_cast<uint64_t>(e.type));
    for (uint8_t b : e.payload) h = mix(h, b);
    return h;
  }

  // Apply one step's effects as the glue would, then check every invariant the step could have broken.
  static void append_encoding(std::vector<uint8_t>& out, const log_entry& e) {
    auto put = [&](uint64_t v, int bytes) {
      for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
    };
    put(static_cast<uint64_t>(e.offset), 8);
    put(static_cast<uint32_t>(e.epoch), 4);
    put(static_cast<uint8_t>(e.type), 1);
    put(e.payload.size(), 4);
    out.insert(out.end(), e.payload.begin(), e.payload.end());
  }

  // A snapshot must be exactly the encoding of the cluster's committed prefix before its offset.
  void check_snapshot(const sim_node& n, offset_and_epoch id, std::span<const uint8_t> payload,
                      std::string_view what) {
    if (id.offset <= 0 || id.offset > static_cast<int64_t>(_committed.size())) {
      fail(fmt::format("node {} {} snapshot {}@{} beyond the committed log ({} entries)", n.id, what,
                       id.offset, id.epoch, _committed.size()));
      return;
    }
    const size_t expected_size = _committed_encoding_end[static_cast<size_t>(id.offset)];
    if (_committed[static_cast<size_t>(id.offset - 1)].epoch != id.epoch || payload.size() != expected_size ||
        !std::equal(payload.begin(), payload.end(), _committed_encoding.begin())) {
      fail(fmt::format("snapshot: node {} {} snapshot {}@{} ({} bytes) that is not the committed prefix",
                       n.id, what, id.offset, id.epoch, payload.size()));
    }
  }

  void after_step(sim_node& n) {
    ++_stats.steps;
    effects e = n.raft->take_effects();
    // 0. a snapshot installed (durable as install_snapshot returned) replaced the log
    if (e.snapshot_installed) {
      const offset_and_epoch id = *e.snapshot_installed;
      const auto payload = n.log.read_snapshot(id);
      if (!payload || n.log.start_offset() != id.offset || n.log.end_offset() != id.offset ||
          n.log.last_fetched_epoch() != id.epoch) {
        fail(fmt::format("node {} reported snapshot {}@{} installed, its log does not show it", n.id,
                         id.offset, id.epoch));
        return;
      }
      check_snapshot(n, id, *payload, "installed");
      if (!failure.empty()) return;
      n.disk.install_snapshot(id, *payload);
      n.disk_prefix_hash.assign(_committed_hash.begin(), _committed_hash.begin() + id.offset);
      ++_stats.snapshots_installed;
    }
    // 1. the quorum state
    if (e.quorum_state_to_persist) {
      const quorum_state& s = *e.quorum_state_to_persist;
      if (n.disk_state) {
        if (s.leader_epoch < n.disk_state->leader_epoch) {
          fail(fmt::format("node {}: persisted epoch went back from {} to {}", n.id,
                           n.disk_state->leader_epoch, s.leader_epoch));
        }
        if (s.leader_epoch == n.disk_state->leader_epoch && n.disk_state->voted_id != no_voter &&
            s.voted_id != n.disk_state->voted_id) {
          fail(fmt::format("node {}: vote in epoch {} changed from {} to {}", n.id, s.leader_epoch,
                           n.disk_state->voted_id, s.voted_id));
        }
      }
      if (s.voted_id != no_voter && !n.voter) fail(fmt::format("observer {} voted", n.id));
      if (s.leader_id != no_leader) claim_leader(n, s.leader_epoch, s.leader_id);
      n.disk_state = s;
      _stats.max_epoch = std::max(_stats.max_epoch, s.leader_epoch);
    }
    // 2. the log
    for (const log_operation& op : e.log_operations) {
      if (const auto* t = std::get_if<log_truncation>(&op)) {
        ++_stats.truncations;
        if (n.raft->current_role() == role::leader) fail(fmt::format("leader {} truncated its log", n.id));
        if (t->offset < n.committed) {
          fail(fmt::format("node {} truncated to {} below its high watermark {}", n.id, t->offset,
                           n.committed));
        }
        n.disk.truncate_to(t->offset);
        n.disk_prefix_hash.resize(static_cast<size_t>(n.disk.end_offset()));
      } else {
        for (const log_entry& entry : std::get<log_append>(op).entries) {
          if (entry.offset != n.disk.end_offset()) {
            fail(
                fmt::format("node {} appended offset {} at end {}", n.id, entry.offset, n.disk.end_offset()));
            return;
          }
          n.disk.append(std::span<const log_entry>(&entry, 1));
          const uint64_t h = entry_hash(n.disk_prefix_hash.empty() ? 0 : n.disk_prefix_hash.back(), entry);
          n.disk_prefix_hash.push_back(h);
          const uint64_t key =
              (static_cast<uint64_t>(entry.offset) << 24) ^ static_cast<uint64_t>(entry.epoch);
          auto [it, inserted] = _prefix_by_entry.emplace(key, h);
          if (!inserted && it->second != h) {
            fail(fmt::format("log matching: node {} holds entry {}@epoch {} with a different prefix", n.id,
                             entry.offset, entry.epoch));
          }
        }
      }
    }
    if (const log_entry* last = n.disk.entry_at(n.disk.end_offset() - 1); last && !last->batch_end) {
      fail(fmt::format("node {}: log ends in the middle of a write at {}", n.id, n.disk.end_offset()));
    }
    if (n.disk.end_offset() != n.log.end_offset() || n.disk.start_offset() != n.log.start_offset() ||
        n.disk.last_fetched_epoch() != n.log.last_fetched_epoch()) {
      fail(fmt::format("node {}: log ({} entries) differs from the log built from effects ({} entries)", n.id,
                       n.log.end_offset(), n.disk.end_offset()));
    }
    // 2b. the flush reported (the leader counts its own log toward the high watermark only from here)
    if (!e.log_operations.empty()) {
      n.raft->on_log_flushed(n.disk.end_offset());
      effects flushed = n.raft->take_effects();
      if (flushed.quorum_state_to_persist || !flushed.log_operations.empty() || flushed.snapshot_installed) {
        fail(fmt::format("node {}: reporting a flush changed the quorum state or the log", n.id));
        return;
      }
      for (outbound_message& m : flushed.messages) e.messages.push_back(std::move(m));
      if (flushed.high_watermark) e.high_watermark = flushed.high_watermark;
    }
    // 3. the messages: whatever they announce must already be durable
    for (const outbound_message& m : e.messages) {
      check_durable_before_sent(n, m);
      send(n.id, m);
    }
    // 4. the commit
    if (e.high_watermark) commit(n, *e.high_watermark);
    if (n.raft->high_watermark() != n.committed) {
      fail(fmt::format("node {}: high watermark {} was not reported (last reported {})", n.id,
                       n.raft->high_watermark(), n.committed));
    }
    check_leader(n);
    check_committed_on_majority();
  }

  // A granted vote is on disk before the candidate hears of it; a fetch offset names a durable log position.
  void check_durable_before_sent(const sim_node& n, const outbound_message& m) {
    if (const auto* vote = std::get_if<vote_response>(&m.message.body)) {
      if (vote->vote_granted && !vote->pre_vote &&
          (!n.disk_state || n.disk_state->leader_epoch != vote->leader_epoch ||
           n.disk_state->voted_id != m.destination)) {
        fail(fmt::format("node {} granted its vote in epoch {} to {} before persisting it", n.id,
                         vote->leader_epoch, m.destination));
      }
    } else if (const auto* fetch = std::get_if<fetch_request>(&m.message.body)) {
      const log_entry* last = n.disk.entry_at(fetch->fetch_offset - 1);
      const int32_t durable_epoch = fetch->fetch_offset == n.disk.start_offset() ? n.disk.start_epoch()
                                    : last                                       ? last->epoch
                                                                                 : -1;
      if (durable_epoch != fetch->last_fetched_epoch) {
        fail(fmt::format("node {} fetches from {}@{} which is not its durable log", n.id, fetch->fetch_offset,
                         fetch->last_fetched_epoch));
      }
    }
  }

  void claim_leader(const sim_node& n, int32_t epoch, int32_t leader) {
    auto [it, inserted] = _leader_of_epoch.emplace(epoch, leader);
    if (!inserted && it->second != leader) {
      fail(fmt::format("election safety: node {} names {} leader of epoch {}, already led by {}", n.id,
                       leader, epoch, it->second));
    }
  }

  void commit(sim_node& n, int64_t high_watermark) {
    if (high_watermark <= n.committed) {
      fail(fmt::format("node {}: high watermark went from {} to {}", n.id, n.committed, high_watermark));
      return;
    }
    if (high_watermark > n.log.end_offset()) {
      fail(fmt::format("node {}: high watermark {} past its log end {}", n.id, high_watermark,
                       n.log.end_offset()));
      return;
    }
    if (const log_entry* last = n.log.entry_at(high_watermark - 1); last && !last->batch_end) {
      fail(fmt::format("node {}: high watermark {} splits a write", n.id, high_watermark));
      return;
    }
    for (int64_t o = std::max(n.committed, n.log.start_offset()); o < high_watermark; ++o) {
      const log_entry& entry = *n.log.entry_at(o);
      if (o < static_cast<int64_t>(_committed.size())) {
        if (!(_committed[static_cast<size_t>(o)] == entry)) {
          fail(fmt::format(
              "commit safety: node {} commits offset {} (epoch {}), already committed with epoch {}", n.id, o,
              entry.epoch, _committed[static_cast<size_t>(o)].epoch));
          return;
        }
      } else {
        _committed.push_back(entry);
        _committed_hash.push_back(entry_hash(_committed_hash.empty() ? 0 : _committed_hash.back(), entry));
        append_encoding(_committed_encoding, entry);
        _committed_encoding_end.push_back(_committed_encoding.size());
        ++_stats.commits;
      }
    }
    n.committed = high_watermark;
    int64_t& in_epoch = _committed_in_epoch[n.raft->epoch()];
    in_epoch = std::max(in_epoch, high_watermark);
  }

  static bool holds(const memory_raft_log& log, const log_entry& entry) {
    // Below the log start the snapshot the log starts at holds it (checked when written or installed).
    if (entry.offset < log.start_offset()) return true;
    const log_entry* held = log.entry_at(entry.offset);
    return held && *held == entry;
  }

  void check_leader(const sim_node& n) {
    if (!n.raft || n.raft->current_role() != role::leader) return;
    claim_leader(n, n.raft->epoch(), n.id);
    // Leader completeness: a leader holds every entry committed in its epoch or an earlier one (a stale
    // leader of an older epoch, cut off by a partition, may well lack what a newer leader committed).
    int64_t required = 0;
    for (auto it = _committed_in_epoch.begin();
         it != _committed_in_epoch.end() && it->first <= n.raft->epoch(); ++it) {
      required = std::max(required, it->second);
    }
    if (required > 0 && !holds(n.log, _committed[static_cast<size_t>(required - 1)])) {
      fail(fmt::format("leader completeness: leader {} of epoch {} lacks committed offset {}", n.id,
                       n.raft->epoch(), required - 1));
    }
  }

  void check_committed_on_majority() {
    if (_committed.empty()) return;
    int holding = 0;
    for (auto& n : _nodes) {
      if (n->voter && holds(n->disk, _committed.back())) ++holding;
    }
    if (holding < _options.voters / 2 + 1) {
      fail(fmt::format("durability: committed offset {} is on the disk of only {} voters",
                       _committed.back().offset, holding));
    }
  }

  cluster_options _options;
  sim_random _random;
  std::vector<int32_t> _voter_ids;
  std::vector<std::unique_ptr<sim_node>> _nodes;
  std::vector<int> _group;  // by node id; empty when the network is whole
  std::priority_queue<in_flight, std::vector<in_flight>, later> _queue;
  uint64_t _sequence = 0;
  int64_t _now = 0;
  uint64_t _next_payload = 0;
  std::vector<log_entry> _committed;
  std::vector<uint64_t> _committed_hash;           // log-matching prefix hash of each committed prefix
  std::vector<uint8_t> _committed_encoding;        // the snapshot payload of the whole committed log
  std::vector<size_t> _committed_encoding_end{0};  // by prefix length: its payload's size
  std::map<int32_t, int32_t> _leader_of_epoch;
  std::map<int32_t, int64_t> _committed_in_epoch;  // epoch -> committed prefix length seen by a node in it
  std::unordered_map<uint64_t, uint64_t> _prefix_by_entry;
  sim_stats _stats;
};

}  // namespace mala::raft::sim
