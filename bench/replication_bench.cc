// The leader's produce path per partition, as the Produce handler runs it: the one check of a produced batch
// (replication::validate_produced_records: the request's framing and the client rules, the header parsed
// once), then partition::append of that batch (producer-state check, the log's CRC and record checks,
// offset stamping, the segment write, the producer-state update). Batches of state.range(0) records of 100
// bytes (null key, one timestamp), idempotence off, acks=1, one in-sync replica.
//   bench_replication --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/replication/partition.h"
#include "mala/storage/partition_log.h"

namespace {

namespace fs = std::filesystem;
using namespace mala;

fs::path bench_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("mala-bench-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<uint8_t> make_batch(int64_t records) {
  std::vector<uint8_t> value(100);
  uint32_t x = 12345;
  for (auto& b : value) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 16);
  }
  protocol::record_batch_builder builder;
  for (int64_t i = 0; i < records; ++i)
    builder.add(1'764'000'000'000, std::nullopt, std::span<const uint8_t>(value));
  return builder.build();
}

void bm_produce_validate(benchmark::State& state) {
  auto bytes = make_batch(state.range(0));
  for (auto _ : state) {
    auto batch = replication::validate_produced_records(bytes);
    benchmark::DoNotOptimize(batch);
    if (!batch) state.SkipWithError("validate");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes.size()));
}

void bm_produce_append(benchmark::State& state) {
  const fs::path dir = bench_dir("produce");
  auto opened = storage::partition_log::open(dir / "bench-0", {"bench", 0}, storage::log_config{}, {});
  if (!opened) {
    state.SkipWithError(opened.error().message.c_str());
    return;
  }
  auto log = std::move(opened.value());
  {
    replication::partition p(log.get(), uuid{}, {});
    replication::partition_state leader;
    leader.leader = 0;
    leader.leader_epoch = 1;
    leader.replicas = {0};
    leader.isr = {0};
    if (!p.make_leader(leader).ok()) state.SkipWithError("make_leader");
    const auto sent = make_batch(state.range(0));
    std::vector<uint8_t> request(sent.size());
    int64_t appended = 0;
    for (auto _ : state) {
      // The leader stamps the request's bytes in place: each append gets them as the producer sent them.
      std::memcpy(request.data(), sent.data(), sent.size());
      auto batch = replication::validate_produced_records(request);
      if (!batch) {
        state.SkipWithError("validate");
        break;
      }
      auto out = p.append(*batch, 1);
      if (!out.appended) {
        state.SkipWithError(out.appended.error().message.c_str());
        break;
      }
      if (++appended % 4096 == 0) {
        state.PauseTiming();  // keep the log small: start it over
        (void)p.truncate_to(0);
        state.ResumeTiming();
      }
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * sent.size()));
  }
  (void)log->close();
  log.reset();
  fs::remove_all(dir);
}

}  // namespace

BENCHMARK(bm_produce_validate)->Arg(10)->Arg(600);
BENCHMARK(bm_produce_append)->Arg(10)->Arg(600);
