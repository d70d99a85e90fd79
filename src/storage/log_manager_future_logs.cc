// log_manager's KIP-113 part: the future logs of replicas moving to another log dir (AlterReplicaLogDirs):
// created in the target dir, looked up, removed, and promoted over the current log. The rest is in
// log_manager.cc; the shared state in log_manager_impl.h.
#include <cerrno>
#include <cstdio>
#include <string>
#include <utility>

#include "log_manager_impl.h"

namespace mala::storage {

using log_manager_detail::create_synced_marker;

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
    if (future->second.dir == index) return future->second.log.get();
    m.remove_future(tp);
  }
  log_open_options open_options;
  if (auto stored = read_partition_metadata(current->second.log->dir()); stored.ok() && stored->has_value())
    open_options.topic_id = **stored;
  open_options.clock_ms = m.options.clock_ms;
  open_options.worker = m.worker;
  auto name = delete_dir_name(tp);  // <topic>-<partition>.<uuid>-delete: the same unique part
  name.replace(name.size() - delete_dir_suffix.size(), delete_dir_suffix.size(), future_dir_suffix);
  auto path = m.dirs[index].path / name;
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
  return it == _impl->futures.end() ? nullptr : it->second.log.get();
}

status log_manager::remove_future(const topic_partition& tp) {
  std::lock_guard guard(_impl->mutex);
  return _impl->remove_future(tp);
}

result<partition_log*> log_manager::promote_future(const topic_partition& tp) {
  std::lock_guard guard(_impl->mutex);
  auto& m = *_impl;
  auto current = m.logs.find(tp);
  auto future = m.futures.find(tp);
  if (current == m.logs.end() || future == m.futures.end()) {
    return status::error(error_code::replica_not_available,
                         partition_dir_name(tp.topic, tp.partition) + " has no future log to swap in");
  }
  const size_t from = current->second.dir;
  const size_t to = future->second.dir;
  auto& moved = *future->second.log;
  if (auto st = moved.close(); !st.ok()) {
    m.remove_future(tp);
    return st;
  }
  const int64_t recovery_point = moved.recovery_point();
  const int64_t log_start_offset = moved.log_start_offset();
  const auto future_path = moved.dir();
  auto& replaced = *current->second.log;
  if (auto st = replaced.close(); !st.ok()) {
    m.remove_future(tp);
    return st;
  }
  const auto replaced_path = replaced.dir();
  // Kept (closed) for the pointers still held to them; the partition takes the new log at once.
  m.retired.push_back(std::move(current->second.log));
  m.retired.push_back(std::move(future->second.log));
  m.logs.erase(current);
  m.futures.erase(future);
  --m.dirs[from].partitions;

  // The future log is complete: marked so (synced), then the replaced log goes first. A stop between the
  // renames leaves the marked future log alone, which the next load makes the partition's log (two
  // <topic>-<partition> dirs would refuse to load); an unmarked one is a copy cut short, and goes.
  if (auto st = create_synced_marker(future_path / swap_ready_file); !st.ok()) {
    m.take_offline(to, st.message);
    return st;
  }
  const auto deleted = m.dirs[from].path / delete_dir_name(tp);
  if (::rename(replaced_path.c_str(), deleted.c_str()) != 0) {
    auto error = detail::io_error("cannot rename " + replaced_path.string() + " to", deleted, errno);
    m.take_offline(from, error.message);
    return error;
  }
  m.deleter.enqueue(deleted, from);
  const auto canonical = m.dirs[to].path / partition_dir_name(tp.topic, tp.partition);
  if (::rename(future_path.c_str(), canonical.c_str()) != 0) {
    auto error = detail::io_error("cannot rename " + future_path.string() + " to", canonical, errno);
    m.take_offline(to, error.message);
    return error;
  }
  if (auto synced = detail::fsync_dir(m.dirs[to].path); !synced.ok()) {
    m.take_offline(to, synced.message);
    return synced;
  }
  log_open_options open_options;
  open_options.recovery_point = recovery_point;
  open_options.log_start_offset = log_start_offset;
  open_options.clean_shutdown = true;  // closed just now, everything synced
  open_options.clock_ms = m.options.clock_ms;
  open_options.worker = m.worker;
  auto opened = partition_log::open(canonical, tp, m.options.defaults, open_options);
  if (!opened.ok()) {
    m.take_offline(to, "cannot open " + canonical.string() + ": " + opened.error().message);
    return opened.error();
  }
  ::unlink((canonical / swap_ready_file).c_str());
  auto* raw = opened->get();
  raw->update_config(replaced.config());
  m.watch(*raw, to);
  m.logs[tp] = impl::log_entry{std::move(*opened), to};
  ++m.dirs[to].partitions;
  m.log->info("The future log of {} replaced its log: moved from {} to {}",
              partition_dir_name(tp.topic, tp.partition), m.dirs[from].path.string(),
              m.dirs[to].path.string());
  return raw;
}
}  // namespace mala::storage
