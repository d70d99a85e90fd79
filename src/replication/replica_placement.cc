#include "mala/replication/replica_placement.h"

#include <atomic>
#include <bit>
#include <functional>
#include <unordered_map>

namespace mala::replication {
namespace {

bool is_internal(std::string_view topic) {
  return topic.starts_with("__");
}

// FNV-1a of the name: stable across runs and platforms (std::hash is neither promised).
uint64_t topic_hash(std::string_view topic) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : topic) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

// The table's key of a partition: never 0 (an empty slot).
uint64_t partition_key(std::string_view topic, int32_t partition) {
  uint64_t x =
      topic_hash(topic) ^ (static_cast<uint64_t>(static_cast<uint32_t>(partition)) * 0x9e3779b97f4a7c15ull);
  // splitmix64's finalizer: every bit of the key depends on every bit of the name and the number.
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x == 0 ? 1 : x;
}

constexpr uint8_t unplaced = 0xff;  // a slot without a shard
// Set on the shard of a key whose partitions were all released: lookups still find that shard, and placing
// the key again takes it back.
constexpr uint8_t released_flag = 0x80;
constexpr size_t min_capacity = 1024;

struct topic_partition_hash {
  size_t operator()(const topic_partition& tp) const {
    return static_cast<size_t>(partition_key(tp.topic, tp.partition));
  }
};

}  // namespace

// The table readers probe: linear probing over keys, each slot's shard beside it, never more than half full.
// Written in place by the placing thread only (a slot's shard is stored before its key, so a reader that sees
// the key sees a shard); a table past half full is replaced by a new one.
struct placement_table {
  placement_table(size_t capacity, uint64_t generation)
      : generation(generation),
        mask(capacity - 1),
        keys(std::make_unique<std::atomic<uint64_t>[]>(capacity)),
        shards(std::make_unique<std::atomic<uint8_t>[]>(capacity)) {
    for (size_t i = 0; i < capacity; ++i) {
      keys[i].store(0, std::memory_order_relaxed);
      shards[i].store(unplaced, std::memory_order_relaxed);
    }
  }
  size_t capacity() const { return mask + 1; }
  // The slot holding `key`, or the empty slot where it would go.
  size_t slot_of(uint64_t key) const {
    for (size_t i = static_cast<size_t>(key) & mask;; i = (i + 1) & mask) {
      const uint64_t k = keys[i].load(std::memory_order_acquire);
      if (k == key || k == 0) return i;
    }
  }

  const uint64_t generation;  // unique in the process: names this table in the readers' caches
  const size_t mask;
  std::unique_ptr<std::atomic<uint64_t>[]> keys;
  std::unique_ptr<std::atomic<uint8_t>[]> shards;
  size_t used = 0;  // slots with a key, placed or released (placing thread)
};

std::atomic<uint64_t> next_table_generation{1};

// Each thread's reference to the table it last probed: a lookup loads only the placement's generation (a
// cache line written when a table is replaced, rarely) and takes the table anew when it changed. A replaced
// table is freed once no thread's cache holds it (each thread holds at most one).
thread_local std::shared_ptr<const placement_table> probed_table;

struct replica_placement::state {
  std::atomic<uint64_t> generation{0};  // of `current`
  std::atomic<std::shared_ptr<const placement_table>> current;
  // The placing thread's side: the current table, the partitions placed and their keys, how many placed
  // partitions share each key (two partitions whose 64-bit keys collide share a shard), and the count on
  // each shard.
  std::shared_ptr<placement_table> table;
  std::unordered_map<topic_partition, uint64_t, topic_partition_hash> placed;
  std::unordered_map<uint64_t, uint32_t> key_users;
  std::vector<size_t> counts;
  size_t next = 0;  // where the search for the least loaded shard starts (ties go round-robin)

  // A table with room for one more key: a table past half full (released keys count) is replaced by one of
  // four times the live keys.
  void make_room() {
    if (table && (table->used + 1) * 2 <= table->capacity()) return;
    const size_t live = key_users.size() + 1;
    auto grown = std::make_shared<placement_table>(std::max(min_capacity, std::bit_ceil(live * 4)),
                                                   next_table_generation.fetch_add(1));
    if (table) {
      for (size_t i = 0; i < table->capacity(); ++i) {
        const uint64_t key = table->keys[i].load(std::memory_order_relaxed);
        const uint8_t shard = table->shards[i].load(std::memory_order_relaxed);
        if (key == 0 || shard == unplaced || (shard & released_flag) != 0) continue;
        const size_t at = grown->slot_of(key);
        grown->shards[at].store(shard, std::memory_order_relaxed);
        grown->keys[at].store(key, std::memory_order_relaxed);
        ++grown->used;
      }
    }
    table = grown;
    current.store(grown, std::memory_order_release);
    generation.store(grown->generation, std::memory_order_release);
  }
};

