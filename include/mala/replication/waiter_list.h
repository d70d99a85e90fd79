// The waiters of one partition: requests parked until something happens on it, as callbacks (replication does
// no awaiting itself; the broker turns a callback into the resumption of its coroutine). Kafka keeps these in
// its delayed-operation purgatories keyed by partition; Mala keeps them on the partition, so waking them
// costs nothing when nobody waits. A waiter fires at most once and is removed when it fires; a request that
// times out removes its own waiter with the handle it got (cancelling a waiter that already fired is a
// no-op).
//
// Threads: owned by a replication::partition and touched only on its shard. Callbacks run on that shard,
// after the list is updated, so a callback may add or cancel waiters.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "mala/common/error_code.h"

namespace mala::replication {

// Told why it fired: NONE when its condition was met (or, for a data waiter, when the partition changed), an
// error when it never will be on this replica (NOT_LEADER_OR_FOLLOWER: leadership lost or replica removed;
// NOT_ENOUGH_REPLICAS_AFTER_APPEND for an acks=all produce).
using waiter_callback = std::function<void(error_code)>;

struct waiter_handle {
  uint64_t id = 0;  // 0: no waiter (it fired at once)
  bool valid() const { return id != 0; }
  friend bool operator==(const waiter_handle&, const waiter_handle&) = default;
};

class waiter_list {
 public:
  // `key` is what the waiter waits for (an offset for a high watermark waiter; unused for data waiters). Ids
  // come from the caller so that one handle space covers every list of a partition.
  void add(uint64_t id, int64_t key, waiter_callback callback);
  bool cancel(uint64_t id);
  // Removes and returns the callbacks of the waiters whose key is <= `up_to`, oldest first.
  std::vector<waiter_callback> take_up_to(int64_t up_to);
  std::vector<waiter_callback> take_all();
  size_t size() const { return _waiters.size(); }
  bool empty() const { return _waiters.empty(); }

 private:
  struct waiter {
    int64_t key = 0;
    waiter_callback callback;
  };
  std::map<uint64_t, waiter> _waiters;  // by id: registration order; a partition rarely has more than a few
};

}  // namespace mala::replication
