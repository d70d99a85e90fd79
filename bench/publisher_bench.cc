// The broker's metadata publisher (issue 20: metadata handling must not grow with the partitions hosted).
// A node hosts state.range(0) partitions (topics of state.range(1) partitions, RF 2, logs on /dev/shm when
// it exists); each iteration publishes the next image, which changes one partition's leader epoch (an ISR or
// leader change, what most metadata changes are), and the publisher applies it to the replica manager. The
// image itself is built outside the timing (the metadata loader builds it, bench_metadata measures that).
// The figure to read is the ratio between sizes: it should stay near 1.
//   bench_publisher --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "mala/broker/metadata_publisher.h"
#include "mala/common/logging.h"
#include "mala/storage/log_manager.h"

namespace {

namespace fs = std::filesystem;
using namespace mala;

constexpr int32_t self = 1;

fs::path bench_dir() {
  const fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  fs::path dir = base / ("mala-bench-publisher-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void bm_publish_one_change(benchmark::State& state) {
  set_log_level("warn");  // a leadership change logs a line at info
  const int32_t hosted = static_cast<int32_t>(state.range(0));
  const int32_t per_topic = static_cast<int32_t>(state.range(1));
  const fs::path dir = bench_dir();
  {
    storage::log_manager_options o;
    o.dirs = {dir / "data"};
    auto opened = storage::log_manager::open(std::move(o));
    if (!opened) {
      state.SkipWithError(opened.error().message.c_str());
      return;
    }
    auto logs = std::move(*opened);
    replication::replica_manager_options r;
    r.local_replica_id = self;
    auto replicas = std::make_unique<replication::replica_manager>(*logs, r);
    metadata::metadata_cache cache;
    broker::metadata_publisher publisher(
        self, {replicas.get()}, replication::replica_placement(), /*shards=*/nullptr, cache,
        [](std::string_view) -> std::optional<std::string> { return std::nullopt; });

    metadata::metadata_image image;
    image.brokers[self].id = self;
    image.brokers[2].id = 2;
    for (int32_t t = 0; t * per_topic < hosted; ++t) {
      metadata::topic_metadata topic;
      topic.name = "topic-" + std::to_string(t);
      topic.id = uuid::random();
      for (int32_t i = 0; i < per_topic; ++i) {
        metadata::partition_state p;
        p.partition = i;
        p.leader = self;
        p.leader_epoch = 1;
        p.partition_epoch = 1;
        p.replicas = {self, 2};
        p.isr = {self, 2};
        topic.partitions.push_back(p);
      }
      image.topics[topic.name] = std::move(topic);
    }
    publisher.publish(std::make_shared<const metadata::metadata_image>(image));
    if (replicas->size() != static_cast<size_t>(hosted)) {
      state.SkipWithError("not every replica applied");
      return;
    }

    int64_t step = 0;
    for (auto _ : state) {
      state.PauseTiming();
      // The next image: one partition's leader epoch moves (a different topic and partition each time).
      const int32_t topics = static_cast<int32_t>(image.topics.size());
      auto& p = image.topics["topic-" + std::to_string(step % topics)]
                    .partitions[static_cast<size_t>((step * 7919) % per_topic)];
      ++p.leader_epoch;
      ++p.partition_epoch;
      image.metadata_offset = ++step;
      auto next = std::make_shared<const metadata::metadata_image>(image);
      state.ResumeTiming();
      publisher.publish(next);
      benchmark::DoNotOptimize(cache.current());
    }
    if (cache.current()->metadata_offset != step) state.SkipWithError("last image not published");
    state.counters["hosted"] = hosted;
    publisher.stop();
    replicas.reset();
  }
  fs::remove_all(dir);
}

}  // namespace

BENCHMARK(bm_publish_one_change)
    ->ArgNames({"hosted", "per_topic"})
    ->Args({1000, 1000})
    ->Args({20000, 1000})
    ->Args({20000, 20000})
    ->Args({2000, 10})
    ->Args({20000, 10})
    ->Unit(benchmark::kMicrosecond);
