// A fixed set of shards, each one thread running one asio::io_context (architecture.md: shard per core).
// State owned by a shard is touched only on that shard's thread; other shards reach it by posting work to its
// context. The threads are named shard-N (top -H, ps -L) and know their index (common/current_shard.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>

namespace mala::net {

class shard_pool {
 public:
  // The shard count of mala.shards=0: the CPUs this process may run on (its affinity mask, which taskset, a
  // cpuset or `docker run --cpuset-cpus` narrow), else the machine's hardware threads; at least 1.
  static size_t default_shard_count();

  explicit shard_pool(size_t shard_count);
  ~shard_pool();
  shard_pool(const shard_pool&) = delete;
  shard_pool& operator=(const shard_pool&) = delete;

  size_t size() const { return _contexts.size(); }
  asio::io_context& context(size_t shard) { return *_contexts[shard]; }

  // Runs every shard's event loop on its own thread (shard 0 included) until stop().
  void start();
  // Runs fn() on `shard`'s thread and resumes the awaiting coroutine on its own executor with the result: the
  // hop a request takes to reach the shard that owns a partition (architecture.md). fn must not block.
  template <typename Fn>
  auto invoke_on(size_t shard, Fn fn) -> asio::awaitable<decltype(fn())> {
    using value = decltype(fn());
    co_return co_await asio::co_spawn(
        context(shard), [f = std::move(fn)]() mutable -> asio::awaitable<value> { co_return f(); },
        asio::use_awaitable);
  }

  // Runs the coroutine fn() returns (an asio::awaitable<T>) on `shard`'s thread to completion and resumes the
  // awaiting coroutine on its own executor with its result: for work that waits on the other shard (a
  // long-poll Fetch or an acks=all Produce parked on a partition's waiters with a timer of that shard). fn is
  // kept alive until the coroutine finishes, so a lambda may own what the coroutine uses through its
  // captures; the coroutine must not touch the awaiting shard's state.
  template <typename Fn>
  auto invoke_on_async(size_t shard, Fn fn) -> decltype(fn()) {
    co_return co_await asio::co_spawn(context(shard), std::move(fn), asio::use_awaitable);
  }

  // Runs fn(shard) for every shard on that shard's thread and returns once all have: the caller's own shard
  // (when it is one) runs in place, the others are posted to and waited for, blocking the caller. Before
  // start() and after the threads ended every fn runs in place on the caller's thread. For the rare work
  // that must reach every shard before the caller goes on (the metadata publisher's small images);
  // nothing a shard runs may itself wait for another shard this way, or two shards could wait on each other.
  void run_on_each_and_wait(const std::function<void(size_t shard)>& fn);
  // CPU time `shard`'s thread has used so far (its thread CPU clock), in nanoseconds; 0 when it does not run.
  // Any thread, while the shards run: the metrics endpoint's idle ratio.
  int64_t thread_cpu_nanos(size_t shard) const;
  // Whether the shard threads run (between start() and join()).
  bool running() const { return _running.load(std::memory_order_acquire); }

  // Stops every event loop and joins the threads. Safe to call from any thread, more than once.
  void stop();
  void join();

 private:
  std::vector<std::unique_ptr<asio::io_context>> _contexts;
  std::vector<std::thread> _threads;
  std::vector<std::unique_ptr<asio::executor_work_guard<asio::io_context::executor_type>>> _guards;
  std::atomic<bool> _running{false};
  // Each shard thread's CPU clock, published by the thread itself when it starts.
  struct cpu_clock {
    std::atomic<bool> known{false};
    std::atomic<int> clock{0};
  };
  std::vector<cpu_clock> _cpu_clocks;
};

}  // namespace mala::net
