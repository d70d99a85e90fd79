// log_manager's internals, shared by log_manager.cc and log_manager_future_logs.cc (KIP-113's future logs):
// its state (log_manager::impl), the background deleter and the file helpers both use. Not a public header.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "file_io.h"
#include "mala/common/logging.h"
#include "mala/storage/checkpoint_file.h"
#include "mala/storage/log_manager.h"

namespace mala::storage {

namespace log_manager_detail {

namespace fs = std::filesystem;

// Absolute, without "." / ".." and without a trailing separator, so that paths given by callers of
// mark_offline() compare equal to the configured ones.
fs::path normalize_dir(const fs::path& dir);

// KIP-113's mala-swap-ready, made durable with its directory entry: it holds when it was written (ns since
// the epoch), so that of two marked <topic>-<partition> dirs of one partition the newer one is the copy (a
// marker left behind by an earlier swap is older than any a later move writes).
status create_swap_marker(const fs::path& dir);
// A swap marker's time; 0 for one without it (written by an older version), nullopt when there is none.
std::optional<int64_t> read_swap_marker(const fs::path& dir);

// Kafka's name for a partition dir waiting for deletion: "<topic>-<partition>.<uuid, 32 hex digits>-delete",
// the topic cut so that the name stays within the 255-byte file name limit (LocalLog.logDeleteDirName).
std::string delete_dir_name(const topic_partition& tp);
// The same with the "-future" suffix: the dir of a log moving here from another log dir (KIP-113).
std::string future_dir_name(const topic_partition& tp);

// KIP-113: a future log the file worker moves in beside the partition's log (begin_move_in). The worker
// fills it in and never takes the manager's lock; the owning shard takes the reopened log from it
// (finish_move_in). An entry removed first abandons it: the worker then deletes what it moved in, or, for
// a stop or a failed dir, leaves it for the next load (keep_on_disk).
struct move_in_job {
  std::mutex mutex;
  bool done = false;
  bool abandoned = false;
  bool keep_on_disk = false;
  status error;
  std::unique_ptr<partition_log> reopened;
  size_t log_dir = 0;  // the index of the dir it moves into
  // What the future log held when it left the shard (DescribeLogDirs meanwhile).
  fs::path dir;
  int64_t size_bytes = 0;
  int64_t log_end_offset = 0;
};

// Removes "-delete" directories off the calling threads (a deleted topic can hold gigabytes), and first
// settles what the renames of removed logs left to do: `settle` runs on this thread with the log dirs of the
// removals taken in one turn (the durable rename, then the checkpoints that no longer name the partitions),
// so that a shard removing a replica does no fsync and writes no checkpoint.
class background_deleter {
 public:
  using settle_function = std::function<void(const std::set<size_t>& log_dirs)>;
  background_deleter(std::shared_ptr<spdlog::logger> log, settle_function settle)
      : _log(std::move(log)), _settle(std::move(settle)) {}
  ~background_deleter() { stop(); }

  // `log_dir`: the index of the log dir a removed log was renamed in (none: a leftover found at start-up).
  void enqueue(fs::path dir, std::optional<size_t> log_dir = std::nullopt) {
    {
      std::lock_guard lock(_mutex);
      _queue.push_back({std::move(dir), log_dir});
      if (!_thread.joinable()) {
        try {
          _thread = std::thread([this] { run(); });
        } catch (const std::system_error&) {
          // No thread: do it now rather than leave it (a leftover would also be retried at the next start).
          auto job = std::move(_queue.back());
          _queue.pop_back();
          if (job.log_dir) _settle({*job.log_dir});
          remove(job.path);
          return;
        }
      }
    }
    _wake.notify_one();
  }

  // Finishes the queued work and joins the thread.
  void stop() {
    {
      std::lock_guard lock(_mutex);
      _stopping = true;
    }
    _wake.notify_one();
    if (_thread.joinable()) _thread.join();
    std::lock_guard lock(_mutex);
    _stopping = false;
  }

