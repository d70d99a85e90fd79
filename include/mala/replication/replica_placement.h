// Which shard owns each partition replica: its log, replica state and waiters are touched only there, and
// whoever works on a partition (a Produce, Fetch, ListOffsets or DeleteRecords handler, the follower fetcher,
// the ISR changes) hops to that shard first. The one lookup every per-partition path goes through.
//
// Today every partition lives on shard 0 (one replica_manager for the node); spreading them over the shards
// by hash changes shard_of and nothing else.
//
// Threads: pure; any thread.
#pragma once

#include <cstddef>

#include "mala/storage/segment_files.h"

namespace mala::replication {

using storage::topic_partition;

class replica_placement {
 public:
  size_t shard_of(const topic_partition& /*tp*/) const { return 0; }
};

}  // namespace mala::replication
