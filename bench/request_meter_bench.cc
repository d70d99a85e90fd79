// What metering a request's thread time costs (request quotas, net/request_meter.h): a request coroutine that
// resumes 10 times (as a handler does across its waits and shard hops) spawned on the shard's plain executor
// (the baseline) and on a metered_executor wrapping it, each on one io_context thread.
//   bench_request_meter --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <memory>

#include "mala/net/request_meter.h"

namespace {

using namespace mala;

asio::awaitable<void> request_with_resumptions(int resumptions, int& done) {
  auto executor = co_await asio::this_coro::executor;
  for (int i = 0; i < resumptions; ++i) co_await asio::post(executor, asio::use_awaitable);
  ++done;
}

void bm_request(benchmark::State& state) {
  const bool metered = state.range(0) != 0;
  asio::io_context io(1);
  int done = 0;
  for (auto _ : state) {
    if (metered) {
      asio::co_spawn(net::metered_executor(io.get_executor(), std::make_shared<net::request_meter>()),
                     request_with_resumptions(10, done), asio::detached);
    } else {
      asio::co_spawn(io.get_executor(), request_with_resumptions(10, done), asio::detached);
    }
    io.restart();
    io.run();
  }
  if (done != static_cast<int>(state.iterations())) state.SkipWithError("a request did not finish");
  state.SetLabel(metered ? "metered" : "plain (baseline)");
}

}  // namespace

BENCHMARK(bm_request)->ArgName("metered")->Arg(0)->Arg(1);
