#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "mala/raft/log.h"

namespace mala::raft {

namespace {

[[noreturn]] void log_misuse(const char* what, long long a, long long b) {
  // The replica only appends what continues the log and truncates above the high watermark; anything else is
  // a bug in the caller, and writing on would corrupt the log.
  std::fprintf(stderr, "memory_raft_log: %s (%lld, %lld)\n", what, a, b);
  std::abort();
}

}  // namespace

offset_and_epoch memory_raft_log::end_offset_for_epoch(int32_t epoch) const {
  for (size_t i = _epochs.size(); i-- > 0;) {
    if (_epochs[i].epoch <= epoch) {
      const int64_t end = i + 1 < _epochs.size() ? _epochs[i + 1].start_offset : end_offset();
      return {end, _epochs[i].epoch};
    }
  }
  return {start_offset(), 0};
}

std::vector<log_entry> memory_raft_log::read(int64_t from_offset, size_t max_entries) const {
  std::vector<log_entry> out;
  if (from_offset < start_offset() || from_offset >= end_offset()) return out;
  const size_t first = static_cast<size_t>(from_offset);
  const size_t last = std::min(_entries.size(), first + max_entries);
  out.assign(_entries.begin() + static_cast<std::ptrdiff_t>(first),
             _entries.begin() + static_cast<std::ptrdiff_t>(last));
  return out;
}

void memory_raft_log::append(std::span<const log_entry> entries) {
  for (const log_entry& e : entries) {
    if (e.offset != end_offset())
      log_misuse("append offset does not continue the log", e.offset, end_offset());
    if (e.epoch < last_fetched_epoch())
      log_misuse("append epoch goes backwards", e.epoch, last_fetched_epoch());
    if (_epochs.empty() || _epochs.back().epoch != e.epoch) _epochs.push_back({e.epoch, e.offset});
    _entries.push_back(e);
  }
}

void memory_raft_log::truncate_to(int64_t offset) {
  if (offset < start_offset()) log_misuse("truncation below the log start", offset, start_offset());
  if (offset >= end_offset()) return;
  _entries.resize(static_cast<size_t>(offset));
  while (!_epochs.empty() && _epochs.back().start_offset >= offset) _epochs.pop_back();
}

}  // namespace mala::raft
