// invoke_on runs work on the target shard's thread and hands the result back to the caller's shard.
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <future>

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

}  // namespace
}  // namespace mala::net
