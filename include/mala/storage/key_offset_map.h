// The log cleaner's dedupe map (Kafka's SkimpyOffsetMap): record key -> offset of the key's latest record in
// the dirty part of a log, in a fixed block of memory (log.cleaner.dedupe.buffer.size divided among the
// cleaner threads). A key is never held: each entry is the key's 128-bit hash (XXH3) and an offset, 24 bytes,
// so two keys whose hashes collide count as one (as in Kafka, which keeps an MD5). Open addressing with
// linear probing; the map takes keys up to load_factor of its slots (log.cleaner.io.buffer.load.factor, 0.9)
// and then refuses new ones, which ends the cleaning round at the last offset it covers.
//
// The memory is an anonymous mapping: the kernel backs only the pages entries touch, and clear() hands them
// back (madvise MADV_DONTNEED), so a cleaner thread between rounds holds none of it.
//
// Threads: one cleaner thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace mala::storage {

class key_offset_map {
 public:
  static constexpr size_t bytes_per_entry = 24;

  // A map of memory_bytes / 24 slots that takes up to load_factor of them (at least one key).
  explicit key_offset_map(size_t memory_bytes, double load_factor = 0.9);
  ~key_offset_map();
  key_offset_map(const key_offset_map&) = delete;
  key_offset_map& operator=(const key_offset_map&) = delete;

  size_t slots() const { return _slots; }
  // How many distinct keys the map takes.
  size_t capacity() const { return _capacity; }
  size_t size() const { return _size; }
  // No new key fits (an update of a key already in the map still does).
  bool full() const { return _size >= _capacity; }
  double utilization() const {
    return _slots == 0 ? 0.0 : static_cast<double>(_size) / static_cast<double>(_slots);
  }

  // Records `offset` (>= 0) as the latest offset of `key` and as the latest offset put. False, changing
  // nothing, when the key is new and the map is full.
  bool put(std::span<const uint8_t> key, int64_t offset);
  // The offset recorded for `key`, -1 if none.
  int64_t get(std::span<const uint8_t> key) const;

  // The last offset the map covers: the last put, or what the cleaner set after a batch or segment it read
  // whole (offsets without a keyed record count as covered).
  int64_t latest_offset() const { return _latest_offset; }
  void set_latest_offset(int64_t offset) { _latest_offset = offset; }

  // Empties the map (latest_offset -1).
  void clear();

 private:
  struct entry {
    uint64_t hash_low;
    uint64_t hash_high;
    int64_t offset_plus_one;  // 0: an empty slot
  };
  static_assert(sizeof(entry) == bytes_per_entry);

  entry* _entries = nullptr;
  size_t _mapped_bytes = 0;
  size_t _slots = 0;
  size_t _capacity = 0;
  size_t _size = 0;
  int64_t _latest_offset = -1;
};

}  // namespace mala::storage
