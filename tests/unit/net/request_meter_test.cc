// request_meter and metered_executor (request quotas charge a request's own thread time): a coroutine spawned
// on a metered executor is charged for the stretches it runs, not for the time it waits, and not for another
// request's work that runs inline inside one of its stretches.
#include "mala/net/request_meter.h"

#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/dispatch.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>

namespace mala::net {
namespace {

using namespace std::chrono_literals;

void busy_for(std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

TEST(request_meter, charges_the_stretches_a_request_runs_not_its_waits) {
  asio::io_context io;
  auto meter = std::make_shared<request_meter>();
  request_meter* seen_inside = nullptr;
  int64_t seen_at_end = 0;
  asio::co_spawn(
      metered_executor(io.get_executor(), meter),
      [&]() -> asio::awaitable<void> {
        seen_inside = current_request_meter();
        busy_for(20ms);
        asio::steady_timer timer(co_await asio::this_coro::executor, 150ms);
        co_await timer.async_wait(asio::use_awaitable);  // a wait: not charged
        busy_for(20ms);
        seen_at_end = current_request_meter()->elapsed_ns();
      },
      asio::detached);
  io.run();
  EXPECT_EQ(seen_inside, meter.get());
  EXPECT_EQ(current_request_meter(), nullptr);
  EXPECT_GE(seen_at_end, 40'000'000);
  EXPECT_LT(seen_at_end, 140'000'000) << "the 150 ms wait was charged";
  EXPECT_GE(meter->elapsed_ns(), seen_at_end);
}

TEST(request_meter, work_of_another_request_run_inline_is_charged_to_that_request) {
  asio::io_context io;
  auto outer = std::make_shared<request_meter>();
  auto inner = std::make_shared<request_meter>();
  metered_executor inner_executor(io.get_executor(), inner);
  asio::post(metered_executor(io.get_executor(), outer), [&] {
    busy_for(10ms);
    // asio::dispatch on the running io_context runs it here and now, inside the outer stretch.
    asio::dispatch(inner_executor, [&] {
      EXPECT_EQ(current_request_meter(), inner.get());
      busy_for(60ms);
    });
    EXPECT_EQ(current_request_meter(), outer.get());
    busy_for(10ms);
  });
  io.run();
  EXPECT_GE(inner->elapsed_ns(), 60'000'000);
  EXPECT_GE(outer->elapsed_ns(), 20'000'000);
  EXPECT_LT(outer->elapsed_ns(), 60'000'000) << "the inner request's 60 ms were charged to the outer one";
}

}  // namespace
}  // namespace mala::net
