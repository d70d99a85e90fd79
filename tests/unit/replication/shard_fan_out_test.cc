// run_on_shards_async: a request's per-shard pieces run on their shards at once, the caller resumes on its
// own shard with the results in group order, and an exception reaches the caller once every piece finished.
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "mala/common/current_shard.h"
#include "mala/net/shard_pool.h"
#include "mala/replication/delayed_operation.h"

namespace mala::replication {
namespace {

using namespace std::chrono_literals;

// What a piece saw: its work, and the shard it ran on.
struct piece {
  int work = 0;
  int shard = -2;
};

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(asio::use_awaitable);
}

// Runs `body` as a coroutine on `shard` of `shards` and returns what it returned (the test thread waits).
template <typename T, typename Body>
T run_on(net::shard_pool& shards, size_t shard, Body body) {
  std::promise<T> done;
  auto run = [&]() -> asio::awaitable<void> {
    try {
      done.set_value(co_await body());
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  };
  asio::co_spawn(shards.context(shard), std::move(run), asio::detached);
  auto future = done.get_future();
  EXPECT_EQ(future.wait_for(10s), std::future_status::ready) << "the fan-out never resumed its caller";
  return future.get();
}

struct fan_out_result {
  std::vector<piece> pieces;
  int resumed_on = -2;
};

TEST(run_on_shards_async, runs_each_group_on_its_shard_and_answers_in_group_order) {
  net::shard_pool shards(4);
  shards.start();
  auto result = run_on<fan_out_result>(shards, 0, [&]() -> asio::awaitable<fan_out_result> {
    // Group order is not shard order, one group is the caller's own shard, and the later groups finish
    // first.
    std::vector<std::pair<size_t, int>> groups{{2, 20}, {0, 0}, {3, 30}, {1, 10}};
    auto make = [](int& work) -> asio::awaitable<piece> {
      co_await sleep_for(std::chrono::milliseconds(40 - work));
      co_return piece{work, current_shard()};
    };
    fan_out_result out;
    out.pieces = co_await run_on_shards_async(&shards, std::move(groups), std::move(make));
    out.resumed_on = current_shard();
    co_return out;
  });
  shards.stop();
  shards.join();
  ASSERT_EQ(result.pieces.size(), 4u);
  const int expected[] = {20, 0, 30, 10};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(result.pieces[i].work, expected[i]);
    EXPECT_EQ(result.pieces[i].shard, expected[i] / 10) << "group " << i;
  }
  EXPECT_EQ(result.resumed_on, 0);
}

TEST(run_on_shards_async, runs_the_groups_at_the_same_time) {
  net::shard_pool shards(4);
  shards.start();
  // Each piece waits until every piece started: one after another, the first would wait in vain.
  std::atomic<int> started{0};
  auto all_met = run_on<std::vector<bool>>(shards, 1, [&]() -> asio::awaitable<std::vector<bool>> {
    std::vector<std::pair<size_t, int>> groups{{0, 0}, {1, 1}, {2, 2}, {3, 3}};
    auto make = [&started](int&) -> asio::awaitable<bool> {
      started.fetch_add(1);
      for (int i = 0; i < 2000 && started.load() < 4; ++i) co_await sleep_for(1ms);
      co_return started.load() == 4;
    };
    co_return co_await run_on_shards_async(&shards, std::move(groups), std::move(make));
  });
  shards.stop();
  shards.join();
  EXPECT_EQ(all_met, std::vector<bool>(4, true));
}

TEST(run_on_shards_async, completes_with_only_the_callers_shard_or_no_group) {
  net::shard_pool shards(2);
  shards.start();
  auto result = run_on<std::pair<std::vector<piece>, size_t>>(
      shards, 1, [&]() -> asio::awaitable<std::pair<std::vector<piece>, size_t>> {
        std::vector<std::pair<size_t, int>> own{{1, 7}};
        auto make = [](int& work) -> asio::awaitable<piece> { co_return piece{work, current_shard()}; };
        auto pieces = co_await run_on_shards_async(&shards, std::move(own), make);
        std::vector<std::pair<size_t, int>> none;
        auto empty = co_await run_on_shards_async(&shards, std::move(none), make);
        co_return std::make_pair(std::move(pieces), empty.size());
      });
  shards.stop();
  shards.join();
  ASSERT_EQ(result.first.size(), 1u);
  EXPECT_EQ(result.first[0].work, 7);
  EXPECT_EQ(result.first[0].shard, 1);
  EXPECT_EQ(result.second, 0u);
}

TEST(run_on_shards_async, rethrows_the_first_groups_exception_once_every_group_finished) {
  net::shard_pool shards(4);
  shards.start();
  std::atomic<int> finished{0};
  int finished_when_caught = -1;
  int caught_on = -2;
  auto message = run_on<std::string>(shards, 0, [&]() -> asio::awaitable<std::string> {
    // Groups 1, 2 (the caller's own shard) and 3 throw, 3 first (1 ms, the rest 30 ms); group 0 does not.
    std::vector<std::pair<size_t, int>> groups{{1, 0}, {2, 1}, {0, 2}, {3, 3}};
    auto make = [&finished](int& work) -> asio::awaitable<int> {
      co_await sleep_for(work == 3 ? 1ms : 30ms);
      finished.fetch_add(1);
      if (work == 1 || work == 2 || work == 3) throw std::runtime_error("group " + std::to_string(work));
      co_return work;
    };
    std::string what;
    try {
      (void)co_await run_on_shards_async(&shards, std::move(groups), std::move(make));
    } catch (const std::runtime_error& e) {
      what = e.what();
      finished_when_caught = finished.load();
      caught_on = current_shard();
    }
    co_return what;
  });
  shards.stop();
  shards.join();
  EXPECT_EQ(message, "group 1");
  EXPECT_EQ(finished_when_caught, 4);
  EXPECT_EQ(caught_on, 0);
}

TEST(run_on_shards_async, without_a_shard_pool_runs_every_group_in_place) {
  asio::io_context io;
  std::vector<int> order;
  std::vector<int> results;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        std::vector<std::pair<size_t, int>> groups{{3, 1}, {0, 2}, {1, 3}};
        auto make = [&order](int& work) -> asio::awaitable<int> {
          order.push_back(work);
          co_await sleep_for(1ms);
          co_return work * 10;
        };
        results = co_await run_on_shards_async(nullptr, std::move(groups), std::move(make));
      },
      asio::detached);
  io.run();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(results, (std::vector<int>{10, 20, 30}));
}

}  // namespace
}  // namespace mala::replication
