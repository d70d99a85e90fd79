// What one metadata change costs the node as the number of partitions grows (issue 20): a committed
// PartitionChangeRecord (a leader or ISR change) applied to an image of 20,000 RF-3 partitions, in topics of
// 1,000, all in one topic, or in 2,000 topics of 10, and the new image built; and a topic's lookup by id. The
// baseline in the same run is what each change cost before images shared their partitions: a copy of every
// partition of every topic.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mala/metadata/metadata_delta.h"

namespace {

using namespace mala;
using namespace mala::metadata;

uuid topic_uuid(uint32_t n) {
  uuid id;
  id.bytes[0] = 1;  // never the zero uuid
  for (size_t i = 0; i < 4; ++i) id.bytes[12 + i] = static_cast<uint8_t>(n >> (8 * i));
  return id;
}

metadata_image_ptr image_of(int64_t topics, int64_t partitions_per_topic) {
  metadata_delta delta(nullptr);
  for (int64_t t = 0; t < topics; ++t) {
    protocol::topic_record topic;
    topic.name = "topic-" + std::to_string(t);
    topic.topic_id = topic_uuid(static_cast<uint32_t>(t));
    if (!delta.apply(topic).ok()) std::abort();
    for (int64_t p = 0; p < partitions_per_topic; ++p) {
      protocol::partition_record r;
      r.topic_id = topic.topic_id;
      r.partition_id = static_cast<int32_t>(p);
      const auto first = static_cast<int32_t>(p % 3);
      r.replicas = {first + 1, (first + 1) % 3 + 1, (first + 2) % 3 + 1};
      r.isr = r.replicas;
      r.leader = r.replicas[0];
      if (!delta.apply(r).ok()) std::abort();
    }
  }
  return std::move(delta).build();
}

// The same 20,000 partitions as topics of 1,000, one topic, and topics of 10 (arguments: topics, partitions
// per topic).
void partition_layouts(benchmark::internal::Benchmark* b) {
  b->Args({20, 1000})->Args({1, 20000})->Args({2000, 10})->Unit(benchmark::kMicrosecond);
}

void BM_partition_change_applied_and_built(benchmark::State& state) {
  const int64_t topics = state.range(0), per_topic = state.range(1);
  metadata_image_ptr image = image_of(topics, per_topic);
  int64_t n = 0;
  for (auto _ : state) {
    const int64_t t = n % topics, p = (n / topics) % per_topic;
    ++n;
    protocol::partition_change_record change;
    change.topic_id = topic_uuid(static_cast<uint32_t>(t));
    change.partition_id = static_cast<int32_t>(p);
    change.isr = std::vector<int32_t>{static_cast<int32_t>(p % 3) + 1};
    metadata_delta delta(image);
    if (!delta.apply(change).ok()) std::abort();
    image = std::move(delta).build();  // the next change starts from this one, as the loader's do
    benchmark::DoNotOptimize(image);
  }
  state.counters["partitions"] = static_cast<double>(topics * per_topic);
}
BENCHMARK(BM_partition_change_applied_and_built)->Apply(partition_layouts);

// A topic looked up by id, as Fetch, Produce (v13+) and the replica fetchers name topics: through the
// image's id index, O(log topics) (before it, every lookup walked the topics).
void BM_topic_found_by_id(benchmark::State& state) {
  const int64_t topics = state.range(0), per_topic = state.range(1);
  const metadata_image_ptr image = image_of(topics, per_topic);
  int64_t n = 0;
  for (auto _ : state) {
    const topic_metadata* topic = image->find_topic(topic_uuid(static_cast<uint32_t>(n++ % topics)));
    if (!topic) std::abort();
    benchmark::DoNotOptimize(topic);
  }
  state.counters["partitions"] = static_cast<double>(topics * per_topic);
}
BENCHMARK(BM_topic_found_by_id)->Apply(partition_layouts);

// The baseline: the image's maps copied and every partition of every topic copied into plain vectors, what
// the first change of a delta cost when topics held their partitions in a std::vector.
void BM_every_partition_copied(benchmark::State& state) {
  const int64_t topics = state.range(0), per_topic = state.range(1);
  const metadata_image_ptr image = image_of(topics, per_topic);
  for (auto _ : state) {
    metadata_image copy = *image;  // the maps, as before
    std::vector<std::vector<partition_state>> copies;
    copies.reserve(image->topics.size());
    for (const auto& [name, topic] : image->topics) copies.push_back(topic.partitions.to_vector());
    benchmark::DoNotOptimize(copy);
    benchmark::DoNotOptimize(copies);
  }
  state.counters["partitions"] = static_cast<double>(topics * per_topic);
}
BENCHMARK(BM_every_partition_copied)->Apply(partition_layouts);

}  // namespace
