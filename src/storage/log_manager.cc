#include "mala/storage/log_manager.h"

#include "file_io.h"
#include "log_manager_impl.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "mala/common/logging.h"
#include "mala/storage/checkpoint_file.h"

namespace mala::storage {

namespace {

// What Kafka (3.7+, KIP-966) writes into .kafka_cleanshutdown: Jackson's encoding of {version, brokerEpoch}.
std::string clean_shutdown_contents(int64_t broker_epoch) {
  return "{\"version\":0,\"brokerEpoch\":" + std::to_string(broker_epoch) + "}";
}

// The brokerEpoch of a marker, or nullopt (older Kafka versions wrote an empty file).
std::optional<int64_t> parse_clean_shutdown_epoch(std::string_view text) {
  constexpr std::string_view key = "\"brokerEpoch\"";
  auto at = text.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  text.remove_prefix(at + key.size());
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\n'))
    text.remove_prefix(1);
  if (text.empty() || text.front() != ':') return std::nullopt;
  text.remove_prefix(1);
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\n'))
    text.remove_prefix(1);
  int64_t epoch = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), epoch);
  if (ec != std::errc{} || end == text.data()) return std::nullopt;
  return epoch;
}

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Runs job(i) for every i in [0, count) on up to `threads` new threads per group, all groups at once (Kafka
// runs one pool of num.recovery.threads.per.data.dir threads per log dir, the dirs in parallel). Falls back
// to the calling thread when no thread can be started.
void run_in_pools(int32_t threads, const std::vector<size_t>& group_sizes,
                  const std::function<void(size_t group, size_t index)>& job) {
  struct group_state {
    size_t size = 0;
    std::atomic<size_t> next{0};
  };
  std::vector<group_state> groups(group_sizes.size());
  for (size_t g = 0; g < groups.size(); ++g) groups[g].size = group_sizes[g];
  auto drain = [&](size_t g) {
    while (true) {
      auto i = groups[g].next.fetch_add(1, std::memory_order_relaxed);
      if (i >= groups[g].size) return;
      job(g, i);
    }
  };
  std::vector<std::thread> pool;
  std::vector<bool> started(groups.size(), false);
  for (size_t g = 0; g < groups.size(); ++g) {
    auto wanted = std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), groups[g].size);
    for (size_t t = 0; t < wanted; ++t) {
      try {
        pool.emplace_back(drain, g);
        started[g] = true;
      } catch (const std::system_error&) {
        break;  // out of threads: whatever is left runs below or on the threads already started
      }
    }
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!started[g]) drain(g);
  }
  for (auto& thread : pool) thread.join();
}

}  // namespace

namespace log_manager_detail {

// Absolute, without "." / ".." and without a trailing separator, so that paths given by callers of
// mark_offline() compare equal to the configured ones.
fs::path normalize_dir(const fs::path& dir) {
  std::error_code ec;
  auto absolute = fs::absolute(dir, ec);
  auto normal = (ec ? dir : absolute).lexically_normal();
  if (!normal.has_filename() && normal.has_parent_path() && normal != normal.root_path())
    normal = normal.parent_path();
  return normal;
}

// An empty file made durable with its directory entry.
status create_swap_marker(const fs::path& dir) {
  const auto path = dir / swap_ready_file;
  const auto stamp = std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
  if (auto st = write_file_atomically(path, stamp); !st.ok()) return st;
  return status::success();
}

std::optional<int64_t> read_swap_marker(const fs::path& dir) {
  auto read = detail::read_file_if_exists(dir / swap_ready_file, 64);
  if (!read.ok() || !read->has_value()) return std::nullopt;
  int64_t stamp = 0;
  const auto& text = **read;
  std::from_chars(text.data(), text.data() + text.size(), stamp);
  return stamp;
}

// Kafka's name for a partition dir waiting for deletion: "<topic>-<partition>.<uuid, 32 hex digits>-delete",
// the topic cut so that the name stays within the 255-byte file name limit (LocalLog.logDeleteDirName).
std::string delete_dir_name(const topic_partition& tp) {
  auto id = uuid::random();
  static constexpr char hex[] = "0123456789abcdef";
  std::string unique;
  for (auto byte : id.bytes) {
    unique += hex[byte >> 4];
    unique += hex[byte & 0xf];
  }
  auto suffix = "-" + std::to_string(tp.partition) + "." + unique + std::string(delete_dir_suffix);
  auto topic_length = std::min(tp.topic.size(), size_t{255} - suffix.size());
  return tp.topic.substr(0, topic_length) + suffix;
}

std::string future_dir_name(const topic_partition& tp) {
  auto name = delete_dir_name(tp);  // <topic>-<partition>.<uuid>-delete: the same unique part
  name.replace(name.size() - delete_dir_suffix.size(), delete_dir_suffix.size(), future_dir_suffix);
  return name;
}

}  // namespace log_manager_detail

