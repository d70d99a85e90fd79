// log_manager's KIP-113 part: the future logs of replicas moving to another log dir (AlterReplicaLogDirs):
// created in the target dir, looked up, removed, and promoted over the current log. The rest is in
// log_manager.cc; the shared state in log_manager_impl.h.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "log_manager_impl.h"

namespace mala::storage {

std::optional<size_t> log_manager::dir_index(const fs::path& dir) const {
  std::lock_guard guard(_impl->mutex);
  return _impl->find_dir(dir);
}

std::optional<size_t> log_manager::dir_index_of(const topic_partition& tp) const {
  std::lock_guard guard(_impl->mutex);
  auto it = _impl->logs.find(tp);
  if (it == _impl->logs.end()) return std::nullopt;
  return it->second.dir;
}

std::optional<size_t> log_manager::future_dir_index_of(const topic_partition& tp) const {
  std::lock_guard guard(_impl->mutex);
  auto it = _impl->futures.find(tp);
  if (it == _impl->futures.end()) return std::nullopt;
  return it->second.dir;
}

bool log_manager::dir_online(size_t index) const {
  std::lock_guard guard(_impl->mutex);
  return index < _impl->dirs.size() && _impl->dirs[index].online;
}

void log_manager::set_preferred_dir(const topic_partition& tp, size_t index) {
  std::lock_guard guard(_impl->mutex);
  if (index < _impl->dirs.size()) _impl->preferred_dirs[tp] = index;
}

result<partition_log*> log_manager::create_future(const topic_partition& tp, size_t index,
                                                  const log_config& config) {
  std::lock_guard guard(_impl->mutex);
  auto& m = *_impl;
  if (m.shut_down) return status::error(error_code::kafka_storage_error, "log manager is shut down");
  auto current = m.logs.find(tp);
  if (current == m.logs.end() || index >= m.dirs.size() || current->second.dir == index) {
    return status::error(error_code::replica_not_available,
                         partition_dir_name(tp.topic, tp.partition) + " has no log in another dir to move");
  }
  if (!m.dirs[index].online) {
    return status::error(error_code::kafka_storage_error,
                         "log dir " + m.dirs[index].path.string() + " is offline");
  }
  if (auto future = m.futures.find(tp); future != m.futures.end()) {
    if (future->second.dir == index && m.take_moved_in(future->second)) return future->second.log.get();
    m.remove_future(tp);
  }
  log_open_options open_options;
  if (auto stored = read_partition_metadata(current->second.log->dir()); stored.ok() && stored->has_value())
    open_options.topic_id = **stored;
  open_options.clock_ms = m.options.clock_ms;
  open_options.worker = m.worker;
  auto path = m.dirs[index].path / future_dir_name(tp);
  auto opened = partition_log::open(path, tp, config, open_options);
  if (!opened.ok()) {
    if (opened.error().code == error_code::kafka_storage_error)
      m.take_offline(index, "cannot create " + path.string() + ": " + opened.error().message);
    return opened.error();
  }
  auto* raw = opened->get();
  m.watch(*raw, index);
  m.futures[tp] = impl::log_entry{std::move(*opened), index};
  m.log->info("Created future log for {} in {} (moving it from {})",
              partition_dir_name(tp.topic, tp.partition), m.dirs[index].path.string(),
              m.dirs[current->second.dir].path.string());
  return raw;
}

partition_log* log_manager::get_future(const topic_partition& tp) const {
  std::lock_guard guard(_impl->mutex);
  auto it = _impl->futures.find(tp);
  if (it == _impl->futures.end() || !_impl->take_moved_in(it->second)) return nullptr;
  return it->second.log.get();
}

status log_manager::remove_future(const topic_partition& tp) {
  std::lock_guard guard(_impl->mutex);
  return _impl->remove_future(tp);
}

namespace {

// On the file worker: the first half of the swap (log_manager::begin_move_in). Takes no manager lock: a stop
// holds it while it waits for the worker. An abandoned job stops at the next step it has not begun.
void move_in(const std::shared_ptr<log_manager_detail::move_in_job>& job,
             std::shared_ptr<partition_log> future, const fs::path& canonical, log_open_options open_options,
             const std::shared_ptr<spdlog::logger>& log, log_manager_detail::background_deleter& deleter) {
  const auto tp = future->partition();
  const auto config = future->config();
  fs::path at = future->dir();
  auto abandoned = [&] {
    std::lock_guard guard(job->mutex);
    return job->abandoned;
  };
  auto moved = [&]() -> result<std::unique_ptr<partition_log>> {
    if (auto st = future->close(); !st.ok()) return st;  // synced
    open_options.recovery_point = future->recovery_point();
    open_options.log_start_offset = future->log_start_offset();
    open_options.clean_shutdown = true;
    future.reset();
    if (abandoned()) return status::error(error_code::replica_not_available, "abandoned");
    if (auto st = create_swap_marker(at); !st.ok()) return st;
    if (abandoned()) return status::error(error_code::replica_not_available, "abandoned");
    if (::rename(at.c_str(), canonical.c_str()) != 0)
      return detail::io_error("cannot rename " + at.string() + " to", canonical, errno);
    at = canonical;
    if (auto st = detail::fsync_dir(canonical.parent_path()); !st.ok()) return st;
    auto opened = partition_log::open(canonical, tp, config, open_options);
    // Its descriptors are opened again by the shard that takes it, in that shard's list of open files.
    if (opened) (*opened)->release_descriptors();
    return opened;
  }();
  std::lock_guard guard(job->mutex);
  if (job->abandoned) {
    if (moved.ok()) (void)(*moved)->close(file_sync::later);
    if (job->keep_on_disk) return;  // the next load resumes the move from the files
    const auto deleted = canonical.parent_path() / delete_dir_name(tp);
    if (::rename(at.c_str(), deleted.c_str()) == 0) {
      deleter.enqueue(deleted, job->log_dir);
    } else {
      log->warn("cannot remove the abandoned future log {}: {}", at.string(), std::strerror(errno));
    }
    return;
  }
  job->done = true;
  if (!moved.ok()) {
    job->error = moved.error();
    return;
  }
  job->reopened = std::move(*moved);
}

}  // namespace

status log_manager::begin_move_in(const topic_partition& tp) {
  std::lock_guard guard(_impl->mutex);
  auto& m = *_impl;
  auto future = m.futures.find(tp);
  if (future == m.futures.end() || !future->second.log || !m.logs.contains(tp)) {
    return status::error(error_code::replica_not_available,
                         partition_dir_name(tp.topic, tp.partition) + " has no future log to move in");
  }
  const size_t to = future->second.dir;
  if (!m.dirs[to].online) {
    return status::error(error_code::kafka_storage_error,
                         "log dir " + m.dirs[to].path.string() + " is offline");
  }
  auto job = std::make_shared<log_manager_detail::move_in_job>();
  std::shared_ptr<partition_log> moving(std::move(future->second.log));
  job->log_dir = to;
  job->dir = moving->dir();
  job->size_bytes = moving->size_bytes();
  job->log_end_offset = moving->log_end_offset();
  future->second.moving_in = job;
  // Its failures are the job's now: the worker never takes the manager's lock. Its descriptors leave this
  // shard's list of open files, which this thread alone may change.
  moving->set_failure_listener({});
  moving->release_descriptors();
  log_open_options open_options;
  open_options.clock_ms = m.options.clock_ms;
  open_options.worker = m.worker;
  auto canonical = m.dirs[to].path / partition_dir_name(tp.topic, tp.partition);
  m.worker->post([job, moving = std::move(moving), canonical = std::move(canonical),
                  open_options = std::move(open_options), log = m.log, &deleter = m.deleter]() mutable {
    move_in(job, std::move(moving), canonical, std::move(open_options), log, deleter);
  });
  return status::success();
}

result<partition_log*> log_manager::finish_move_in(const topic_partition& tp) {
  std::lock_guard guard(_impl->mutex);
  auto& m = *_impl;
  auto future = m.futures.find(tp);
  if (future == m.futures.end()) {
    return status::error(error_code::replica_not_available,
                         partition_dir_name(tp.topic, tp.partition) + " has no future log");
  }
  if (m.take_moved_in(future->second)) return future->second.log.get();
  const auto job = future->second.moving_in;
  status failure;
  {
    std::lock_guard job_guard(job->mutex);
    if (!job->done) return static_cast<partition_log*>(nullptr);
    failure = job->error;
  }
  // Done since the first look: it holds the reopened log.
  if (failure.ok()) {
    if (m.take_moved_in(future->second)) return future->second.log.get();
    failure = status::error(error_code::kafka_storage_error, "the moved-in future log did not open");
  }
  const size_t to = future->second.dir;
  m.futures.erase(future);
  if (failure.code == error_code::kafka_storage_error) {
    m.take_offline(to, "cannot move the future log of " + partition_dir_name(tp.topic, tp.partition) +
                           " in: " + failure.message);
  }
  return failure;
}

std::optional<log_manager::future_description> log_manager::describe_future(const topic_partition& tp) const {
  std::lock_guard guard(_impl->mutex);
  auto it = _impl->futures.find(tp);
  if (it == _impl->futures.end()) return std::nullopt;
  if (const auto* log = it->second.log.get())
    return future_description{log->dir(), log->size_bytes(), log->log_end_offset()};
  const auto& job = *it->second.moving_in;
  return future_description{job.dir, job.size_bytes, job.log_end_offset};
}

result<partition_log*> log_manager::promote_future(const topic_partition& tp) {
  std::lock_guard guard(_impl->mutex);
  auto& m = *_impl;
  auto current = m.logs.find(tp);
  auto future = m.futures.find(tp);
  const auto name = partition_dir_name(tp.topic, tp.partition);
  if (current == m.logs.end() || future == m.futures.end() || !m.take_moved_in(future->second) ||
      future->second.log->dir() != m.dirs[future->second.dir].path / name) {
    return status::error(error_code::replica_not_available, name + " has no moved-in future log to swap in");
  }
  const size_t from = current->second.dir;
  const size_t to = future->second.dir;
  // The commit: the replaced log's dir goes. A stop from here on loads the moved-in log (see load()).
  const auto replaced_path = current->second.log->dir();
  const auto deleted = m.dirs[from].path / delete_dir_name(tp);
  if (::rename(replaced_path.c_str(), deleted.c_str()) != 0) {
    auto error = detail::io_error("cannot rename " + replaced_path.string() + " to", deleted, errno);
    m.take_offline(from, error.message);
    return error;
  }
  // The replaced log's files go: it is closed here without touching them (offline: descriptors and
  // mappings only), and kept for the pointers still held to it.
  auto replaced = std::move(current->second.log);
  replaced->set_failure_listener({});
  replaced->mark_offline("replaced by the log moved to " + m.dirs[to].path.string());
  (void)replaced->close();
  auto* moved = future->second.log.get();
  moved->update_config(replaced->config());
  m.retired.push_back(std::move(replaced));
  current->second = impl::log_entry{std::move(future->second.log), to, nullptr};
  m.futures.erase(future);
  --m.dirs[from].partitions;
  ++m.dirs[to].partitions;
  // Off the shard: what the moved log holds unsynced (a power loss once the rename above is on disk keeps
  // only it), then the rename made durable, then the marker goes.
  std::vector<std::shared_ptr<const segment_file>> unsynced;
  const int64_t now = m.options.clock_ms ? m.options.clock_ms()
                                         : std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count();
  if (auto work = moved->sync_all_work(now); work.ok()) unsynced = std::move(work->files);
  m.worker->post([unsynced = std::move(unsynced), from_dir = m.dirs[from].path, to_dir = m.dirs[to].path,
                  marker = moved->dir() / swap_ready_file, log = m.log] {
    status synced;
    for (const auto& f : unsynced) {
      if (synced = f->sync(); !synced.ok()) break;
    }
    if (synced.ok()) synced = detail::fsync_dir(from_dir);
    if (synced.ok()) {
      ::unlink(marker.c_str());
      synced = detail::fsync_dir(to_dir);
    }
    // A failed sync leaves the marker: the next load takes the marked log unless a newer copy is marked.
    if (!synced.ok()) log->error("the swap of a moved log is not durable yet: {}", synced.message);
  });
  m.deleter.enqueue(deleted, from);
  m.log->info("The future log of {} replaced its log: moved from {} to {}", name, m.dirs[from].path.string(),
              m.dirs[to].path.string());
  return moved;
}
}  // namespace mala::storage
