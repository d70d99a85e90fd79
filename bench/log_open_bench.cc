// Start-up cost of the storage layer, in two figures:
//  1. log_manager::open() of 10,000 partitions (one small segment each) after a clean shutdown: no data is
//  read,
//     so this is the per-partition fixed cost (directory listing, opening files, mapping indexes). Target < 2
//     s.
//  2. open() after an unclean stop with one 1 GiB active segment: the recovery scan (framing + CRC-32C of
//  every
//     batch, index rebuild). The data is usually still in the page cache, so this measures CPU, not the disk.
// A plain program rather than a Google Benchmark: each measurement is one expensive, stateful run.
//
// Usage: bench_log_open [--partitions N] [--recovery-mib M] [--dir PATH]
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "mala/common/logging.h"
#include "mala/protocol/record_batch.h"
#include "mala/storage/log_manager.h"

namespace {

namespace fs = std::filesystem;
using mala::storage::log_manager;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench_log_open: %s\n", what.c_str());
  std::exit(1);
}

std::unique_ptr<log_manager> open_manager(const fs::path& dir, const mala::storage::log_config& config,
                                          int32_t threads) {
  mala::storage::log_manager_options options;
  options.dirs = {dir};
  options.defaults = config;
  options.recovery_threads_per_dir = threads;
  auto opened = log_manager::open(options);
  if (!opened.ok()) fail("open " + dir.string() + ": " + opened.error().message);
  return std::move(*opened);
}

std::vector<uint8_t> make_batch(size_t value_bytes) {
  std::vector<uint8_t> value(value_bytes);
  std::mt19937 rng(7);
  for (auto& b : value) b = static_cast<uint8_t>(rng());
  mala::protocol::record_batch_builder builder;
  builder.add(std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count(),
              std::nullopt, std::span<const uint8_t>(value));
  return builder.build();
}

void append(mala::storage::partition_log& log, std::vector<uint8_t>& batch) {
  auto appended = log.append_as_leader(batch, 0);
  if (!appended.ok()) fail("append to " + log.dir().string() + ": " + appended.error().message);
}

void bench_clean_open(const fs::path& root, int32_t partitions) {
  auto dir = root / "many";
  mala::storage::log_config config;
  auto topic_id = mala::uuid::random();
  auto small = make_batch(100);

  auto start = std::chrono::steady_clock::now();
  {
    auto manager = open_manager(dir, config, 2);
    for (int32_t p = 0; p < partitions; ++p) {
      // 100 topics of 100 partitions, roughly what a broker with that many partitions holds.
      auto created = manager->create({"bench-topic-" + std::to_string(p % 100), p / 100}, topic_id, config);
      if (!created.ok()) fail("create: " + created.error().message);
      append(**created, small);
    }
    auto stopped = manager->shutdown();
    if (!stopped.ok()) fail("shutdown: " + stopped.message);
  }
  std::printf("setup: created %d partitions with one batch each and shut down in %.2f s\n", partitions,
              seconds_since(start));

  for (int32_t threads : {1, 2}) {
    start = std::chrono::steady_clock::now();
    auto manager = open_manager(dir, config, threads);
    auto elapsed = seconds_since(start);
    const auto& report = manager->loaded();
    std::printf(
        "clean open: %d partitions, %d threads/dir: %.3f s (report %lld ms, recovered %d) -> %s (target < 2 "
        "s)\n",
        report.partitions, threads, elapsed, static_cast<long long>(report.elapsed_ms), report.recovered,
        elapsed < 2.0 ? "OK" : "SLOW");
    start = std::chrono::steady_clock::now();
    auto stopped = manager->shutdown();
    if (!stopped.ok()) fail("shutdown: " + stopped.message);
    std::printf("clean shutdown of %d partitions: %.3f s\n", report.partitions, seconds_since(start));
  }
}

void bench_recovery(const fs::path& root, int64_t mib) {
  auto dir = root / "big";
  mala::storage::log_config config;
  config.segment_bytes = 2'000'000'000;  // keep the whole GiB in one (active) segment
  config.max_message_bytes = 2 << 20;
  auto batch = make_batch((1 << 20) - 100);

  auto start = std::chrono::steady_clock::now();
  int64_t bytes = 0;
  {
    auto manager = open_manager(dir, config, 1);
    auto created = manager->create({"recovery", 0}, mala::uuid::random(), config);
    if (!created.ok()) fail("create: " + created.error().message);
    for (int64_t i = 0; i < mib; ++i) append(**created, batch);
    bytes = (*created)->size_bytes();
    if ((*created)->segment_count() != 1) fail("expected a single segment");
    // Destroyed without shutdown(): no marker, no checkpoint, as after kill -9 (the page cache keeps the
    // data).
  }
  std::printf("setup: wrote %.1f MiB in %lld batches in %.2f s\n", static_cast<double>(bytes) / (1 << 20),
              static_cast<long long>(mib), seconds_since(start));

  start = std::chrono::steady_clock::now();
  auto manager = open_manager(dir, config, 1);
  auto elapsed = seconds_since(start);
  const auto& report = manager->loaded();
  auto* log = manager->get({"recovery", 0});
  if (!log) fail("recovered partition missing");
  std::printf(
      "unclean open: recovered %d partition(s), %.1f MiB active segment in %.3f s (%.0f MiB/s), "
      "truncated %lld bytes, log end offset %lld\n",
      report.recovered, static_cast<double>(bytes) / (1 << 20), elapsed,
      static_cast<double>(bytes) / (1 << 20) / elapsed, static_cast<long long>(report.truncated_bytes),
      static_cast<long long>(log->log_end_offset()));
  if (log->log_end_offset() != mib) fail("recovery lost data");
  (void)manager->shutdown();
}

}  // namespace

int main(int argc, char** argv) {
  int32_t partitions = 10'000;
  int64_t recovery_mib = 1024;
  fs::path root;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--partitions") {
      partitions = std::atoi(argv[i + 1]);
    } else if (flag == "--recovery-mib") {
      recovery_mib = std::atoll(argv[i + 1]);
    } else if (flag == "--dir") {
      root = argv[i + 1];
    } else {
      fail("unknown flag " + flag);
    }
  }
  if (root.empty()) root = fs::temp_directory_path() / ("mala-log-open-bench-" + std::to_string(::getpid()));
  mala::set_log_level("warn");  // one line per partition at start-up would dominate the measurement's output

  // Every partition holds a few descriptors; Kafka needs a raised limit for many partitions too.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }

  std::error_code ec;
  fs::remove_all(root, ec);
  if (partitions > 0) bench_clean_open(root, partitions);
  if (recovery_mib > 0) bench_recovery(root, recovery_mib);
  fs::remove_all(root, ec);
  return 0;
}
