// invoke_on runs work on the target shard's thread and hands the result back to the caller's shard.
#include <gtest/gtest.h>

#include <sched.h>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "mala/net/shard_pool.h"

namespace mala::net {
namespace {

TEST(shard_pool, invoke_on_runs_on_the_target_shard_and_resumes_on_the_caller) {
  shard_pool shards(2);
  shards.start();
  std::promise<std::tuple<std::thread::id, std::thread::id, std::thread::id, int>> done;
  asio::co_spawn(
      shards.context(0),
      [&]() -> asio::awaitable<void> {
        const auto caller = std::this_thread::get_id();
        std::thread::id worker;
        const int value = co_await shards.invoke_on(1, [&] {
          worker = std::this_thread::get_id();
          return 42;
        });
        done.set_value({caller, worker, std::this_thread::get_id(), value});
      },
      asio::detached);
  auto [caller, worker, resumed_on, value] = done.get_future().get();
  shards.stop();
  shards.join();
  EXPECT_EQ(value, 42);
  EXPECT_NE(caller, worker);
  EXPECT_EQ(caller, resumed_on);
}

TEST(shard_pool, invoke_on_async_waits_on_the_target_shard) {
  shard_pool shards(2);
  shards.start();
  std::promise<std::tuple<std::thread::id, std::thread::id, std::thread::id, int>> done;
  asio::co_spawn(
      shards.context(0),
      [&]() -> asio::awaitable<void> {
        const auto caller = std::this_thread::get_id();
        std::thread::id worker;
        // The coroutine owns its state through the lambda's captures and waits on a timer of shard 1.
        auto wait = [&worker, base = 40]() -> asio::awaitable<int> {
          worker = std::this_thread::get_id();
          asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds(20));
          co_await timer.async_wait(asio::use_awaitable);
          co_return base + 2;
        };
        const int value = co_await shards.invoke_on_async(1, std::move(wait));
        done.set_value({caller, worker, std::this_thread::get_id(), value});
      },
      asio::detached);
  auto [caller, worker, resumed_on, value] = done.get_future().get();
  shards.stop();
  shards.join();
  EXPECT_EQ(value, 42);
  EXPECT_NE(caller, worker);
  EXPECT_EQ(caller, resumed_on);
}

// mala.shards=0 follows the CPU affinity (taskset, cpusets), as the JVM's availableProcessors and Go's
// GOMAXPROCS do, not the machine's hardware threads.
TEST(shard_pool, default_shard_count_follows_the_cpu_affinity) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(shard_pool::default_shard_count(), static_cast<size_t>(CPU_COUNT(&all)));
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  size_t pinned = 0;
  std::thread([&] {  // the affinity of this thread only
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) pinned = shard_pool::default_shard_count();
  })
      .join();
  EXPECT_EQ(pinned, 1u);
}

}  // namespace
}  // namespace mala::net
