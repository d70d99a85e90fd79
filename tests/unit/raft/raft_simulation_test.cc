// Thousands of seeded schedules of a 3- or 5-voter quorum plus an observer under a hostile simulated network
// (drops, delays, duplicates, reordering, split brain, an isolated leader or follower), crashes and restarts,
// graceful resignations and client appends, with every invariant of raft_sim.h checked after every step.
// Each schedule ends by healing everything; then a leader must be elected and a new append committed on every
// node (observer included) within a bounded simulated time (liveness).
//
// The count and the first seed are printed; MALA_RAFT_SIM_SCHEDULES and MALA_RAFT_SIM_SEED override them (a
// failure prints the seed of its schedule, which MALA_RAFT_SIM_SEED=<seed> MALA_RAFT_SIM_SCHEDULES=1
// replays).
#include <gtest/gtest.h>

#include <unistd.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "raft_sim.h"

namespace mala::raft::sim {
namespace {

// Simulated time from healing to a commit seen by every node; generous against the worst case of timeouts
// (fetch timeout 2 s, check quorum 3 s, election timeout up to 2 s, backoff up to 1 s, split votes).
constexpr int64_t liveness_bound_ms = 15000;
constexpr int64_t chaos_ms = 12000;

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::strtoull(value, nullptr, 10) : fallback;
}

// A replica invariant abort kills the process: say which schedule it was.
char abort_note[128];
void on_abort(int) {
  const ssize_t ignored = write(STDERR_FILENO, abort_note, std::strlen(abort_note));
  (void)ignored;
}

struct schedule_result {
  std::string failure;
  int64_t time_to_commit_ms = 0;
  sim_stats stats;
};

network_faults random_faults(sim_random& r) {
  network_faults f;
  f.drop = r.pick(std::vector<double>{0, 0, 0.01, 0.05, 0.2, 0.4});
  f.duplicate = r.pick(std::vector<double>{0, 0.02, 0.1, 0.3});
  f.min_delay_ms = 1;
  // Up to beyond every timeout: late answers to requests long given up on.
  f.max_delay_ms = r.pick(std::vector<int64_t>{2, 10, 50, 200, 600, 3000});
  return f;
}

std::optional<int32_t> current_leader(cluster& c) {
  for (auto& n : c.nodes()) {
    if (n->up && n->raft->current_role() == role::leader) return n->id;
  }
  return std::nullopt;
}

schedule_result run_schedule(uint64_t seed, int voters) {
  sim_random r(seed ^ 0x51ed5eedULL);
  cluster_options options;
  options.voters = voters;
  options.observers = 1;
  options.seed = seed;
  // Half the schedules: the observer finds the quorum through bootstrap servers only (KIP-853).
  options.observers_use_bootstrap = seed % 2 == 0;
  options.faults = random_faults(r);
  // Small fetch responses keep followers behind the leader's high watermark and stretch replication over many
  // round trips, which is where commit-rule and divergence bugs show.
  options.base.fetch_max_entries = static_cast<int32_t>(r.pick(std::vector<int64_t>{1, 2, 5, 512}));
  // Small chunks make a snapshot download many FetchSnapshot round trips (resumed across timeouts).
  options.base.fetch_snapshot_max_bytes =
      static_cast<int32_t>(r.pick(std::vector<int64_t>{7, 64, 1024, 1024 * 1024}));
  // How often nodes snapshot their committed prefix and drop the entries before it (KIP-630); some schedules
  // never do, so the log-only paths keep their coverage.
  const double snapshot_chance = r.pick(std::vector<double>{0, 0.05, 0.2, 0.5});
  cluster c(options);
  const int32_t node_count = voters + 1;
  // From a storm of faults every few ms to a calm cluster with an event now and then.
  const int64_t max_gap_ms = r.pick(std::vector<int64_t>{20, 100, 300, 1000});

  while (c.failure.empty() && c.now() < chaos_ms) {
    c.run_for(r.uniform(1, max_gap_ms));
    const int64_t action = r.uniform(0, 99);
    if (action < 35) {
      c.client_append(static_cast<int>(r.uniform(1, 3)));
    } else if (action < 42) {
      // split brain: a random split into two sides
      std::vector<std::vector<int32_t>> sides(2);
      for (int32_t id = 1; id <= node_count; ++id) sides[static_cast<size_t>(r.uniform(0, 1))].push_back(id);
      c.partition(sides);
    } else if (action < 49) {
      if (auto leader = current_leader(c)) c.isolate(*leader);
    } else if (action < 54) {
      c.isolate(static_cast<int32_t>(r.uniform(1, node_count)));
    } else if (action < 64) {
      c.heal();
    } else if (action < 70) {
      c.crash(static_cast<int32_t>(r.uniform(1, node_count)));
    } else if (action < 78) {
      c.restart(static_cast<int32_t>(r.uniform(1, node_count)));
    } else if (action < 88) {
      // bounce: a crash and an immediate restart, losing everything not persisted (votes in flight, the
      // leader's follower state, the high watermark)
      const auto id = static_cast<int32_t>(r.uniform(1, node_count));
      c.crash(id);
      c.restart(id);
    } else if (action < 94) {
      c.resign_leader();
    } else {
      c.faults() = random_faults(r);
    }
    if (r.chance(snapshot_chance)) {
      c.take_snapshot(static_cast<int32_t>(r.uniform(1, node_count)), r.chance(0.7));
    }
  }

  // Heal everything: every node up, a clean network (still delayed and reordered).
  c.heal();
  for (int32_t id = 1; id <= node_count; ++id) c.restart(id);
  c.faults() = network_faults{0, 0, 1, 20};
  const int64_t healed_at = c.now();
  std::optional<append_info> pending;
  int32_t pending_leader = -1;
  while (c.failure.empty()) {
    if (c.now() - healed_at > liveness_bound_ms) {
      return {fmt::format("liveness: no append committed on every node within {} ms of healing (leader {})",
                          liveness_bound_ms, c.stable_leader() ? *c.stable_leader() : -1),
              0, c.stats()};
    }
    c.run_for(10);
    const auto leader = c.stable_leader();
    if (!leader) continue;
    replica& raft = *c.node(*leader).raft;
    if (!pending || pending_leader != *leader || pending->epoch != raft.epoch()) {
      pending = c.client_append(1);
      pending_leader = *leader;
      continue;
    }
    bool everywhere = true;
    for (auto& n : c.nodes()) everywhere = everywhere && n->committed > pending->last_offset;
    if (everywhere) break;
  }
  return {c.failure, c.now() - healed_at, c.stats()};
}

void run_many(int voters, uint64_t default_schedules) {
  const uint64_t schedules = env_or("MALA_RAFT_SIM_SCHEDULES", default_schedules);
  const uint64_t first_seed = env_or("MALA_RAFT_SIM_SEED", 1000000 * static_cast<uint64_t>(voters) + 1);
  auto previous = std::signal(SIGABRT, on_abort);
  int64_t worst_liveness = 0;
  sim_stats total;
  uint64_t run = 0;
  for (uint64_t i = 0; i < schedules; ++i, ++run) {
    const uint64_t seed = first_seed + i;
    std::snprintf(abort_note, sizeof(abort_note),
                  "\nraft simulation aborted in schedule seed=%llu voters=%d\n",
                  static_cast<unsigned long long>(seed), voters);
    const schedule_result result = run_schedule(seed, voters);
    if (!result.failure.empty()) {
      ADD_FAILURE() << "schedule seed=" << seed << " (" << voters << " voters): " << result.failure
                    << "\n  replay: MALA_RAFT_SIM_SEED=" << seed << " MALA_RAFT_SIM_SCHEDULES=1";
      ++run;
      break;
    }
    worst_liveness = std::max(worst_liveness, result.time_to_commit_ms);
    total.steps += result.stats.steps;
    total.messages_sent += result.stats.messages_sent;
    total.commits += result.stats.commits;
    total.truncations += result.stats.truncations;
    total.snapshots_written += result.stats.snapshots_written;
    total.snapshots_installed += result.stats.snapshots_installed;
    total.max_epoch = std::max(total.max_epoch, result.stats.max_epoch);
  }
  std::signal(SIGABRT, previous);
  std::printf(
      "raft simulation: %llu schedules of %d voters + 1 observer (found through bootstrap servers in even "
      "seeds), seeds %llu..%llu, %lld simulated ms each + "
      "healing; %lld steps, %lld messages, %lld committed entries, %lld truncations, %lld snapshots written, "
      "%lld installed from a leader, highest epoch %d; "
      "slowest "
      "commit after healing %lld ms (bound %lld)\n",
      static_cast<unsigned long long>(run), voters, static_cast<unsigned long long>(first_seed),
      static_cast<unsigned long long>(first_seed + run - 1), static_cast<long long>(chaos_ms),
      static_cast<long long>(total.steps), static_cast<long long>(total.messages_sent),
      static_cast<long long>(total.commits), static_cast<long long>(total.truncations),
      static_cast<long long>(total.snapshots_written), static_cast<long long>(total.snapshots_installed),
      total.max_epoch, static_cast<long long>(worst_liveness), static_cast<long long>(liveness_bound_ms));
}

TEST(raft_simulation, three_voters_and_an_observer) {
  run_many(3, 10000);
}

TEST(raft_simulation, five_voters_and_an_observer) {
  run_many(5, 10000);
}

}  // namespace
}  // namespace mala::raft::sim
