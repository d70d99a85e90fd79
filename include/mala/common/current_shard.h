// Which shard the calling thread is: net::shard_pool sets it on each shard thread, so code that must run on
// the shard owning its state (a partition's replica, its log) can check where it runs.
//
// Threads: any; the value is per thread.
#pragma once

namespace mala {

namespace detail {
inline thread_local int current_shard_index = -1;
}  // namespace detail

// The index of the shard whose thread this is, or -1 on any other thread (start-up and shutdown on the main
// thread, blocking helper threads, unit tests without shards).
inline int current_shard() {
  return detail::current_shard_index;
}

inline void set_current_shard(int shard) {
  detail::current_shard_index = shard;
}

}  // namespace mala
