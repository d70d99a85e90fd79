// The building blocks of the metrics endpoint: latency histograms and the Prometheus text exposition format
// (version 0.0.4) that Prometheus scrapes.
//
// Counting costs nothing shared on the data path: each shard keeps its own plain counters and histograms
// (broker/broker_metrics.h), touched only on that shard's thread; a scrape reads them by hopping to each
// shard. Work that runs off the shards (fsyncs on the blocking pool) records into a shared_histogram, whose
// buckets are atomics.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace mala::metrics {

// Upper bounds, in milliseconds, of the latency histograms' buckets (Prometheus `le`), then +Inf. From a
// tenth of a millisecond (a Produce answered from the page cache) to 30 s (a long-poll Fetch, a
// request.timeout.ms), roughly 1-2.5-5 per decade as Prometheus client libraries' defaults.
inline constexpr std::array<double, 18> latency_bounds_ms = {
    0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000};
inline constexpr size_t latency_bucket_count = latency_bounds_ms.size() + 1;  // the last is +Inf

// The bucket of a latency of `micros`: the first whose bound is at or above it.
size_t latency_bucket_of(uint64_t micros);

// A histogram of latencies written by one thread (its shard) only. Buckets are not cumulative here; the text
// writer sums them into Prometheus' cumulative `le` buckets.
struct latency_histogram {
  std::array<uint64_t, latency_bucket_count> buckets{};
  uint64_t sum_micros = 0;

  void record(uint64_t micros) {
    ++buckets[latency_bucket_of(micros)];
    sum_micros += micros;
  }
  uint64_t count() const;
  // Adds another shard's counts (a scrape merging the shards).
  void merge(const latency_histogram& other);
};

// A latency histogram several threads record into (relaxed atomics): for work off the shards.
class shared_histogram {
 public:
  void record(uint64_t micros) {
    _buckets[latency_bucket_of(micros)].fetch_add(1, std::memory_order_relaxed);
    _sum_micros.fetch_add(micros, std::memory_order_relaxed);
  }
  latency_histogram snapshot() const;

 private:
  std::array<std::atomic<uint64_t>, latency_bucket_count> _buckets{};
  std::atomic<uint64_t> _sum_micros{0};
};

using label = std::pair<std::string_view, std::string_view>;

// Writes the Prometheus text format: a family's HELP and TYPE lines once, then its samples. Label values are
// escaped (backslash, double quote, newline); names must already be valid metric and label names.
class prometheus_text {
 public:
  enum class type : uint8_t { counter, gauge, histogram };

  // Starts a family: its HELP and TYPE lines name it as its samples are named (a counter's name ends in
  // _total, Prometheus' convention, which the JMX exporter follows for Kafka's Count attributes).
  void family(std::string_view name, std::string_view help, type t);
  void sample(std::string_view name, std::initializer_list<label> labels, double value);
  void sample(std::string_view name, std::initializer_list<label> labels, uint64_t value);
  // A histogram family's samples for one label set: cumulative _bucket{le=...} lines (milliseconds), _sum (in
  // milliseconds) and _count.
  void histogram(std::string_view name, std::initializer_list<label> labels, const latency_histogram& h);

  const std::string& text() const { return _out; }
  std::string take() { return std::move(_out); }

 private:
  void labels(std::initializer_list<label> labels, std::string_view extra_name = {},
              std::string_view extra_value = {});
  std::string _out;
};

}  // namespace mala::metrics