 private:
  struct job {
    fs::path path;
    std::optional<size_t> log_dir;
  };

  void run() {
    std::unique_lock lock(_mutex);
    while (true) {
      _wake.wait(lock, [this] { return _stopping || !_queue.empty(); });
      if (_queue.empty()) return;  // stopping, nothing left
      // Everything queued goes in one turn: one directory sync and one checkpoint pair per log dir, however
      // many partitions a topic deletion removed.
      std::deque<job> turn;
      turn.swap(_queue);
      lock.unlock();
      std::set<size_t> log_dirs;
      for (const auto& j : turn) {
        if (j.log_dir) log_dirs.insert(*j.log_dir);
      }
      if (!log_dirs.empty()) _settle(log_dirs);
      for (const auto& j : turn) remove(j.path);
      lock.lock();
    }
  }

  void remove(const fs::path& dir) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec) {
      // Left for the next start-up, which removes every "-delete" dir it finds.
      _log->warn("Cannot delete {}: {}", dir.string(), ec.message());
    } else {
      _log->info("Deleted log directory {}", dir.string());
    }
  }

  std::shared_ptr<spdlog::logger> _log;
  settle_function _settle;
  std::mutex _mutex;
  std::condition_variable _wake;
  std::deque<job> _queue;
  bool _stopping = false;
  std::thread _thread;
};

}  // namespace log_manager_detail

using log_manager_detail::background_deleter;
using log_manager_detail::create_swap_marker;
using log_manager_detail::delete_dir_name;
using log_manager_detail::future_dir_name;
using log_manager_detail::normalize_dir;
using log_manager_detail::read_swap_marker;
namespace fs = std::filesystem;

struct log_manager::impl {
  struct dir_state {
    fs::path path;
    bool online = true;
    std::string error;
    int32_t partitions = 0;  // kept up to date: create() balances on it
  };
  struct log_entry {
    std::unique_ptr<partition_log> log;
    size_t dir = 0;
    // Futures only: set (and `log` null) while the file worker moves the future log in.
    std::shared_ptr<log_manager_detail::move_in_job> moving_in;
  };

  log_manager_options options;
  std::shared_ptr<spdlog::logger> log = subsystem_logger("storage");
  // Guards dirs, logs and retired: the shards create, remove and look up logs, and a log's I/O failure takes
  // its dir offline, from any shard. Recursive: a failure inside a locked call (retention, a checkpoint)
  // takes the dir offline under the same lock. Never taken on the data path (a replica holds its log).
  mutable std::recursive_mutex mutex;
  std::vector<dir_state> dirs;
  std::map<topic_partition, log_entry> logs;
  // KIP-113: the future logs of replicas moving to another dir (AlterReplicaLogDirs), and the dirs asked for
  // replicas not created yet (used by their create()).
  std::map<topic_partition, log_entry> futures;
  std::map<topic_partition, size_t> preferred_dirs;
  // replication-offset-checkpoint as found at start-up: each partition's last checkpointed high watermark.
  std::map<topic_partition, int64_t> checkpointed_high_watermarks;
  // Logs of dirs taken offline, closed: kept alive until the manager goes so that the partition_log pointers
  // callers still hold stay valid (they learn of the failure from dirs() / metadata, not from a crash).
  std::vector<std::unique_ptr<partition_log>> retired;
  // Partitions whose log was in a dir that went offline: reported as offline replicas through metadata.
  // Guarded: Metadata handlers on every shard ask is_offline() while a failing append on the home shard adds
  // to it.
  mutable std::mutex offline_mutex;
  std::set<topic_partition> offline;
  // Whether `offline` has anything: the data path asks is_offline for every partition of every request, and
  // must take no lock that every shard shares while every dir is online.
  std::atomic<bool> any_offline{false};
  std::function<void(const fs::path&, const std::vector<topic_partition>&)> offline_listener;
  std::function<void(const topic_partition&, std::function<void()>)> run_on_owner;
  load_report report;
  background_deleter deleter{log, [this](const std::set<size_t>& log_dirs) { settle_removals(log_dirs); }};
  // The logs' file work off the shards (a roll's standby segment, renames, index trims).
  std::shared_ptr<file_worker> worker = std::make_shared<file_worker>();
  bool shut_down = false;

