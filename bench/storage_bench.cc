// Storage data path: offset index lookups (a fetch does one per request) and segment appends against a plain
// write() loop of the same bytes, so the append overhead reads as a ratio (the issue asks for >= 70%).
//   bench_storage --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <fcntl.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/storage/log_segment.h"
#include "mala/storage/offset_index.h"

namespace {

namespace fs = std::filesystem;
using namespace mala;
using namespace mala::storage;

fs::path bench_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("mala-bench-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A full 10 MiB index (segment.index.bytes default): 1,310,720 entries, looked up at random offsets, so most
// probes miss the CPU caches. Also reports the median and p99 of individually timed lookups (those include
// about 20 ns of clock overhead).
void bm_offset_index_lookup(benchmark::State& state) {
  const fs::path dir = bench_dir("index");
  constexpr int32_t index_bytes = 10 * 1024 * 1024;
  auto opened = offset_index::open(dir / "00000000000000000000.index", 0, index_bytes, true);
  if (!opened) {
    state.SkipWithError(opened.error().message.c_str());
    return;
  }
  auto& index = *opened.value();
  for (int32_t i = 0; !index.is_full(); ++i) (void)index.append(int64_t{i} * 4 + 3, int64_t{i} * 1000);
  const int64_t max_offset = int64_t{index.entries()} * 4;
  std::mt19937_64 rng(1);
  std::vector<int64_t> targets(1 << 16);
  for (auto& t : targets) t = static_cast<int64_t>(rng() % static_cast<uint64_t>(max_offset));

  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(index.lookup(targets[i++ & (targets.size() - 1)]));
  }

  std::vector<int64_t> samples(100'000);
  for (size_t n = 0; n < samples.size(); ++n) {
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(index.lookup(targets[n & (targets.size() - 1)]));
    samples[n] =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
            .count();
  }
  std::sort(samples.begin(), samples.end());
  state.counters["entries"] = index.entries();
  state.counters["median_ns"] = static_cast<double>(samples[samples.size() / 2]);
  state.counters["p99_ns"] = static_cast<double>(samples[samples.size() * 99 / 100]);
  (void)index.close_and_delete();
  fs::remove_all(dir);
}
BENCHMARK(bm_offset_index_lookup);

std::vector<uint8_t> one_mib_batch(int32_t& records) {
  protocol::record_batch_builder builder;
  const std::vector<uint8_t> value(1000, 'x');
  for (int i = 0; i < 1040; ++i)
    builder.add(1'700'000'000'000 + i, std::nullopt, std::span<const uint8_t>(value));
  records = builder.record_count();
  return builder.build();
}

// 1 MiB batches appended to a segment in /tmp (page cache); a fresh segment every range(0) MiB keeps the
// dirty data bounded. Segment creation and deletion are not timed.
void bm_segment_append(benchmark::State& state) {
  const fs::path dir = bench_dir("append");
  int32_t records = 0;
  std::vector<uint8_t> batch = one_mib_batch(records);
  const int64_t per_segment = state.range(0);
  log_config config;
  std::unique_ptr<log_segment> segment;
  int64_t base = 0;
  int64_t appended = per_segment;
  for (auto _ : state) {
    if (appended == per_segment) {
      state.PauseTiming();
      if (segment) (void)segment->delete_files();
      segment.reset();
      auto opened = log_segment::open(dir, base, config, true);
      if (!opened) {
        state.SkipWithError(opened.error().message.c_str());
        break;
      }
      segment = std::move(opened.value());
      appended = 0;
      state.ResumeTiming();
    }
    const int64_t next = segment->next_offset();
    protocol::stamp_base_offset(batch, next);  // what the leader does before appending
    appended_batch info{next, next + records - 1, 1'700'000'000'000 + records - 1, next + records - 1};
    if (auto s = segment->append(batch, info); !s.ok()) {
      state.SkipWithError(s.message.c_str());
      break;
    }
    ++appended;
  }
  if (segment) (void)segment->delete_files();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(batch.size()));
  fs::remove_all(dir);
}
BENCHMARK(bm_segment_append)->Arg(64)->UseRealTime();

// The same bytes with write() to a plain file, recreated every range(0) MiB: the ceiling for appends.
void bm_write_loop_baseline(benchmark::State& state) {
  const fs::path dir = bench_dir("write");
  const fs::path path = dir / "baseline.log";
  int32_t records = 0;
  const std::vector<uint8_t> batch = one_mib_batch(records);
  const int64_t per_file = state.range(0);
  int fd = -1;
  int64_t written = per_file;
  for (auto _ : state) {
    if (written == per_file) {
      state.PauseTiming();
      if (fd >= 0) ::close(fd);
      ::unlink(path.c_str());
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      written = 0;
      state.ResumeTiming();
    }
    size_t done = 0;
    while (done < batch.size()) {
      const ssize_t r = ::write(fd, batch.data() + done, batch.size() - done);
      if (r <= 0) {
        state.SkipWithError("write failed");
        break;
      }
      done += static_cast<size_t>(r);
    }
    ++written;
  }
  if (fd >= 0) ::close(fd);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(batch.size()));
  fs::remove_all(dir);
}
BENCHMARK(bm_write_loop_baseline)->Arg(64)->UseRealTime();

}  // namespace