status log_manager::impl::load() {
  auto start = steady_ms();

  // Per dir: create it, consume the clean-shutdown marker, read the checkpoints, list the partition dirs.
  struct load_job {
    topic_partition tp;
    fs::path path;
    log_config config;
    log_open_options open_options;
    std::optional<result<std::unique_ptr<partition_log>>> outcome;
  };
  struct dir_load {
    bool clean_shutdown = false;
    std::optional<int64_t> broker_epoch;
    std::vector<load_job> jobs;
    int32_t leftover_deletions = 0;
  };
  std::vector<dir_load> loads(dirs.size());
  // The partitions with a log of their own in some dir: a future log of one of them is a move a stop
  // interrupted, and goes; a future log without one is the log a stop caught half-way through its swap (the
  // current one already renamed for deletion), and becomes the partition's log.
  std::set<topic_partition> current_logs;
  struct interrupted_move {
    topic_partition tp;
    fs::path path;
    size_t dir = 0;
    bool clean_shutdown = false;
  };
  std::vector<interrupted_move> interrupted_moves;
  std::map<topic_partition, std::vector<fs::path>> canonical_paths;
  for (const auto& dir : dirs) {
    std::error_code list_ec;
    for (fs::directory_iterator it(dir.path, list_ec); !list_ec && it != fs::directory_iterator();
         it.increment(list_ec)) {
      if (auto tp = parse_partition_dir_name(it->path().filename().string())) {
        current_logs.insert(*tp);
        canonical_paths[*tp].push_back(it->path());
      }
    }
  }
  // Of two <topic>-<partition> dirs of one partition, the one with the newest swap marker is a future log
  // moved in beside the log, whose swap a stop cut short before its commit (promote_future): a copy.
  std::set<fs::path> moved_in_copies;
  for (const auto& [tp, paths] : canonical_paths) {
    if (paths.size() < 2) continue;
    std::optional<std::pair<int64_t, fs::path>> newest;
    for (const auto& path : paths) {
      auto stamp = read_swap_marker(path);
      if (stamp && (!newest || *stamp > newest->first)) newest.emplace(*stamp, path);
    }
    if (newest) moved_in_copies.insert(newest->second);
  }

  for (size_t d = 0; d < dirs.size(); ++d) {
    auto& dir = dirs[d];
    auto& load = loads[d];
    std::error_code ec;
    fs::create_directories(dir.path, ec);
    if (ec) {
      take_offline(d, "cannot create log dir " + dir.path.string() + ": " + ec.message());
      continue;
    }
    if (!fs::is_directory(dir.path, ec)) {
      take_offline(d, "log dir " + dir.path.string() + " is not a directory");
      continue;
    }

    // The marker is removed before anything is loaded so that a crash during this run is seen as unclean by
    // the next one (KAFKA-10471); the removal is made durable for the same reason.
    auto marker_path = dir.path / clean_shutdown_file;
    auto marker = detail::read_file_if_exists(marker_path, 4096);
    if (!marker.ok()) {
      take_offline(d, marker.error().message);
      continue;
    }
    if (marker->has_value()) {
      load.clean_shutdown = true;
      load.broker_epoch = parse_clean_shutdown_epoch(**marker);
      if (::unlink(marker_path.c_str()) != 0 && errno != ENOENT) {
        take_offline(d, detail::io_error("cannot delete", marker_path, errno).message);
        continue;
      }
      if (auto synced = detail::fsync_dir(dir.path); !synced.ok()) {
        take_offline(d, synced.message);
        continue;
      }
    }

    // Like Kafka, an unreadable checkpoint only costs work: recovery from offset 0, or the log start offset
    // taken from the first segment.
    offset_checkpoint recovery_points;
    if (auto read = read_offset_checkpoint(dir.path / recovery_point_checkpoint_file); read.ok()) {
      recovery_points = std::move(*read);
    } else {
      log->warn("Cannot read {} in {}, recovering from offset 0: {}", recovery_point_checkpoint_file,
                dir.path.string(), read.error().message);
    }
    offset_checkpoint start_offsets;
    if (auto read = read_offset_checkpoint(dir.path / log_start_offset_checkpoint_file); read.ok()) {
      start_offsets = std::move(*read);
    } else {
      log->warn("Cannot read {} in {}, using each log's first segment: {}", log_start_offset_checkpoint_file,
                dir.path.string(), read.error().message);
    }

    if (auto read = read_offset_checkpoint(dir.path / replication_offset_checkpoint_file); read.ok()) {
      for (const auto& [tp, hw] : *read) checkpointed_high_watermarks[tp] = hw;
    } else {
      log->warn("Cannot read {} in {}, high watermarks start at each log's start offset: {}",
                replication_offset_checkpoint_file, dir.path.string(), read.error().message);
    }

    fs::directory_iterator it(dir.path, ec);
    bool listed = !ec;
    for (; listed && it != fs::directory_iterator(); it.increment(ec)) {
      if (ec) break;
      std::error_code type_ec;
      if (!it->is_directory(type_ec)) continue;
      auto name = it->path().filename().string();
      if (name.ends_with(delete_dir_suffix)) {
        // Left over from a topic deletion interrupted by a stop.
        deleter.enqueue(it->path());
        ++load.leftover_deletions;
        continue;
      }
      auto path = it->path();
      auto tp = parse_partition_dir_name(name);
      if (auto moving = parse_suffixed_partition_dir_name(name, future_dir_suffix)) {
        if (current_logs.contains(*moving)) {
          // A move a stop interrupted: the future log is loaded after the logs, and the copy goes on (a
          // marker its move-in wrote goes: the move-in is done again). A dir renamed here just now may be
          // listed again.
          ::unlink((path / swap_ready_file).c_str());
          const bool listed = std::any_of(interrupted_moves.begin(), interrupted_moves.end(),
                                          [&](const interrupted_move& m) { return m.path == path; });
          if (!listed) interrupted_moves.push_back({*moving, path, d, load.clean_shutdown});
          continue;
        }
        std::error_code marker_ec;
        if (!fs::exists(path / swap_ready_file, marker_ec)) {
          log->info("Removing {}: a copy of {} a stop cut short", name,
                    partition_dir_name(moving->topic, moving->partition));
          deleter.enqueue(path);
          continue;
        }
        auto canonical = dir.path / partition_dir_name(moving->topic, moving->partition);
        if (::rename(path.c_str(), canonical.c_str()) != 0) {
          take_offline(d,
                       detail::io_error("cannot rename " + path.string() + " to", canonical, errno).message);
          break;
        }
        log->warn("{} becomes the log of {}: a stop interrupted its swap with the log it replaced", name,
                  partition_dir_name(moving->topic, moving->partition));
        ::unlink((canonical / swap_ready_file).c_str());
        current_logs.insert(*moving);
        tp = moving;
        path = canonical;
      }
      if (!tp) {
        log->debug("Ignoring {} in log dir {}: not a <topic>-<partition> directory", name, dir.path.string());
        continue;
      }
      if (std::error_code marker_ec; fs::exists(path / swap_ready_file, marker_ec)) {
        const auto partition = partition_dir_name(tp->topic, tp->partition);
        if (moved_in_copies.contains(path)) {
          // A future log moved in beside the log, and a stop came before the swap's commit: a copy, whose
          // move goes on.
          auto future_path = dir.path / future_dir_name(*tp);
          if (::rename(path.c_str(), future_path.c_str()) != 0) {
            take_offline(
                d, detail::io_error("cannot rename " + path.string() + " to", future_path, errno).message);
            break;
          }
          ::unlink((future_path / swap_ready_file).c_str());
          log->warn("{} in {} is the copy of a move a stop interrupted before its swap: it goes on from {}",
                    partition, dir.path.string(), future_path.filename().string());
          interrupted_moves.push_back({*tp, future_path, d, load.clean_shutdown});
          continue;
        }
        // The swap's commit was the last thing the stop let through (or an earlier swap's marker stayed):
        // this is the log.
        log->warn("{} in {} is the log: a stop came after its swap, before the swap's marker was removed",
                  partition, dir.path.string());
        ::unlink((path / swap_ready_file).c_str());
      }
      // The KRaft metadata log (__cluster_metadata-0) belongs to the controller's metadata log, not to the
      // partitions this manager serves, as in Kafka (its LogManager skips the metadata topic's dir).
      if (tp->topic == metadata_topic_dir_name) continue;
      load_job job;
      job.tp = *tp;
      job.path = path;
      // Resolved here, on the caller's thread: the callback need not be thread-safe.
      job.config = options.topic_config ? options.topic_config(tp->topic) : options.defaults;
      if (auto rp = recovery_points.find(*tp); rp != recovery_points.end())
        job.open_options.recovery_point = rp->second;
      if (auto so = start_offsets.find(*tp); so != start_offsets.end())
        job.open_options.log_start_offset = so->second;
      job.open_options.clean_shutdown = load.clean_shutdown;
      job.open_options.clock_ms = options.clock_ms;
      job.open_options.worker = worker;
      load.jobs.push_back(std::move(job));
    }
    if (ec) {
      load.jobs.clear();
      take_offline(d, "cannot list log dir " + dir.path.string() + ": " + ec.message());
      continue;
    }
    if (!dir.online) load.jobs.clear();  // a future log's rename failed
  }

  std::vector<size_t> sizes;
  for (const auto& load : loads) sizes.push_back(load.jobs.size());
  run_in_pools(options.recovery_threads_per_dir, sizes, [&](size_t d, size_t i) {
    auto& job = loads[d].jobs[i];
    job.outcome.emplace(partition_log::open(job.path, job.tp, job.config, job.open_options));
  });

  // Two dirs holding the same partition: Kafka refuses to start, since either copy could be the stale one (a
  // reassignment between dirs interrupted by a disk failure) and only an operator can tell.
  std::map<topic_partition, fs::path> seen;
  for (auto& load : loads) {
    for (auto& job : load.jobs) {
      if (!job.outcome || !job.outcome->ok()) continue;
      auto [at, inserted] = seen.emplace(job.tp, job.path);
      if (!inserted) {
        return status::error(
            error_code::kafka_storage_error,
            "Duplicate log directories for " + partition_dir_name(job.tp.topic, job.tp.partition) +
                " are found in both " + at->second.string() + " and " + job.path.string() +
                ". Delete the stale one (likely the one on the dir that failed recently) and "
                "restart.");
      }
    }
  }

  for (size_t d = 0; d < dirs.size(); ++d) {
    auto& load = loads[d];
    // A partition that cannot be opened (I/O error, corruption recovery could not cut away) takes its whole
    // dir offline, as Kafka does with an IOException during loading.
    std::string failure;
    for (auto& job : load.jobs) {
      if (job.outcome && !job.outcome->ok() && failure.empty()) {
        failure = "cannot load " + job.path.string() + ": " + job.outcome->error().message;
      }
    }
    int32_t loaded = 0;
    int32_t recovered = 0;
    int64_t truncated = 0;
    for (auto& job : load.jobs) {
      if (!job.outcome || !job.outcome->ok()) continue;
      auto partition = std::move(job.outcome->value());
      const auto& recovery = partition->recovery_report();
      ++loaded;
      if (recovery.scanned) ++recovered;
      truncated += recovery.truncated_bytes;
      watch(*partition, d);
      logs[job.tp] = log_entry{std::move(partition), d};
      ++dirs[d].partitions;
    }
    if (!failure.empty()) {
      take_offline(d, failure);
      continue;
    }
    if (!dirs[d].online) continue;
    report.partitions += loaded;
    report.recovered += recovered;
    report.truncated_bytes += truncated;
    if (load.jobs.empty()) {
      log->info("No partitions found in {}{}", dirs[d].path.string(),
                load.leftover_deletions
                    ? fmt::format(", {} deleted partitions to remove", load.leftover_deletions)
                    : "");
    } else if (load.clean_shutdown) {
      log->info("Loaded {} partitions from {} without recovery (clean shutdown marker found){}", loaded,
                dirs[d].path.string(),
                load.leftover_deletions
                    ? fmt::format(", {} deleted partitions to remove", load.leftover_deletions)
                    : "");
    } else {
      log->info("Loaded {} partitions from {} after an unclean shutdown: {} recovered, {} bytes truncated{}",
                loaded, dirs[d].path.string(), recovered, truncated,
                load.leftover_deletions
                    ? fmt::format(", {} deleted partitions to remove", load.leftover_deletions)
                    : "");
    }
  }

  std::string offline;
  for (const auto& dir : dirs) {
    if (dir.online) {
      offline.clear();
      break;
    }
    offline += (offline.empty() ? "" : "; ") + dir.error;
  }
  if (!offline.empty())
    return status::error(error_code::kafka_storage_error, "every log dir is offline: " + offline);

  // The future logs of interrupted moves (Kafka loads them as future logs and resumes the copy); one whose
  // partition or dir did not load, or that does not open, goes.
  for (const auto& move : interrupted_moves) {
    auto current = logs.find(move.tp);
    const bool wanted = dirs[move.dir].online && current != logs.end() && current->second.dir != move.dir &&
                        !futures.contains(move.tp);
    std::optional<result<std::unique_ptr<partition_log>>> opened;
    if (wanted) {
      log_open_options open_options;
      open_options.clean_shutdown = move.clean_shutdown;
      open_options.clock_ms = options.clock_ms;
      open_options.worker = worker;
      opened.emplace(partition_log::open(
          move.path, move.tp, options.topic_config ? options.topic_config(move.tp.topic) : options.defaults,
          open_options));
    }
    if (!opened || !opened->ok()) {
      log->info("Removing {}: the interrupted move of {} cannot go on", move.path.string(),
                partition_dir_name(move.tp.topic, move.tp.partition));
      deleter.enqueue(move.path);
      continue;
    }
    watch(*opened->value(), move.dir);
    log->info("Loaded the future log of {} in {} (an interrupted move goes on)",
              partition_dir_name(move.tp.topic, move.tp.partition), dirs[move.dir].path.string());
    futures[move.tp] = log_entry{std::move(opened->value()), move.dir};
  }

  // KIP-966: an epoch is reported only when every dir, all online, stopped cleanly with the same one.
  report.previous_broker_epoch = -1;
  std::optional<int64_t> epoch;
  bool consistent = true;
  for (size_t d = 0; d < dirs.size(); ++d) {
    if (!dirs[d].online || !loads[d].broker_epoch || (epoch && *epoch != *loads[d].broker_epoch)) {
      consistent = false;
      break;
    }
    epoch = loads[d].broker_epoch;
  }
  if (consistent && epoch) report.previous_broker_epoch = *epoch;

  report.elapsed_ms = steady_ms() - start;
  log->info("Loaded {} partitions from {} log dirs in {} ms ({} recovered, {} bytes truncated)",
            report.partitions, dirs.size(), report.elapsed_ms, report.recovered, report.truncated_bytes);
  return status::success();
}