  std::optional<size_t> find_dir(const fs::path& path) const {
    auto normal = normalize_dir(path);
    for (size_t i = 0; i < dirs.size(); ++i) {
      if (dirs[i].path == normal) return i;
    }
    return std::nullopt;
  }

  // Kafka's LogManager.handleLogDirFailure: the dir's logs stop without touching their files again (only
  // descriptors and mappings are released), its partitions become offline replicas, and the listener (the
  // replica manager) stops them.
  void take_offline(size_t d, const std::string& error) {
    std::lock_guard guard(mutex);
    auto& dir = dirs[d];
    if (!dir.online) return;
    dir.online = false;
    dir.error = error;
    std::vector<topic_partition> stopped;
    const std::string reason = "log dir " + dir.path.string() + " is offline: " + error;
    // A log stops on the shard that owns it (it may be appending there right now); it stays alive in
    // `retired` for the pointers its replica still holds.
    auto retire = [this, &reason](std::map<topic_partition, log_entry>& from, auto it) {
      if (!take_or_abandon_move_in(it->second, true)) return from.erase(it);
      partition_log* stopping = it->second.log.get();
      auto stop = [stopping, reason] {
        stopping->mark_offline(reason);
        (void)stopping->close();
      };
      if (run_on_owner) {
        run_on_owner(it->first, std::move(stop));
      } else {
        stop();
      }
      retired.push_back(std::move(it->second.log));
      return from.erase(it);
    };
    for (auto it = logs.begin(); it != logs.end();) {
      if (it->second.dir != d) {
        ++it;
        continue;
      }
      stopped.push_back(it->first);
      it = retire(logs, it);
    }
    // Moves into the dir stop (their future logs are released like its logs), and so do moves out of it:
    // their future logs stay on disk for the next load (the owning shard may be appending to them now).
    for (auto it = futures.begin(); it != futures.end();) {
      if (it->second.dir == d || std::find(stopped.begin(), stopped.end(), it->first) != stopped.end()) {
        it = retire(futures, it);
      } else {
        ++it;
      }
    }
    {
      std::lock_guard lock(offline_mutex);
      offline.insert(stopped.begin(), stopped.end());
      any_offline.store(!offline.empty(), std::memory_order_release);
    }
    dir.partitions = 0;
    log->error("Log dir {} is offline ({} partitions stop being served): {}", dir.path.string(),
               stopped.size(), error);
    if (auto listener = offline_listener) listener(dir.path, stopped);
  }

  // Closes a future log and deletes its dir in the background (errors closing do not matter).
  // A future log the worker moved in goes back into its entry (true, also for an entry not moving in); false
  // while the worker is still at it, or when it failed (the entry has no log then).
  bool take_moved_in(log_entry& entry) {
    if (!entry.moving_in) return entry.log != nullptr;
    std::lock_guard guard(entry.moving_in->mutex);
    if (!entry.moving_in->done || !entry.moving_in->reopened) return false;
    entry.log = std::move(entry.moving_in->reopened);
    entry.moving_in.reset();
    watch(*entry.log, entry.dir);
    return true;
  }
  // The entry's log is no longer wanted as it is: true with the log taken if the worker's move-in is done
  // with it; false if the worker failed it, or is still at it (then the move-in is abandoned, see
  // move_in_job).
  bool take_or_abandon_move_in(log_entry& entry, bool keep_on_disk) {
    if (!entry.moving_in) return entry.log != nullptr;
    {
      std::lock_guard guard(entry.moving_in->mutex);
      if (!entry.moving_in->done) {
        entry.moving_in->abandoned = true;
        entry.moving_in->keep_on_disk = keep_on_disk;
        return false;
      }
    }
    return take_moved_in(entry);  // done stays done: its log, or none if it failed
  }

