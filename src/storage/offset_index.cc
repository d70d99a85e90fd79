#include "mala/storage/offset_index.h"

#include <algorithm>
#include <limits>
#include <string>

#include "index_file.h"
#include "mala/common/assert.h"
#include "mala/storage/segment_files.h"

namespace mala::storage {

namespace {

constexpr int64_t max_relative_offset = std::numeric_limits<int32_t>::max();

status invariant_error(const std::string& what, const std::filesystem::path& path) {
  return status::error(error_code::unknown_server_error, what + " (index " + path.string() + ")");
}

}  // namespace

struct offset_index::impl {
  detail::index_file file;
  int64_t base_offset = 0;
  int64_t last_offset = 0;  // of the last entry, or the base offset when empty (Kafka's lastOffset)

  int32_t relative(int32_t n) const { return detail::load_be32(file.slot(n)); }
  int32_t position(int32_t n) const { return detail::load_be32(file.slot(n) + 4); }
  offset_position at(int32_t n) const { return {base_offset + relative(n), position(n)}; }

  // The last slot whose relative offset is <= target, or -1. A branch-free halving search: the loop runs
  // log2(entries) times whatever the data, and the compare compiles to a conditional move.
  int32_t largest_lower_bound(int64_t target_relative) const {
    const int32_t n = file.entries();
    if (n == 0 || target_relative < 0) return -1;
    const auto t = static_cast<int32_t>(std::min(target_relative, max_relative_offset));
    if (relative(0) > t) return -1;
    int32_t lo = 0;
    int32_t len = n;
    while (len > 1) {
      const int32_t half = len / 2;
      // Both candidates for the next probe: on a 10 MiB index the early probes miss the caches and the TLB,
      // and fetching the next level while this compare resolves roughly halves a lookup.
      __builtin_prefetch(file.slot(lo + half / 2));
      __builtin_prefetch(file.slot(lo + half + half / 2));
      lo = relative(lo + half) <= t ? lo + half : lo;
      len -= half;
    }
    return lo;
  }