result<std::unique_ptr<log_manager>> log_manager::open(log_manager_options options) {
  if (options.dirs.empty()) return status::error(error_code::kafka_storage_error, "no log dirs configured");
  std::unique_ptr<log_manager> manager(new log_manager());
  manager->_impl = std::make_unique<impl>();
  auto& m = *manager->_impl;
  std::set<fs::path> unique;
  for (const auto& dir : options.dirs) {
    auto normal = normalize_dir(dir);
    if (!unique.insert(normal).second) {
      return status::error(error_code::kafka_storage_error,
                           "log dir " + normal.string() + " is listed twice");
    }
    m.dirs.push_back(impl::dir_state{normal, true, {}});
  }
  m.options = std::move(options);
  if (auto loaded = m.load(); !loaded.ok()) return loaded;
  return manager;
}

log_manager::~log_manager() {
  // No flush, no checkpoints, no marker: destroying without shutdown() is what a crash looks like to the next
  // start. The worker's jobs end first: they use the manager's deleter.
  if (_impl) _impl->worker->stop();
  if (_impl) _impl->deleter.stop();
}

const std::shared_ptr<file_worker>& log_manager::worker() const {
  return _impl->worker;
}

partition_log* log_manager::get(const topic_partition& tp) const {
  std::lock_guard guard(_impl->mutex);
  auto it = _impl->logs.find(tp);
  return it == _impl->logs.end() ? nullptr : it->second.log.get();
}