replica_placement::replica_placement(size_t shard_count) : _shard_count(shard_count == 0 ? 1 : shard_count) {
  if (_shard_count == 1) return;
  _shard_count = std::min<size_t>(_shard_count, released_flag - 1);
  _state = std::make_shared<state>();
  _state->counts.assign(_shard_count, 0);
  _state->make_room();
}

size_t replica_placement::shard_of(std::string_view topic, int32_t partition) const {
  if (!_state || is_internal(topic)) return 0;
  const uint64_t key = partition_key(topic, partition);
  const uint64_t generation = _state->generation.load(std::memory_order_acquire);
  if (!probed_table || probed_table->generation != generation)
    probed_table = _state->current.load(std::memory_order_acquire);
  const placement_table& table = *probed_table;
  const size_t at = table.slot_of(key);
  if (table.keys[at].load(std::memory_order_acquire) == key) {
    const uint8_t shard = table.shards[at].load(std::memory_order_acquire);
    if (shard != unplaced) return shard & ~released_flag;
  }
  return static_cast<size_t>((topic_hash(topic) + static_cast<uint64_t>(static_cast<uint32_t>(partition))) %
                             _shard_count);
}

size_t replica_placement::place(const topic_partition& tp) {
  if (!_state || is_internal(tp.topic)) return 0;
  state& s = *_state;
  if (const auto it = s.placed.find(tp); it != s.placed.end()) {
    return s.table->shards[s.table->slot_of(it->second)].load(std::memory_order_relaxed);
  }
  const uint64_t key = partition_key(tp.topic, tp.partition);
  s.make_room();
  placement_table& t = *s.table;
  const size_t at = t.slot_of(key);
  uint8_t shard = t.keys[at].load(std::memory_order_relaxed) == key
                      ? t.shards[at].load(std::memory_order_relaxed)
                      : unplaced;
  if (shard != unplaced && (shard & released_flag) != 0) {
    // Placed before and released: back on its shard (whatever may still be in flight for the partition's
    // previous life went there).
    shard &= ~released_flag;
    t.shards[at].store(shard, std::memory_order_release);
  } else if (shard == unplaced) {
    // The least loaded shard, searched from the one after the last chosen.
    size_t best = s.next % _shard_count;
    for (size_t i = 1; i < _shard_count; ++i) {
      const size_t candidate = (s.next + i) % _shard_count;
      if (s.counts[candidate] < s.counts[best]) best = candidate;
    }
    shard = static_cast<uint8_t>(best);
    s.next = best + 1;
    t.shards[at].store(shard, std::memory_order_release);
    if (t.keys[at].load(std::memory_order_relaxed) != key) {
      t.keys[at].store(key, std::memory_order_release);
      ++t.used;
    }
  }
  s.placed.emplace(tp, key);
  ++s.key_users[key];
  ++s.counts[shard];
  return shard;
}

void replica_placement::release(const topic_partition& tp) {
  if (!_state || is_internal(tp.topic)) return;
  state& s = *_state;
  const auto it = s.placed.find(tp);
  if (it == s.placed.end()) return;
  const uint64_t key = it->second;
  s.placed.erase(it);
  placement_table& t = *s.table;
  const size_t at = t.slot_of(key);
  const uint8_t shard = t.shards[at].load(std::memory_order_relaxed);
  if (shard < s.counts.size() && s.counts[shard] > 0) --s.counts[shard];
  if (--s.key_users[key] == 0) {
    s.key_users.erase(key);
    // The key and its shard stay (lookups of the partition still lead there) until a table replaces this one.
    t.shards[at].store(static_cast<uint8_t>(shard | released_flag), std::memory_order_release);
  }
}

std::vector<size_t> replica_placement::placed_per_shard() const {
  if (!_state) return {0};
  return _state->counts;
}

}  // namespace mala::replication
