#include "mala/storage/time_index.h"

#include <limits>
#include <string>

#include "index_file.h"
#include "mala/common/assert.h"
#include "mala/storage/segment_files.h"

namespace mala::storage {

namespace {

constexpr int64_t max_relative_offset = std::numeric_limits<int32_t>::max();

status invariant_error(const std::string& what, const std::filesystem::path& path) {
  return status::error(error_code::unknown_server_error, what + " (time index " + path.string() + ")");
}

}  // namespace

struct time_index::impl {
  detail::index_file file;
  int64_t base_offset = 0;

  int64_t timestamp(int32_t n) const { return detail::load_be64(file.slot(n)); }
  int32_t relative(int32_t n) const { return detail::load_be32(file.slot(n) + 8); }
  timestamp_offset at(int32_t n) const { return {timestamp(n), base_offset + relative(n)}; }
  timestamp_offset last() const {
    return file.entries() == 0 ? timestamp_offset{-1, base_offset} : at(file.entries() - 1);
  }

  // The last slot whose key (timestamp, or relative offset) is <= target, or -1; see offset_index.
  template <typename Key>
  int32_t largest_lower_bound(int64_t target, Key key) const {
    const int32_t n = file.entries();
    if (n == 0 || key(0) > target) return -1;
    int32_t lo = 0;
    int32_t len = n;
    while (len > 1) {
      const int32_t half = len / 2;
      lo = key(lo + half) <= target ? lo + half : lo;
      len -= half;
    }
    return lo;
  }
};

result<std::unique_ptr<time_index>> time_index::open(const std::filesystem::path& path, int64_t base_offset,
                                                     int32_t max_index_size, bool writable) {
  std::unique_ptr<time_index> index(new time_index());
  index->_impl = std::make_unique<impl>();
  index->_impl->base_offset = base_offset;
  if (auto s = index->_impl->file.open(path, time_index_entry_size, max_index_size, writable); !s.ok())
    return s;
  return index;
}

time_index::~time_index() = default;

timestamp_offset time_index::lookup(int64_t target_timestamp) const {
  const int32_t slot =
      _impl->largest_lower_bound(target_timestamp, [this](int32_t n) { return _impl->timestamp(n); });
  if (slot < 0) return {-1, _impl->base_offset};
  return _impl->at(slot);
}

status time_index::maybe_append(int64_t timestamp, int64_t offset, bool skip_full_check) {
  auto& f = _impl->file;
  if (!skip_full_check && is_full()) {
    return invariant_error("append to a full time index (" + std::to_string(f.entries()) + " entries)",
                           f.path());
  }
  const timestamp_offset last = _impl->last();
  // Kafka appends only a larger timestamp: the entries say "up to this offset, nothing is later than this".
  // Re-adding the last entry happens on every roll and close and is not an error.
  if (timestamp <= last.timestamp) return status::success();
  if (f.entries() != 0 && offset < last.offset) {
    return invariant_error("time index append of offset " + std::to_string(offset) +
                               " below the last offset " + std::to_string(last.offset),
                           f.path());
  }
  const int64_t relative = offset - _impl->base_offset;
  if (relative < 0 || relative > max_relative_offset) {
    return invariant_error("offset " + std::to_string(offset) + " outside the 32-bit range of base offset " +
                               std::to_string(_impl->base_offset),
                           f.path());
  }
  if (f.entries() >= f.max_entries()) {
    // Only with skip_full_check: the roll/close entry for an index already trimmed to its entries.
    if (auto s = f.resize(int64_t{f.entries() + 1} * time_index_entry_size); !s.ok()) return s;
  }
  if (auto s = f.reserve(f.entries() + 1); !s.ok()) return s;
  uint8_t* slot = f.slot(f.entries());
  detail::store_be64(slot, timestamp);
  detail::store_be32(slot + 8, static_cast<int32_t>(relative));
  f.push_entry();
  return status::success();
}

std::function<void()> time_index::reservation_ahead() {
  return _impl->file.reservation_ahead();
}

bool time_index::next_entry_reserved() const {
  return _impl->file.reserved_for(_impl->file.entries() + 1);
}

status time_index::reserve_next() {
  return _impl->file.reserve(_impl->file.entries() + 1);
}
bool time_index::is_full() const {
  return _impl->file.entries() >= _impl->file.max_entries() - 1;
}
int32_t time_index::entries() const {
  return _impl->file.entries();
}
int32_t time_index::max_entries() const {
  return _impl->file.max_entries();
}

timestamp_offset time_index::entry(int32_t n) const {
  MALA_ASSERT(n >= 0 && n < _impl->file.entries(), "entry {} out of range in index {}", n, path());
  return _impl->at(n);
}

std::optional<timestamp_offset> time_index::last_entry() const {
  if (_impl->file.entries() == 0) return std::nullopt;
  return _impl->last();
}

void time_index::truncate_to(int64_t offset) {
  // Offsets in the time index never decrease, so the entries to keep are a prefix.
  const int64_t target = offset - 1 - _impl->base_offset;
  const int32_t keep = target < 0 ? 0 : _impl->largest_lower_bound(target, [this](int32_t n) {
    return int64_t{_impl->relative(n)};
  }) + 1;
  _impl->file.truncate_to_entries(keep);
}

void time_index::truncate_all() {
  _impl->file.truncate_to_entries(0);
}

status time_index::trim_to_entries() {
  return _impl->file.resize(int64_t{_impl->file.entries()} * time_index_entry_size);
}

bool time_index::sized_for(int32_t max_index_size) const {
  return _impl->file.sized_for(max_index_size);
}

status time_index::resize(int32_t max_index_size) {
  return _impl->file.resize(max_index_size);
}

status time_index::flush() {
  return _impl->file.flush();
}

status time_index::sanity_check() const {
  const auto& f = _impl->file;
  if (f.misaligned_on_open() || f.length() % time_index_entry_size != 0) {
    return status::error(error_code::corrupt_message, "time index " + f.path() +
                                                          " is corrupt: its size is not a multiple of " +
                                                          std::to_string(time_index_entry_size));
  }
  for (int32_t i = 0; i < f.entries(); ++i) {
    const int32_t relative = _impl->relative(i);
    const bool bad_offset = relative < 0 || (i > 0 && relative < _impl->relative(i - 1));
    const bool bad_timestamp = i > 0 && _impl->timestamp(i) <= _impl->timestamp(i - 1);
    if (bad_offset || bad_timestamp) {
      return status::error(
          error_code::corrupt_message,
          "time index " + f.path() + " is corrupt: entry " + std::to_string(i) + " (timestamp " +
              std::to_string(_impl->timestamp(i)) + ", offset " +
              std::to_string(_impl->base_offset + relative) +
              ") has a timestamp or offset out of order, or an offset below the base offset " +
              std::to_string(_impl->base_offset));
    }
  }
  return status::success();
}

int64_t time_index::base_offset() const {
  return _impl->base_offset;
}
const std::string& time_index::path() const {
  return _impl->file.path();
}
status time_index::rename_to(const std::filesystem::path& path) {
  return _impl->file.rename_to(path);
}
int64_t time_index::trim_to_entries_later() {
  return _impl->file.trim_later();
}
void time_index::set_path(std::string path) {
  _impl->file.set_path(std::move(path));
}
void time_index::rebase(int64_t base_offset) {
  MALA_ASSERT(_impl->file.entries() == 0, "rebase of index {} with entries", path());
  _impl->base_offset = base_offset;
}
status time_index::close_and_delete() {
  return _impl->file.close_and_delete();
}

}  // namespace mala::storage