std::vector<topic_partition> log_manager::partitions() const {
  std::lock_guard guard(_impl->mutex);
  std::vector<topic_partition> out;
  out.reserve(_impl->logs.size());
  for (const auto& [tp, entry] : _impl->logs) out.push_back(tp);
  return out;
}

std::map<topic_partition, size_t> log_manager::log_dir_index_of_partitions() const {
  std::lock_guard guard(_impl->mutex);
  std::map<topic_partition, size_t> out;
  for (const auto& [tp, entry] : _impl->logs) {
    if (_impl->dirs[entry.dir].online) out.emplace(tp, entry.dir);
  }
  return out;
}

result<partition_log*> log_manager::create(const topic_partition& tp, const uuid& topic_id,
                                           const log_config& config) {
  std::lock_guard guard(_impl->mutex);
  auto& m = *_impl;
  if (auto it = m.logs.find(tp); it != m.logs.end()) {
    // A partition of a deleted topic recreated under the same name has a new id: the old data must not be
    // served as the new topic's (Kafka's InconsistentTopicIdException).
    auto stored = read_partition_metadata(it->second.log->dir());
    if (stored.ok() && stored->has_value() && !(**stored == topic_id)) {
      return status::error(error_code::inconsistent_topic_id,
                           "partition " + partition_dir_name(tp.topic, tp.partition) + " in " +
                               it->second.log->dir().string() + " has topic id " + (*stored)->to_string() +
                               ", not " + topic_id.to_string());
    }
    return it->second.log.get();
  }
  if (m.shut_down) return status::error(error_code::kafka_storage_error, "log manager is shut down");
  // Its replica was in a dir that failed: it is not recreated empty in another one (Kafka's getOrCreateLog
  // refuses too; only a reassignment moves it).
  if (is_offline(tp)) {
    return status::error(error_code::kafka_storage_error, "cannot create " +
                                                              partition_dir_name(tp.topic, tp.partition) +
                                                              ": its replica is in an offline log dir");
  }

  // Fewest partitions first; ties keep the configured order (Kafka's nextLogDirs).
  std::vector<std::pair<int32_t, size_t>> candidates;
  for (size_t d = 0; d < m.dirs.size(); ++d) {
    if (m.dirs[d].online) candidates.emplace_back(m.dirs[d].partitions, d);
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // A dir AlterReplicaLogDirs asked for before the replica came goes first.
  if (auto preferred = m.preferred_dirs.find(tp); preferred != m.preferred_dirs.end()) {
    const size_t wanted = preferred->second;
    m.preferred_dirs.erase(preferred);
    auto at = std::find_if(candidates.begin(), candidates.end(),
                           [wanted](const auto& c) { return c.second == wanted; });
    if (at != candidates.end()) std::rotate(candidates.begin(), at, at + 1);
  }

  status last = status::error(
      error_code::kafka_storage_error,
      "cannot create " + partition_dir_name(tp.topic, tp.partition) + ": every log dir is offline");
  for (const auto& [_, d] : candidates) {
    if (!m.dirs[d].online) continue;  // taken offline by an earlier attempt
    log_open_options open_options;
    open_options.topic_id = topic_id;
    open_options.clock_ms = m.options.clock_ms;
    open_options.worker = m.worker;
    auto path = m.dirs[d].path / partition_dir_name(tp.topic, tp.partition);
    auto opened = partition_log::open(path, tp, config, open_options);
    if (opened.ok()) {
      auto* raw = opened->get();
      m.watch(*raw, d);
      m.logs[tp] = impl::log_entry{std::move(*opened), d};
      ++m.dirs[d].partitions;
      m.log->info("Created log for {} in {}", partition_dir_name(tp.topic, tp.partition),
                  m.dirs[d].path.string());
      return raw;
    }
    if (opened.error().code != error_code::kafka_storage_error) return opened.error();
    // Kafka takes a dir that cannot hold a new partition offline and tries the next one.
    m.take_offline(d, "cannot create " + path.string() + ": " + opened.error().message);
    last = opened.error();
  }
  return last;
}

// The rest of a removal happens on the deleter's thread, for every removal queued meanwhile at once: the log
// dir synced (the rename made durable), the dir's checkpoints rewritten without the partition, then the files
// deleted. No fsync and no checkpoint on the calling thread (a shard).
status log_manager::remove(const topic_partition& tp) {
  std::lock_guard guard(_impl->mutex);
  auto& m = *_impl;
  auto it = m.logs.find(tp);
  if (it == m.logs.end()) {
    for (const auto& dir : m.dirs) {
      if (!dir.online) {
        return status::error(error_code::kafka_storage_error,
                             "cannot delete " + partition_dir_name(tp.topic, tp.partition) +
                                 ": it may be in the offline log dir " + dir.path.string());
      }
    }
    return status::success();  // nothing to delete: topic deletion is replayed idempotently
  }
  (void)m.remove_future(tp);
  m.preferred_dirs.erase(tp);
  auto d = it->second.dir;
  auto log = std::move(it->second.log);
  m.logs.erase(it);
  --m.dirs[d].partitions;
  auto from = log->dir();
  // Errors closing do not matter: the data is being thrown away.
  (void)log->close();
  log.reset();

  auto to = m.dirs[d].path / delete_dir_name(tp);
  if (::rename(from.c_str(), to.c_str()) != 0) {
    auto error = detail::io_error("cannot rename " + from.string() + " to", to, errno);
    m.take_offline(d, error.message);
    return error;
  }
  m.log->info("Log for {} renamed to {} and scheduled for deletion",
              partition_dir_name(tp.topic, tp.partition), to.string());
  // The dir sync that makes the rename durable and the checkpoints without the partition are the deleter's
  // (settle_removals), before it deletes the files.
  m.deleter.enqueue(to, d);
  return status::success();
}

status log_manager::checkpoint_recovery_points() {
  std::lock_guard guard(_impl->mutex);
  return _impl->checkpoint(true);
}

status log_manager::checkpoint_log_start_offsets() {
  std::lock_guard guard(_impl->mutex);
  return _impl->checkpoint(false);
}

status log_manager::checkpoint_high_watermarks(
    const std::function<std::optional<int64_t>(const topic_partition&)>& high_watermark) {
  std::lock_guard guard(_impl->mutex);
  auto& m = *_impl;
  std::map<size_t, offset_checkpoint> by_dir;
  for (size_t d = 0; d < m.dirs.size(); ++d) {
    if (m.dirs[d].online) by_dir[d];
  }
  for (const auto& [tp, entry] : m.logs) {
    if (auto hw = high_watermark(tp)) by_dir[entry.dir][tp] = *hw;
  }
  status first;
  for (const auto& [d, offsets] : by_dir) {
    if (!m.dirs[d].online) continue;
    auto written = write_offset_checkpoint(m.dirs[d].path / replication_offset_checkpoint_file, offsets);
    if (!written.ok()) {
      m.take_offline(
          d, "cannot write " + std::string(replication_offset_checkpoint_file) + ": " + written.message);
      if (first.ok()) first = status::error(error_code::kafka_storage_error, written.message);
    }
  }
  return first;
}

std::optional<int64_t> log_manager::checkpointed_high_watermark(const topic_partition& tp) const {
  auto it = _impl->checkpointed_high_watermarks.find(tp);
  if (it == _impl->checkpointed_high_watermarks.end()) return std::nullopt;
  return it->second;
}

void log_manager::run_retention(
    int64_t now_ms, const std::function<std::optional<int64_t>(const topic_partition&)>& high_watermark,
    const std::function<bool(const topic_partition&)>& owned) {
  std::lock_guard guard(_impl->mutex);
  auto& m = *_impl;
  std::map<size_t, std::string> failed;
  for (auto& [tp, entry] : m.logs) {
    if (failed.contains(entry.dir)) continue;
    if (owned && !owned(tp)) continue;
    auto& log = *entry.log;
    std::optional<int64_t> hw;
    if (high_watermark) hw = high_watermark(tp);
    auto removed = log.apply_retention(now_ms, hw.value_or(log.log_end_offset()));
    if (!removed.ok()) {
      if (removed.error().code == error_code::kafka_storage_error) {
        failed[entry.dir] = "retention of " + log.dir().string() + ": " + removed.error().message;
        continue;
      }
      m.log->warn("Retention of {} failed: {}", log.dir().string(), removed.error().message);
    }
    log.delete_expired_files(now_ms);
  }
  for (const auto& [d, error] : failed) m.take_offline(d, error);
}

status log_manager::shutdown(int64_t broker_epoch) {
  // The deleter settles the removals queued so far (it takes the lock) before the final checkpoints, and is
  // joined again after them, never while this thread holds the lock.
  _impl->deleter.stop();
  auto result = [&]() -> status {
    std::lock_guard guard(_impl->mutex);
    auto& m = *_impl;
    if (m.shut_down) return status::success();
    m.shut_down = true;
    m.log->info("Shutting down the log manager");
    // A move not finished is left on disk; the next load removes it (the move starts over when asked again).
    for (auto& [tp, entry] : m.futures) {
      if (!m.take_or_abandon_move_in(entry, true)) {
        // The worker finishes it below (worker->stop()) and leaves it on disk for the next load.
        continue;
      }
      (void)entry.log->close(file_sync::later);
      m.retired.push_back(std::move(entry.log));
    }
    m.futures.clear();

    // Flush and close in parallel per dir, like the log loading.
    std::vector<std::vector<std::pair<topic_partition, partition_log*>>> by_dir(m.dirs.size());
    for (auto& [tp, entry] : m.logs) by_dir[entry.dir].emplace_back(tp, entry.log.get());
    struct close_outcome {
      status result;
      int64_t recovery_point = 0;
      int64_t log_start_offset = 0;
    };
    std::vector<std::vector<close_outcome>> outcomes(m.dirs.size());
    std::vector<size_t> sizes;
    for (size_t d = 0; d < by_dir.size(); ++d) {
      outcomes[d].resize(by_dir[d].size());
      sizes.push_back(by_dir[d].size());
    }
    run_in_pools(m.options.recovery_threads_per_dir, sizes, [&](size_t d, size_t i) {
      auto* log = by_dir[d][i].second;
      auto& outcome = outcomes[d][i];
      // close() writes out what is left (Kafka's shutdown flushes then closes) and moves the recovery point
      // to the log end offset: that is what gets checkpointed, once the syncfs below made it durable (one
      // call per dir, not an fsync per file: 20,000 logs took minutes).
      outcome.result = log->close(file_sync::later);
      outcome.recovery_point = log->recovery_point();
      outcome.log_start_offset = log->log_start_offset();
    });
    // Every log closed ran or waited for its own deferred file work; what is left (a standby being made
    // for a log that then discarded it) ends here, before the dirs are synced.
    m.worker->stop();

    status first;
    for (size_t d = 0; d < m.dirs.size(); ++d) {
      if (!m.dirs[d].online) continue;
      // A dir whose logs did not all close cleanly gets no marker, so the next start recovers it (Kafka skips
      // the checkpoints and the marker of such a dir too).
      std::string failure;
      offset_checkpoint recovery_points;
      offset_checkpoint start_offsets;
      for (size_t i = 0; i < outcomes[d].size(); ++i) {
        const auto& outcome = outcomes[d][i];
        if (!outcome.result.ok() && failure.empty()) {
          failure = "cannot close " + by_dir[d][i].second->dir().string() + ": " + outcome.result.message;
        }
        recovery_points[by_dir[d][i].first] = outcome.recovery_point;
        start_offsets[by_dir[d][i].first] = outcome.log_start_offset;
      }
      if (failure.empty()) {
        if (auto synced = detail::sync_file_system(m.dirs[d].path); !synced.ok()) failure = synced.message;
      }
      if (!failure.empty()) {
        m.log->error("Log dir {} not marked clean: {}", m.dirs[d].path.string(), failure);
        if (first.ok()) first = status::error(error_code::kafka_storage_error, failure);
        continue;
      }
      auto recovery = m.write_checkpoint(d, true, recovery_points);
      auto start = recovery.ok() ? m.write_checkpoint(d, false, start_offsets) : recovery;
      if (!start.ok()) {
        if (first.ok()) first = start;
        continue;
      }
      auto marker =
          write_file_atomically(m.dirs[d].path / clean_shutdown_file, clean_shutdown_contents(broker_epoch));
      if (!marker.ok()) {
        m.log->error("Cannot write the clean shutdown marker in {}: {}", m.dirs[d].path.string(),
                     marker.message);
        if (first.ok()) first = marker;
      }
    }

    for (auto& [tp, entry] : m.logs) m.retired.push_back(std::move(entry.log));
    m.logs.clear();
    for (auto& dir : m.dirs) dir.partitions = 0;
    m.log->info("Log manager shut down");
    return first;
  }();
  _impl->deleter.stop();
  return result;
}

std::vector<log_dir_status> log_manager::dirs() const {
  std::lock_guard guard(_impl->mutex);
  std::vector<log_dir_status> out;
  for (const auto& dir : _impl->dirs)
    out.push_back(log_dir_status{dir.path, dir.online, dir.error, dir.partitions});
  return out;
}

void log_manager::mark_offline(const fs::path& dir, const std::string& error) {
  std::lock_guard guard(_impl->mutex);
  auto d = _impl->find_dir(dir);
  if (!d) {
    _impl->log->warn("mark_offline: {} is not a log dir ({})", dir.string(), error);
    return;
  }
  _impl->take_offline(*d, error);
}

bool log_manager::is_offline(const topic_partition& tp) const {
  if (!_impl->any_offline.load(std::memory_order_acquire)) return false;
  std::lock_guard lock(_impl->offline_mutex);
  return _impl->offline.contains(tp);
}

void log_manager::set_offline_listener(
    std::function<void(const fs::path& dir, const std::vector<topic_partition>& partitions)> listener) {
  _impl->offline_listener = std::move(listener);
}

void log_manager::set_run_on_owner(std::function<void(const topic_partition&, std::function<void()>)> run) {
  _impl->run_on_owner = std::move(run);
}

const log_manager::load_report& log_manager::loaded() const {
  return _impl->report;
}

}  // namespace mala::storage
