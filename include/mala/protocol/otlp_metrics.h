// The metrics a client pushes with PushTelemetry (KIP-714): OpenTelemetry's MetricsData v1 in protobuf
// (opentelemetry/proto/metrics/v1/metrics.proto), after the request's compression is undone. Decoded are the
// number data points of gauges and sums, with their resource's attributes and their own; histograms,
// exponential histograms and summaries are counted and skipped. Unknown fields are skipped, as protobuf
// readers do.
//
// Bounded: every length is checked against what is left before anything is read, the number of resources,
// metrics, points and attributes and the length of every name and value are capped (`otlp_limits`), a
// metric's texts and a resource's attributes are kept once and referred to by index (so what a payload
// decodes to stays proportional to its size), and no message nests deeper than the schema's fixed depth (an
// attribute value that is an array or a key-value list is not descended into). Every string must be UTF-8,
// as protobuf requires. A payload past a bound or malformed is refused whole (INVALID_RECORD, as Kafka
// answers a push its receiver could not take). A point flagged as having no recorded value
// (FLAG_NO_RECORDED_VALUE), or with no value, is skipped. Pure; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/result.h"

namespace mala::protocol {

struct otlp_attribute {
  std::string key;
  std::string value;  // a string as is; a bool as true/false; an int or a double in decimal; bytes as hex
  friend bool operator==(const otlp_attribute&, const otlp_attribute&) = default;
};

enum class otlp_metric_kind : uint8_t { gauge, sum };

// AggregationTemporality.
enum class otlp_temporality : uint8_t { unspecified = 0, delta = 1, cumulative = 2 };

struct otlp_metric {
  std::string name;  // e.g. org.apache.kafka.producer.record.send.total
  std::string description;
  std::string unit;
  otlp_metric_kind kind = otlp_metric_kind::gauge;
  bool monotonic = false;  // sums only
  otlp_temporality temporality = otlp_temporality::unspecified;
  friend bool operator==(const otlp_metric&, const otlp_metric&) = default;
};

struct otlp_number_point {
  size_t metric = 0;                       // index in otlp_metrics_data::metrics
  size_t resource = 0;                     // index in otlp_metrics_data::resources
  std::vector<otlp_attribute> attributes;  // the point's own
  double value = 0;
  uint64_t time_unix_nano = 0;
};

struct otlp_metrics_data {
  // Each ResourceMetrics' resource attributes (client_rack, ...), shared by its points.
  std::vector<std::vector<otlp_attribute>> resources;
  std::vector<otlp_metric> metrics;  // those with at least one number point kept
  std::vector<otlp_number_point> points;
  size_t skipped_points = 0;  // of histograms, exponential histograms and summaries, or without a value
};

struct otlp_limits {
  size_t max_points = 10000;  // also bounds the metrics kept
  size_t max_resources = 1000;
  size_t max_attributes = 64;      // per resource and per point
  size_t max_string_bytes = 4096;  // a name, description, unit, attribute key or value
};

result<otlp_metrics_data> decode_otlp_metrics(std::span<const uint8_t> data, const otlp_limits& limits = {});

// Encoding, for tests and benchmarks: MetricsData with one resource and one scope holding a Metric per
// point, each with that point (its `metric` an index into `metrics`; its `resource` ignored).
std::vector<uint8_t> encode_otlp_metrics(const std::vector<otlp_attribute>& resource_attributes,
                                         const std::vector<otlp_metric>& metrics,
                                         const std::vector<otlp_number_point>& points);

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(std::string_view text);

}  // namespace mala::protocol