  status remove_future(const topic_partition& tp) {
    auto it = futures.find(tp);
    if (it == futures.end()) return status::success();
    if (!take_or_abandon_move_in(it->second, false)) {
      futures.erase(it);
      log->info("Future log of {} removed while it was being moved in",
                partition_dir_name(tp.topic, tp.partition));
      return status::success();
    }
    const size_t d = it->second.dir;
    auto doomed = std::move(it->second.log);
    futures.erase(it);
    const auto from = doomed->dir();
    (void)doomed->close(file_sync::later);  // its data is thrown away
    retired.push_back(std::move(doomed));   // the owning shard may still hold it until it hears
    if (!dirs[d].online) return status::success();
    const auto to = dirs[d].path / delete_dir_name(tp);
    if (::rename(from.c_str(), to.c_str()) != 0) {
      auto error = detail::io_error("cannot rename " + from.string() + " to", to, errno);
      take_offline(d, error.message);
      return error;
    }
    log->info("Future log of {} in {} removed", partition_dir_name(tp.topic, tp.partition),
              dirs[d].path.string());
    deleter.enqueue(to, d);
    return status::success();
  }

  // An I/O error inside one of the dir's logs takes the whole dir offline (Kafka's LogDirFailureChannel).
  // The manager outlives its logs, retired ones included.
  void watch(partition_log& partition, size_t d) {
    partition.set_failure_listener([this, d](const status& error) { take_offline(d, error.message); });
  }

  std::map<size_t, offset_checkpoint> offsets_by_dir(bool recovery_points) const {
    std::map<size_t, offset_checkpoint> by_dir;
    for (size_t d = 0; d < dirs.size(); ++d) {
      if (dirs[d].online) by_dir[d];  // a dir with no partitions left gets an empty checkpoint
    }
    for (const auto& [tp, entry] : logs) {
      by_dir[entry.dir][tp] = recovery_points ? entry.log->recovery_point() : entry.log->log_start_offset();
    }
    return by_dir;
  }

  status write_checkpoint(size_t d, bool recovery_points, const offset_checkpoint& offsets) {
    auto file = recovery_points ? recovery_point_checkpoint_file : log_start_offset_checkpoint_file;
    auto written = write_offset_checkpoint(dirs[d].path / file, offsets);
    if (!written.ok()) {
      take_offline(d, "cannot write " + std::string(file) + ": " + written.message);
      return status::error(error_code::kafka_storage_error, written.message);
    }
    return status::success();
  }

  status checkpoint(bool recovery_points, std::optional<size_t> only_dir = std::nullopt) {
    status first;
    for (const auto& [d, offsets] : offsets_by_dir(recovery_points)) {
      if (only_dir && d != *only_dir) continue;
      if (!dirs[d].online) continue;
      auto written = write_checkpoint(d, recovery_points, offsets);
      if (!written.ok() && first.ok()) first = written;
    }
    return first;
  }

  status load();

  // On the deleter's thread, after removals renamed logs in `log_dirs`: each dir synced so that the renames
  // are durable, then its checkpoints rewritten without the removed partitions (a crash must not bring a
  // deleted partition back, nor give a later log of the same name the removed one's recovery point). After
  // shutdown() the final checkpoints and the file system sync have done both.
  void settle_removals(const std::set<size_t>& log_dirs) {
    std::lock_guard guard(mutex);
    if (shut_down) return;
    for (size_t d : log_dirs) {
      if (!dirs[d].online) continue;
      if (auto synced = detail::fsync_dir(dirs[d].path); !synced.ok()) {
        take_offline(d, synced.message);
        continue;
      }
      (void)checkpoint(true, d);
      (void)checkpoint(false, d);
    }
  }
};

}  // namespace mala::storage
