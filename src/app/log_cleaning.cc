#include "log_cleaning.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <asio/post.hpp>

#include "mala/common/logging.h"
#include "mala/storage/checkpoint_file.h"
#include "mala/storage/log_cleaner.h"

namespace mala::app {

namespace {

using storage::topic_partition;

constexpr std::string_view cleaner_checkpoint_file = "cleaner-offset-checkpoint";
constexpr int cleaner_nice = 10;  // a tenth of a shard's CPU share when both want a core (CFS weights)

int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A log the cleaner may clean, as one shard saw it.
struct candidate {
  size_t shard = 0;
  storage::cleaning_snapshot snapshot;
};

}  // namespace

struct log_cleaning::impl {
  impl(net::shard_pool& pool, storage::log_manager& l, const node_config& config,
       std::vector<replication::replica_manager*> r)
      : shards(pool),
        logs(l),
        replicas(std::move(r)),
        enabled(config.get_bool("log.cleaner.enable").value_or(true)),
        threads(std::max(0, config.get_int("log.cleaner.threads").value_or(1))),
        backoff(std::chrono::milliseconds(config.get_long("log.cleaner.backoff.ms").value_or(15'000))),
        dedupe_bytes(std::max<int64_t>(config.get_long("log.cleaner.dedupe.buffer.size").value_or(128 << 20),
                                       1 << 20)),
        io_buffer_bytes(
            std::max<int64_t>(config.get_long("log.cleaner.io.buffer.size").value_or(512 << 10), 0)),
        load_factor(
            std::clamp(config.get_double("log.cleaner.io.buffer.load.factor").value_or(0.9), 0.1, 1.0)),
        max_bytes_per_second(config.get_double("log.cleaner.io.max.bytes.per.second").value_or(1e308)) {}

  net::shard_pool& shards;
  storage::log_manager& logs;
  std::vector<replication::replica_manager*> replicas;  // by shard
  bool enabled;
  int threads;
  std::chrono::milliseconds backoff;
  int64_t dedupe_bytes;
  int64_t io_buffer_bytes;  // all threads' read buffers together, as Kafka's
  double load_factor;
  double max_bytes_per_second;
  std::shared_ptr<spdlog::logger> log = subsystem_logger("cleaner");

  std::vector<std::thread> workers;
  std::atomic<bool> stopping{false};
  // False once stopped: work posted to a shard and run after that does nothing.
  std::shared_ptr<std::atomic<bool>> alive = std::make_shared<std::atomic<bool>>(true);
  std::mutex mutex;
  std::condition_variable wake;
  // Guarded by mutex:
  std::map<topic_partition, std::pair<std::string, int64_t>> checkpoints;  // tp -> (log dir, first dirty)
  std::set<topic_partition> in_progress;
  std::set<topic_partition> uncleanable;  // a corrupt batch stopped its clean
  // The throttle: bytes since the window started.
  std::chrono::steady_clock::time_point window_start = std::chrono::steady_clock::now();
  double window_bytes = 0;

  void load_checkpoints() {
    for (const auto& dir : logs.dirs()) {
      if (!dir.online) continue;
      auto read = storage::read_offset_checkpoint(dir.path / cleaner_checkpoint_file);
      if (!read) continue;  // none yet
      for (const auto& [tp, offset] : *read) checkpoints[tp] = {dir.path.string(), offset};
    }
  }

  // Writes the checkpoint file of one log dir (on the cleaner thread; mutex not held by the caller).
  void write_checkpoint(const std::string& dir) {
    storage::offset_checkpoint offsets;
    {
      std::lock_guard guard(mutex);
      for (const auto& [tp, entry] : checkpoints) {
        if (entry.first == dir && logs.get(tp) != nullptr) offsets[tp] = entry.second;
      }
    }
    if (auto st =
            storage::write_offset_checkpoint(std::filesystem::path(dir) / cleaner_checkpoint_file, offsets);
        !st.ok()) {
      log->error("cannot write {} in {}: {}", cleaner_checkpoint_file, dir, st.message);
    }
  }

  // Runs fn on `shard` and waits for its answer; nullopt when stopping.
  template <typename Fn>
  auto on_shard(size_t shard, Fn fn) -> std::optional<decltype(fn())> {
    using value = decltype(fn());
    auto promise = std::make_shared<std::promise<value>>();
    auto future = promise->get_future();
    asio::post(shards.context(shard), [promise, alive = alive, f = std::move(fn)]() mutable {
      if (*alive) promise->set_value(f());
    });
    while (future.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
      if (stopping) return std::nullopt;
    }
    return future.get();
  }

  // On a shard: the compacted logs it owns that are worth a clean.
  std::vector<candidate> candidates_on(size_t shard) {
    std::vector<candidate> out;
    auto* r = shard < replicas.size() ? replicas[shard] : nullptr;
    if (!r) return out;
    const int64_t now = wall_clock_ms();
    for (const auto& tp : r->partitions()) {
      auto* p = r->get(tp);
      if (!p || p->log().config().cleanup == storage::cleanup_policy::delete_segments) continue;
      std::optional<int64_t> checkpoint;
      {
        std::lock_guard guard(mutex);
        if (in_progress.contains(tp) || uncleanable.contains(tp)) continue;
        if (auto it = checkpoints.find(tp); it != checkpoints.end()) checkpoint = it->second.second;
      }
      std::vector<int64_t> producer_last_offsets;
      std::vector<storage::producer_marker_epoch> ending_with_marker;
      if (const auto* producers = p->producer_state()) {
        for (const auto& [id, entry] : producers->producers()) {
          if (entry.last_offset() >= 0) {
            producer_last_offsets.push_back(entry.last_offset());
          } else {
            ending_with_marker.push_back({id, entry.producer_epoch});
          }
        }
        std::sort(producer_last_offsets.begin(), producer_last_offsets.end());
        std::sort(ending_with_marker.begin(), ending_with_marker.end(),
                  [](const auto& a, const auto& b) { return a.producer_id < b.producer_id; });
      }
      // Nothing past the last stable offset (an open transaction's first offset) is cleaned.
      auto snapshot = p->log().snapshot_for_cleaning(checkpoint, p->last_stable_offset(), now,
                                                     std::move(producer_last_offsets));
      if (snapshot) {
        snapshot->producers_ending_with_marker = std::move(ending_with_marker);
        out.push_back({shard, std::move(*snapshot)});
      }
    }
    return out;
  }

  // Kafka's grabFilthiestCompactedLog: the highest dirty ratio (a max.compaction.lag.ms delay first).
  std::optional<candidate> choose() {
    std::optional<candidate> best;
    for (size_t shard = 0; shard < shards.size(); ++shard) {
      auto found = on_shard(shard, [this, shard] { return candidates_on(shard); });
      if (!found) return std::nullopt;
      for (auto& c : *found) {
        auto rank = [](const candidate& x) {
          return std::pair{x.snapshot.range.max_compaction_delay_ms > 0, x.snapshot.range.cleanable_ratio()};
        };
        if (!best || rank(c) > rank(*best)) best = std::move(c);
      }
    }
    if (best) {
      std::lock_guard guard(mutex);
      if (!in_progress.insert(best->snapshot.tp).second) return std::nullopt;
    }
    return best;
  }

  // Holds all threads together to log.cleaner.io.max.bytes.per.second (Kafka's Throttler): the bytes since
  // the window started may not run ahead of the rate; a thread that would sleeps (in steps, so that stop() is
  // not held up), and the window restarts once a thread catches up after a few idle seconds.
  void throttle(int64_t bytes) {
    if (max_bytes_per_second >= 1e300 || max_bytes_per_second <= 0) return;
    using seconds = std::chrono::duration<double>;
    seconds wait{0};
    {
      std::lock_guard guard(mutex);
      const auto now = std::chrono::steady_clock::now();
      seconds elapsed = now - window_start;
      if (elapsed.count() > 5.0 && window_bytes / max_bytes_per_second < elapsed.count()) {
        window_start = now;
        window_bytes = 0;
        elapsed = seconds{0};
      }
      window_bytes += static_cast<double>(bytes);
      wait = seconds(window_bytes / max_bytes_per_second) - elapsed;
    }
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::nanoseconds>(wait);
    while (!stopping && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(
          std::chrono::milliseconds(100), until - std::chrono::steady_clock::now()));
    }
  }

  void run(storage::key_offset_map& map) {
    storage::filter_buffers buffers;
    const storage::cleaning_controls controls{&stopping, [this](int64_t bytes) { throttle(bytes); },
                                              io_buffer_bytes / std::max(threads, 1)};
    while (!stopping) {
      auto chosen = choose();
      if (!chosen) {
        std::unique_lock lock(mutex);
        wake.wait_for(lock, backoff, [this] { return stopping.load(); });
        continue;
      }
      auto& snapshot = chosen->snapshot;
      const topic_partition tp = snapshot.tp;
      const auto started = std::chrono::steady_clock::now();
      log->info("{}-{}: cleaning round started: dirty offsets {}..{}, {} of {} bytes dirty", tp.topic,
                tp.partition, snapshot.range.first_dirty_offset, snapshot.range.first_uncleanable_offset - 1,
                snapshot.range.cleanable_bytes, snapshot.range.clean_bytes + snapshot.range.cleanable_bytes);
      auto cleaned = storage::clean_log(snapshot, wall_clock_ms(), map, buffers, controls);
      map.clear();
      if (!cleaned) {
        if (!stopping) {
          log->error("{}-{}: cleaning stopped: {}", tp.topic, tp.partition, cleaned.error().message);
        }
        std::unique_lock lock(mutex);
        in_progress.erase(tp);
        if (cleaned.error().code == error_code::corrupt_message ||
            cleaned.error().code == error_code::invalid_config) {
          uncleanable.insert(tp);
        } else {
          // An I/O error (a full disk): the log keeps its segments and is retried after the backoff, not in a
          // loop that would fail at once again.
          wake.wait_for(lock, backoff, [this] { return stopping.load(); });
        }
        continue;
      }
      // The swap, one group per task on the owning shard, as Kafka replaces each group's segments on its own.
      // The shard only changes the log in memory; the group's renames (4 for its new segment twice, 4 for
      // each segment it replaces), which take a fraction of a millisecond each on a file system busy with the
      // round's writes, run here, off the shard, before the next group. Between the tasks the log is
      // consistent: the groups swapped so far are in, the others are still .cleaned files the shard does not
      // know. If the log changed under a group, it and the groups after it are deleted here and the
      // checkpoint stays where it was (the groups already in are compacted correctly; the next round goes
      // over them again).
      auto swap = std::make_shared<storage::cleaned_log>(std::move(*cleaned));
      // The log the groups went into: a failed rename is its failure only (a KIP-113 swap may have given the
      // replica another log since).
      auto swapped_into = std::make_shared<const storage::partition_log*>(nullptr);
      std::optional<status> swapped = status::success();
      for (size_t g = 0; g < swap->groups.size(); ++g) {
        swapped =
            on_shard(chosen->shard, [this, tp, swap, g, swapped_into, shard = chosen->shard]() -> status {
              storage::cleaned_log one;
              one.groups.push_back(std::move(swap->groups[g]));
              auto* r = shard < replicas.size() ? replicas[shard] : nullptr;  // the shard this runs on
              auto* p = r ? r->get(tp) : nullptr;
              if (p) *swapped_into = &p->log();
              status st = p ? p->log().replace_with_cleaned(one)
                            : status::error(error_code::unknown_topic_or_partition, "the log is gone");
              // A refused group goes back, to be deleted off the shard with the later ones.
              if (!one.groups.empty()) swap->groups[g] = std::move(one.groups.front());
              for (auto& renames : one.swap_renames) swap->swap_renames.push_back(std::move(renames));
              return st;
            });
        if (!swapped) break;
        // The renames of what the shard swapped in (a log without a file worker did them itself).
        for (auto& renames : swap->swap_renames) {
          if (auto st = renames->finish(); !st.ok()) {
            log->error("{}-{}: the cleaned segments' renames failed: {}", tp.topic, tp.partition, st.message);
            on_shard(chosen->shard, [this, tp, st, swapped_into, shard = chosen->shard] {
              auto* r = shard < replicas.size() ? replicas[shard] : nullptr;
              auto* p = r ? r->get(tp) : nullptr;
              if (p && &p->log() == *swapped_into) p->log().mark_failed(st);
              return 0;
            });
            swapped = st;
          }
        }
        swap->swap_renames.clear();
        if (!swapped || !swapped->ok()) break;
      }
      if (!swapped) {
        // Stopping before the shard ran a group's swap (it may still run it: the groups are not touched
        // here): the .cleaned files left are rolled back at the next load.
        std::lock_guard guard(mutex);
        in_progress.erase(tp);
        break;
      }
      // The groups not swapped in (a refused one and those after it): their .cleaned files go.
      storage::discard_cleaned(*swap);
      const auto elapsed_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started)
              .count();
      const std::string log_dir = std::filesystem::path(snapshot.dir).parent_path().string();
      {
        std::lock_guard guard(mutex);
        in_progress.erase(tp);
        if (swapped->ok()) checkpoints[tp] = {log_dir, swap->next_dirty_offset};
      }
      if (!swapped->ok()) {
        log->info("{}-{}: cleaned segments not swapped in: {}", tp.topic, tp.partition, swapped->message);
        continue;
      }
      write_checkpoint(log_dir);
      const auto& s = swap->stats;
      log->info(
          "{}-{}: cleaned offsets {}..{} in {} ms: {} keys, {} bytes read ({} for the key map), {} written, "
          "{} "
          "records removed",
          tp.topic, tp.partition, snapshot.log_start_offset, swap->next_dirty_offset - 1, elapsed_ms, s.keys,
          s.bytes_read, s.map_bytes_read, s.bytes_written, s.records_removed);
    }
  }
};

log_cleaning::log_cleaning(net::shard_pool& shards, storage::log_manager& logs, const node_config& config,
                           std::vector<replication::replica_manager*> replicas_by_shard)
    : _impl(std::make_unique<impl>(shards, logs, config, std::move(replicas_by_shard))) {}

log_cleaning::~log_cleaning() {
  stop();
}

void log_cleaning::start() {
  auto& m = *_impl;
  if (!m.enabled || m.threads == 0 || !m.workers.empty()) return;
  m.load_checkpoints();
  const size_t per_thread = static_cast<size_t>(m.dedupe_bytes / m.threads);
  for (int i = 0; i < m.threads; ++i) {
    m.workers.emplace_back([&m, per_thread, i] {
      // Named for top -H; niced, so that on a busy node the shards' requests take the CPU first (the cleaner
      // still runs, at a lower share).
      pthread_setname_np(pthread_self(), fmt::format("log-cleaner-{}", i).c_str());
      if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), cleaner_nice) != 0) {
        m.log->warn("cannot lower the priority of cleaner thread {}: {}", i, std::strerror(errno));
      }
      storage::key_offset_map map(per_thread, m.load_factor);
      m.run(map);
    });
  }
  m.log->info("log cleaner started: {} thread(s), {} MiB of key map each ({} keys)", m.threads,
              per_thread >> 20, static_cast<size_t>(static_cast<double>(per_thread / 24) * m.load_factor));
}

void log_cleaning::stop() {
  auto& m = *_impl;
  m.stopping = true;
  m.wake.notify_all();
  for (auto& t : m.workers) {
    if (t.joinable()) t.join();
  }
  m.workers.clear();
  *m.alive = false;
}

}  // namespace mala::app
