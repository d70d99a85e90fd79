// CRC-32C throughput: the produce path checks every batch, so this bounds how fast a shard can accept data.
#include "mala/common/crc32c.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

namespace {

std::vector<uint8_t> make_buffer(size_t n) {
  std::mt19937 rng(42);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

void bm_crc32c(benchmark::State& state) {
  auto buffer = make_buffer(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(mala::crc32c(buffer));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void bm_crc32c_portable(benchmark::State& state) {
  auto buffer = make_buffer(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(mala::crc32c_detail::extend_portable(0, buffer));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

}  // namespace

BENCHMARK(bm_crc32c)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20);
BENCHMARK(bm_crc32c_portable)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20);
