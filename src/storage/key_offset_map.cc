#include "mala/storage/key_offset_map.h"

#include <sys/mman.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>

#include "mala/common/assert.h"

namespace mala::storage {

key_offset_map::key_offset_map(size_t memory_bytes, double load_factor) {
  _slots = std::max<size_t>(memory_bytes / bytes_per_entry, 1);
  _capacity = std::clamp<size_t>(static_cast<size_t>(std::floor(static_cast<double>(_slots) * load_factor)),
                                 1, _slots);
  _mapped_bytes = _slots * bytes_per_entry;
  void* memory = ::mmap(nullptr, _mapped_bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  MALA_ASSERT(memory != MAP_FAILED, "cannot map {} bytes for the cleaner's key map", _mapped_bytes);
  _entries = static_cast<entry*>(memory);
}

key_offset_map::~key_offset_map() {
  if (_entries) ::munmap(_entries, _mapped_bytes);
}

bool key_offset_map::put(std::span<const uint8_t> key, int64_t offset) {
  const XXH128_hash_t h = XXH3_128bits(key.data(), key.size());
  size_t slot = static_cast<size_t>(h.low64 % _slots);
  // Every slot is probed at most once (a map whose capacity is all its slots can have none empty).
  for (size_t probes = 0; probes < _slots; ++probes) {
    entry& e = _entries[slot];
    if (e.offset_plus_one == 0) {
      if (full()) return false;
      e.hash_low = h.low64;
      e.hash_high = h.high64;
      e.offset_plus_one = offset + 1;
      ++_size;
      _latest_offset = offset;
      return true;
    }
    if (e.hash_low == h.low64 && e.hash_high == h.high64) {
      e.offset_plus_one = offset + 1;
      _latest_offset = offset;
      return true;
    }
    if (++slot == _slots) slot = 0;
  }
  return false;
}

int64_t key_offset_map::get(std::span<const uint8_t> key) const {
  const XXH128_hash_t h = XXH3_128bits(key.data(), key.size());
  size_t slot = static_cast<size_t>(h.low64 % _slots);
  // At most capacity <= slots entries are in use, so an empty slot ends every probe unless the map is
  // completely full; the bound covers that case.
  for (size_t probes = 0; probes < _slots; ++probes) {
    const entry& e = _entries[slot];
    if (e.offset_plus_one == 0) return -1;
    if (e.hash_low == h.low64 && e.hash_high == h.high64) return e.offset_plus_one - 1;
    if (++slot == _slots) slot = 0;
  }
  return -1;
}

void key_offset_map::clear() {
  if (_size > 0) ::madvise(_entries, _mapped_bytes, MADV_DONTNEED);
  _size = 0;
  _latest_offset = -1;
}

}  // namespace mala::storage
