#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "mala/common/assert.h"
#include "mala/raft/log.h"

namespace mala::raft {

offset_and_epoch memory_raft_log::end_offset_for_epoch(int32_t epoch) const {
  for (size_t i = _epochs.size(); i-- > 0;) {
    if (_epochs[i].epoch <= epoch) {
      const int64_t end = i + 1 < _epochs.size() ? _epochs[i + 1].start_offset : end_offset();
      return {end, _epochs[i].epoch};
    }
  }
  // No held entry of `epoch` or before: the snapshot at the log start ends there (KafkaMetadataLog's
  // override with the earliest snapshot id); {0, 0} for a log that starts at 0.
  return {_start_offset, _start_epoch};
}

std::vector<log_entry> memory_raft_log::read(int64_t from_offset, size_t max_entries) const {
  std::vector<log_entry> out;
  if (from_offset < start_offset() || from_offset >= end_offset()) return out;
  const size_t first = static_cast<size_t>(from_offset - _start_offset);
  const size_t last = std::min(_entries.size(), first + max_entries);
  out.assign(_entries.begin() + static_cast<std::ptrdiff_t>(first),
             _entries.begin() + static_cast<std::ptrdiff_t>(last));
  return out;
}

void memory_raft_log::append(std::span<const log_entry> entries) {
  for (const log_entry& e : entries) {
    MALA_ASSERT(e.offset == end_offset(), "append at offset {} does not continue the log at {}", e.offset,
                end_offset());
    MALA_ASSERT(e.epoch >= last_fetched_epoch(), "append epoch {} goes back from {}", e.epoch,
                last_fetched_epoch());
    if (_epochs.empty() || _epochs.back().epoch != e.epoch) _epochs.push_back({e.epoch, e.offset});
    _entries.push_back(e);
  }
}

void memory_raft_log::truncate_to(int64_t offset) {
  MALA_ASSERT(offset >= start_offset(), "truncation to {} below the log start {}", offset, start_offset());
  if (offset >= end_offset()) return;
  _entries.resize(static_cast<size_t>(offset - _start_offset));
  while (!_epochs.empty() && _epochs.back().start_offset >= offset) _epochs.pop_back();
}

std::optional<offset_and_epoch> memory_raft_log::latest_snapshot() const {
  if (_snapshots.empty()) return std::nullopt;
  return _snapshots.back().id;
}

std::optional<std::vector<uint8_t>> memory_raft_log::read_snapshot(offset_and_epoch id) const {
  for (const snapshot& s : _snapshots) {
    if (s.id == id) return s.payload;
  }
  return std::nullopt;
}

std::optional<snapshot_chunk> memory_raft_log::read_snapshot_chunk(offset_and_epoch id, int64_t position,
                                                                   int64_t max_bytes) const {
  for (const snapshot& s : _snapshots) {
    if (s.id != id) continue;
    snapshot_chunk chunk;
    chunk.size = static_cast<int64_t>(s.payload.size());
    if (position >= 0 && position < chunk.size && max_bytes > 0) {
      const int64_t n = std::min(max_bytes, chunk.size - position);
      chunk.bytes.assign(s.payload.begin() + position, s.payload.begin() + position + n);
    }
    return chunk;
  }
  return std::nullopt;
}

bool memory_raft_log::write_snapshot(offset_and_epoch id, std::span<const uint8_t> payload) {
  if (id.offset < _start_offset || id.offset > end_offset() || id.epoch < 0) return false;
  const int32_t epoch_before = id.offset == _start_offset ? _start_epoch : entry_at(id.offset - 1)->epoch;
  if (id.epoch != epoch_before) return false;
  const auto at = std::find_if(_snapshots.begin(), _snapshots.end(),
                               [&](const snapshot& s) { return s.id.offset >= id.offset; });
  if (at != _snapshots.end() && at->id == id) {
    at->payload.assign(payload.begin(), payload.end());
    return true;
  }
  _snapshots.insert(at, snapshot{id, std::vector<uint8_t>(payload.begin(), payload.end())});
  return true;
}

void memory_raft_log::delete_before(int64_t offset) {
  if (_snapshots.empty()) return;
  offset = std::min({offset, _snapshots.back().id.offset, end_offset()});
  if (offset <= _start_offset) return;
  const int32_t epoch_before = entry_at(offset - 1)->epoch;
  std::vector<epoch_start> kept;
  for (size_t i = 0; i < _epochs.size(); ++i) {
    const int64_t end = i + 1 < _epochs.size() ? _epochs[i + 1].start_offset : end_offset();
    if (end > offset) kept.push_back({_epochs[i].epoch, std::max(_epochs[i].start_offset, offset)});
  }
  _epochs = std::move(kept);
  _entries.erase(_entries.begin(), _entries.begin() + static_cast<std::ptrdiff_t>(offset - _start_offset));
  _start_offset = offset;
  _start_epoch = epoch_before;
  // Snapshots below the new log start are of no use any more (Kafka deletes them with the segments).
  std::erase_if(_snapshots, [&](const snapshot& s) { return s.id.offset < offset; });
}

void memory_raft_log::store_snapshot(offset_and_epoch id, std::vector<uint8_t> payload) {
  std::erase_if(_stored, [&](const snapshot& s) { return s.id == id; });
  _stored.push_back(snapshot{id, std::move(payload)});
}

bool memory_raft_log::install_stored_snapshot(offset_and_epoch id) {
  const auto it = std::find_if(_stored.begin(), _stored.end(), [&](const snapshot& s) { return s.id == id; });
  if (it == _stored.end()) return false;
  std::vector<uint8_t> payload = std::move(it->payload);
  _stored.erase(it);
  return install_snapshot(id, payload);
}

bool memory_raft_log::install_snapshot(offset_and_epoch id, std::span<const uint8_t> payload) {
  if (id.offset < 0 || id.epoch < 0) return false;
  _entries.clear();
  _epochs.clear();
  _start_offset = id.offset;
  _start_epoch = id.epoch;
  _snapshots.clear();
  _snapshots.push_back(snapshot{id, std::vector<uint8_t>(payload.begin(), payload.end())});
  return true;
}

}  // namespace mala::raft
