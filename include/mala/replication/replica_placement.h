// Which shard owns each partition replica: its log, replica state, producer state and waiters are touched
// only there, and whoever works on a partition (a Produce, Fetch, ListOffsets or DeleteRecords handler, the
// follower fetcher, the ISR changes, retention and flushes, the metadata publisher) hops to that shard first.
// The one lookup every per-partition path goes through.
//
// The placement is a pure function of the partition and the shard count, so every thread computes it without
// a table or a lock, and a partition stays on its shard for as long as the process runs:
// - one shard: shard 0;
// - the internal topics of the coordinators (names starting with "__": __consumer_offsets,
//   __transaction_state) live on the home shard, shard 0, with the coordinators that append to and replay
//   them;
// - every other partition: (hash of the topic name + partition) modulo the shard count, so the partitions of
//   one topic go round-robin over the shards starting at a shard that depends on the topic (balanced by
//   partition count within each topic, and across topics by the hash).
//
// Threads: pure; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "mala/storage/segment_files.h"

namespace mala::replication {

using storage::topic_partition;

class replica_placement {
 public:
  replica_placement() = default;  // one shard
  explicit replica_placement(size_t shard_count) : _shard_count(shard_count == 0 ? 1 : shard_count) {}

  size_t shard_count() const { return _shard_count; }
  size_t shard_of(const topic_partition& tp) const { return shard_of(tp.topic, tp.partition); }
  size_t shard_of(std::string_view topic, int32_t partition) const {
    if (_shard_count == 1 || topic.starts_with("__")) return 0;
    // FNV-1a of the name: stable across runs and platforms (std::hash is neither promised).
    uint64_t hash = 14695981039346656037ull;
    for (const char c : topic) {
      hash ^= static_cast<uint8_t>(c);
      hash *= 1099511628211ull;
    }
    return static_cast<size_t>((hash + static_cast<uint64_t>(static_cast<uint32_t>(partition))) %
                               _shard_count);
  }

 private:
  size_t _shard_count = 1;
};

}  // namespace mala::replication