  void refresh_last() { last_offset = file.entries() == 0 ? base_offset : at(file.entries() - 1).offset; }
};

result<std::unique_ptr<offset_index>> offset_index::open(const std::filesystem::path& path,
                                                         int64_t base_offset, int32_t max_index_size,
                                                         bool writable) {
  std::unique_ptr<offset_index> index(new offset_index());
  index->_impl = std::make_unique<impl>();
  index->_impl->base_offset = base_offset;
  if (auto s = index->_impl->file.open(path, offset_index_entry_size, max_index_size, writable); !s.ok())
    return s;
  index->_impl->refresh_last();
  return index;
}

offset_index::~offset_index() = default;

offset_position offset_index::lookup(int64_t target_offset) const {
  const int32_t slot = _impl->largest_lower_bound(target_offset - _impl->base_offset);
  if (slot < 0) return {_impl->base_offset, 0};
  return _impl->at(slot);
}

status offset_index::append(int64_t offset, int64_t position) {
  auto& f = _impl->file;
  if (is_full()) {
    return invariant_error("append to a full offset index (" + std::to_string(f.entries()) + " entries)",
                           f.path());
  }
  if (f.entries() != 0 && offset <= _impl->last_offset) {
    return invariant_error("offset index append of offset " + std::to_string(offset) +
                               " not above the last offset " + std::to_string(_impl->last_offset),
                           f.path());
  }
  const int64_t relative = offset - _impl->base_offset;
  if (relative < 0 || relative > max_relative_offset) {
    return invariant_error("offset " + std::to_string(offset) + " outside the 32-bit range of base offset " +
                               std::to_string(_impl->base_offset),
                           f.path());
  }
  if (position < 0 || position > std::numeric_limits<int32_t>::max()) {
    return invariant_error("offset index position " + std::to_string(position) + " does not fit 32 bits",
                           f.path());
  }
  if (auto s = f.reserve(f.entries() + 1); !s.ok()) return s;
  uint8_t* slot = f.slot(f.entries());
  detail::store_be32(slot, static_cast<int32_t>(relative));
  detail::store_be32(slot + 4, static_cast<int32_t>(position));
  f.push_entry();
  _impl->last_offset = offset;
  return status::success();
}

std::function<void()> offset_index::reservation_ahead() {
  return _impl->file.reservation_ahead();
}

bool offset_index::next_entry_reserved() const {
  return _impl->file.reserved_for(_impl->file.entries() + 1);
}

status offset_index::reserve_next() {
  return _impl->file.reserve(_impl->file.entries() + 1);
}
bool offset_index::is_full() const {
  return _impl->file.entries() >= _impl->file.max_entries();
}
int32_t offset_index::entries() const {
  return _impl->file.entries();
}
int32_t offset_index::max_entries() const {
  return _impl->file.max_entries();
}

offset_position offset_index::entry(int32_t n) const {
  MALA_ASSERT(n >= 0 && n < _impl->file.entries(), "entry {} out of range in index {}", n, path());
  return _impl->at(n);
}

std::optional<offset_position> offset_index::last_entry() const {
  if (_impl->file.entries() == 0) return std::nullopt;
  return _impl->at(_impl->file.entries() - 1);
}

void offset_index::truncate_to(int64_t offset) {
  // Keep the entries below `offset`: the first slot to drop follows the last one whose offset is <= offset
  // - 1.
  const int32_t keep = _impl->largest_lower_bound(offset - 1 - _impl->base_offset) + 1;
  _impl->file.truncate_to_entries(keep);
  _impl->refresh_last();
}

void offset_index::truncate_all() {
  _impl->file.truncate_to_entries(0);
  _impl->refresh_last();
}

status offset_index::trim_to_entries() {
  return _impl->file.resize(int64_t{_impl->file.entries()} * offset_index_entry_size);
}

bool offset_index::sized_for(int32_t max_index_size) const {
  return _impl->file.sized_for(max_index_size);
}

status offset_index::resize(int32_t max_index_size) {
  return _impl->file.resize(max_index_size);
}

status offset_index::flush() {
  return _impl->file.flush();
}

status offset_index::sanity_check() const {
  const auto& f = _impl->file;
  if (f.misaligned_on_open() || f.length() % offset_index_entry_size != 0) {
    return status::error(error_code::corrupt_message, "index " + f.path() +
                                                          " is corrupt: its size is not a multiple of " +
                                                          std::to_string(offset_index_entry_size));
  }
  int32_t previous_relative = -1;
  int32_t previous_position = 0;
  for (int32_t i = 0; i < f.entries(); ++i) {
    const int32_t relative = _impl->relative(i);
    const int32_t position = _impl->position(i);
    if (relative <= previous_relative || position < previous_position) {
      return status::error(error_code::corrupt_message,
                           "index " + f.path() + " is corrupt: entry " + std::to_string(i) + " (offset " +
                               std::to_string(_impl->base_offset + relative) + ", position " +
                               std::to_string(position) + ") is out of order or below the base offset " +
                               std::to_string(_impl->base_offset));
    }
    previous_relative = relative;
    previous_position = position;
  }
  return status::success();
}

int64_t offset_index::base_offset() const {
  return _impl->base_offset;
}
const std::string& offset_index::path() const {
  return _impl->file.path();
}
status offset_index::rename_to(const std::filesystem::path& path) {
  return _impl->file.rename_to(path);
}
int64_t offset_index::trim_to_entries_later() {
  return _impl->file.trim_later();
}
void offset_index::set_path(std::string path) {
  _impl->file.set_path(std::move(path));
}
void offset_index::rebase(int64_t base_offset) {
  MALA_ASSERT(_impl->file.entries() == 0, "rebase of index {} with entries", path());
  _impl->base_offset = base_offset;
  _impl->refresh_last();
}

status offset_index::close_and_delete() {
  auto s = _impl->file.close_and_delete();
  _impl->refresh_last();
  return s;
}

}  // namespace mala::storage
