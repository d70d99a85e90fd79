// Which shard owns each partition replica: its log, replica state, producer state and waiters are touched
// only there, and whoever works on a partition (a Produce, Fetch, ListOffsets or DeleteRecords handler, the
// follower fetcher, the ISR changes, retention and flushes, the metadata publisher) hops to that shard first.
// The one lookup every per-partition path goes through.
//
// Partitions are placed by this node, balanced by the count it hosts on each shard (issue 20):
// - one shard: shard 0;
// - the internal topics of the coordinators (names starting with "__": __consumer_offsets,
//   __transaction_state) live on the home shard, shard 0, with the coordinators that append to and replay
//   them; they are not counted;
// - every other partition is placed when its log is loaded at start-up or when the metadata first gives
//   this node a replica of it, on the shard with the fewest partitions placed (ties go round-robin).
//   Balancing what this node hosts, not the cluster's partition numbers: a node holding every other
//   partition of a topic still spreads them over all its shards;
// - a partition whose log is removed is released: its count is given back, but lookups still lead to its
//   shard (a request or task in flight for it finds nothing there), and placing it again (a topic re-created
//   under its name) takes it back there. Released partitions are dropped only when a full table is
//   replaced; code that hopped to a partition's shard uses that shard's replicas, never a second lookup;
// - a partition never placed (this node has no log of it: a request for a partition hosted elsewhere) gets
//   (hash of the topic + partition) modulo the shard count, where it finds no replica.
//
// Threads: shard_of() from any thread, without a lock: it reads the placement's table generation (written
// only when a table is replaced) and probes an open addressing table of 64-bit partition hashes that the
// thread holds since its last lookup. place() and release() from one thread at a time (the home shard's
// metadata publisher, or the node before its shards run): they write the table in place; a table past half
// full is replaced by a new one, and the old one is freed once no thread holds it. Copies share one
// placement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "mala/storage/segment_files.h"

namespace mala::replication {

using storage::topic_partition;

class replica_placement {
 public:
  replica_placement() = default;  // one shard
  explicit replica_placement(size_t shard_count);

  size_t shard_count() const { return _state ? _shard_count : 1; }
  size_t shard_of(const topic_partition& tp) const { return shard_of(tp.topic, tp.partition); }
  size_t shard_of(std::string_view topic, int32_t partition) const;

  // Places the partition if it is not placed yet (see above); returns its shard.
  size_t place(const topic_partition& tp);
  // The partition's log is gone: its count is given back (see above).
  void release(const topic_partition& tp);
  // The partitions placed on each shard (internal topics not counted). From the placing thread.
  std::vector<size_t> placed_per_shard() const;

 private:
  struct state;
  size_t _shard_count = 1;
  std::shared_ptr<state> _state;  // null with one shard
};

}  // namespace mala::replication
