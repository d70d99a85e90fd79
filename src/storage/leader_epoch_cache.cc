#include "mala/storage/leader_epoch_cache.h"

#include <algorithm>
#include <string>

#include "mala/storage/segment_files.h"

namespace mala::storage {

namespace {

constexpr int32_t undefined_epoch = -1;
constexpr int64_t undefined_epoch_offset = -1;

// Kafka's maybeTruncateNonMonotonicEntries: before adding `entry`, drop from the end every entry with an
// epoch
// >= the new one or a start offset >= the new one, so that both columns stay strictly increasing.
void drop_conflicting(std::vector<epoch_entry>& entries, const epoch_entry& entry) {
  while (!entries.empty() &&
         (entries.back().epoch >= entry.epoch || entries.back().start_offset >= entry.start_offset)) {
    entries.pop_back();
  }
}

// Kafka's isUpdateNeeded: the same epoch again at the same or a later offset changes nothing (every batch of
// a leader's term calls assign).
bool update_needed(const std::vector<epoch_entry>& entries, const epoch_entry& entry) {
  if (entries.empty()) return true;
  const auto& latest = entries.back();
  return entry.epoch != latest.epoch || entry.start_offset < latest.start_offset;
}

}  // namespace

result<leader_epoch_cache> leader_epoch_cache::load(const std::filesystem::path& partition_dir) {
  leader_epoch_cache cache;
  cache._path = (partition_dir / leader_epoch_checkpoint_file).string();
  auto entries = read_epoch_checkpoint(cache._path);
  if (!entries) return entries.error();
  // Replayed through the assign rules (as Kafka's constructor does), so a checkpoint with non-monotonic
  // entries loads as the cache that assigning them in order would have built.
  for (const auto& e : *entries) {
    if (e.epoch < 0 || e.start_offset < 0) {
      return status::error(error_code::kafka_storage_error, "invalid entry " + std::to_string(e.epoch) + " " +
                                                                std::to_string(e.start_offset) + " in " +
                                                                cache._path);
    }
    if (update_needed(cache._entries, e)) {
      drop_conflicting(cache._entries, e);
      cache._entries.push_back(e);
    }
  }
  return cache;
}

status leader_epoch_cache::assign(int32_t epoch, int64_t start_offset) {
  if (epoch < 0 || start_offset < 0) {
    return status::error(error_code::unknown_server_error, "invalid leader epoch entry (epoch " +
                                                               std::to_string(epoch) + ", start offset " +
                                                               std::to_string(start_offset) + ")");
  }
  epoch_entry entry{epoch, start_offset};
  if (!update_needed(_entries, entry)) return status::success();
  drop_conflicting(_entries, entry);
  _entries.push_back(entry);
  _changed = true;
  return status::success();
}

std::optional<epoch_entry> leader_epoch_cache::latest() const {
  if (_entries.empty()) return std::nullopt;
  return _entries.back();
}

std::optional<int32_t> leader_epoch_cache::latest_epoch() const {
  if (_entries.empty()) return std::nullopt;
  return _entries.back().epoch;
}

epoch_end_offset leader_epoch_cache::end_offset_for_epoch(int32_t requested_epoch,
                                                          int64_t log_end_offset) const {
  // A bootstrapping follower (or an old message format) asks with UNDEFINED_EPOCH.
  if (requested_epoch == undefined_epoch) return {undefined_epoch, undefined_epoch_offset};
  // The leader's current epoch is still being written: it ends at the log end offset.
  if (!_entries.empty() && _entries.back().epoch == requested_epoch) return {requested_epoch, log_end_offset};
  auto higher = std::upper_bound(_entries.begin(), _entries.end(), requested_epoch,
                                 [](int32_t epoch, const epoch_entry& e) { return epoch < e.epoch; });
  // Larger than every known epoch (or an empty cache): nothing to say.
  if (higher == _entries.end()) return {undefined_epoch, undefined_epoch_offset};
  // Smaller than every known epoch: Kafka answers with the requested epoch and the start of the first known
  // one, so the follower truncates to where the leader's retained history begins.
  if (higher == _entries.begin()) return {requested_epoch, higher->start_offset};
  auto floor = std::prev(higher);
  return {floor->epoch, higher->start_offset};
}

std::optional<int32_t> leader_epoch_cache::epoch_for_offset(int64_t offset) const {
  std::optional<int32_t> previous;
  for (const auto& e : _entries) {
    if (e.start_offset > offset) break;
    previous = e.epoch;
  }
  return previous;
}

status leader_epoch_cache::truncate_from_end(int64_t end_offset) {
  if (end_offset < 0 || _entries.empty() || _entries.back().start_offset < end_offset)
    return status::success();
  while (!_entries.empty() && _entries.back().start_offset >= end_offset) _entries.pop_back();
  _changed = true;
  return status::success();
}

status leader_epoch_cache::truncate_from_start(int64_t start_offset) {
  // Kafka's truncateFromStart is exclusive: entries starting at or before start_offset go, and the last of
  // them comes back starting at start_offset (its epoch still covers the new first offset).
  auto first_kept = std::find_if(_entries.begin(), _entries.end(),
                                 [&](const epoch_entry& e) { return e.start_offset > start_offset; });
  if (first_kept == _entries.begin()) return status::success();
  epoch_entry moved{std::prev(first_kept)->epoch, start_offset};
  // Nothing changes when only the first entry is kept and already starts there (every open of a log whose
  // start has not moved): skip the rewrite and its fsyncs, as Kafka does.
  if (first_kept == std::next(_entries.begin()) && _entries.front() == moved) return status::success();
  _entries.erase(_entries.begin(), first_kept);
  _entries.insert(_entries.begin(), moved);
  _changed = true;
  return status::success();
}

status leader_epoch_cache::clear() {
  _entries.clear();
  _changed = true;
  return status::success();
}

status leader_epoch_cache::write(file_sync durability) {
  if (!_changed && !handed_out_write_pending()) return status::success();
  return persist(durability);
}

bool leader_epoch_cache::handed_out_write_pending() const {
  std::lock_guard lock(_order->mutex);
  return _handed_out_generation > _order->written;
}

status leader_epoch_cache::sync() {
  // A write handed out that has not run (a flush dropped at shutdown) is done here, in order.
  if (!_changed && !_unsynced && !handed_out_write_pending()) return status::success();
  return persist(file_sync::now);
}

std::optional<std::filesystem::path> leader_epoch_cache::take_unsynced() {
  if (!_unsynced) return std::nullopt;
  _unsynced = false;
  return std::filesystem::path(_path);
}

std::optional<leader_epoch_cache::pending_write> leader_epoch_cache::take_pending_write() {
  if (!_changed) return std::nullopt;
  pending_write out;
  out._path = _path;
  out._entries = _entries;
  out._order = _order;
  {
    std::lock_guard lock(_order->mutex);
    out._generation = _order->next++;
  }
  _changed = false;
  _unsynced = false;
  _handed_out_generation = out._generation;
  return out;
}

status leader_epoch_cache::pending_write::run() const {
  std::lock_guard lock(_order->mutex);
  if (_generation < _order->written) return status::success();  // a newer checkpoint is on disk
  auto st = write_epoch_checkpoint(_path, _entries, file_sync::now);
  if (st.ok()) _order->written = _generation;
  return st;
}

status leader_epoch_cache::persist(file_sync durability) {
  // In order with the writes taken by take_pending_write() that may still be running elsewhere.
  std::lock_guard lock(_order->mutex);
  const uint64_t generation = _order->next++;
  auto st = write_epoch_checkpoint(_path, _entries, durability);
  if (st.ok()) _order->written = generation;
  if (st.ok()) {
    _changed = false;
    _unsynced = durability == file_sync::later;
  }
  return st;
}

}  // namespace mala::storage
