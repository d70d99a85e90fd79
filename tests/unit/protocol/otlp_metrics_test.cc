#include "mala/protocol/otlp_metrics.h"

#include <gtest/gtest.h>

namespace mala::protocol {
namespace {

// Metrics and their points, one point per metric, as encode_otlp_metrics takes them.
struct payload {
  std::vector<otlp_metric> metrics;
  std::vector<otlp_number_point> points;

  payload& add(std::string name, otlp_metric_kind kind, double value,
               std::vector<otlp_attribute> attributes = {}) {
    otlp_metric m;
    m.name = std::move(name);
    m.kind = kind;
    if (kind == otlp_metric_kind::sum) {
      m.monotonic = true;
      m.temporality = otlp_temporality::cumulative;
    }
    otlp_number_point p;
    p.metric = metrics.size();
    p.value = value;
    p.attributes = std::move(attributes);
    p.time_unix_nano = 1700000000000000000ULL;
    metrics.push_back(std::move(m));
    points.push_back(std::move(p));
    return *this;
  }
  std::vector<uint8_t> encode(const std::vector<otlp_attribute>& resource = {}) const {
    return encode_otlp_metrics(resource, metrics, points);
  }
};

// Protobuf bytes built field by field, for shapes the encoder does not write.
struct pb {
  std::vector<uint8_t> bytes;
  pb& varint(uint64_t v) {
    while (v >= 0x80) {
      bytes.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    bytes.push_back(static_cast<uint8_t>(v));
    return *this;
  }
  pb& tag(uint32_t field, uint32_t wire) { return varint((field << 3) | wire); }
  pb& message(uint32_t field, const pb& inner) {
    tag(field, 2).varint(inner.bytes.size());
    bytes.insert(bytes.end(), inner.bytes.begin(), inner.bytes.end());
    return *this;
  }
  pb& text(uint32_t field, std::string_view s) {
    tag(field, 2).varint(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  pb& fixed64(uint32_t field, uint64_t v) {
    tag(field, 1);
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  pb& number(uint32_t field, uint64_t v) { return tag(field, 0).varint(v); }
};

pb metrics_data_of(const pb& metric, const pb& resource = {}) {
  pb scope;
  scope.message(2, metric);
  pb rm;
  // The scope first, the resource after it: readers must not depend on field order.
  rm.message(2, scope).message(1, resource);
  pb data;
  data.message(1, rm);
  return data;
}

TEST(otlp_metrics, decodes_what_the_encoder_writes) {
  const std::vector<otlp_attribute> resource{{"client_rack", "r1"}};
  payload in;
  in.add("org.apache.kafka.producer.record.send.total", otlp_metric_kind::sum, 42, {{"topic", "t"}});
  in.add("org.apache.kafka.producer.record.send.rate", otlp_metric_kind::gauge, 1.5,
         {{"node_id", "1"}, {"topic", "t"}});
  auto decoded = decode_otlp_metrics(in.encode(resource));
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  ASSERT_EQ(decoded->resources.size(), 1u);
  EXPECT_EQ(decoded->resources[0], resource);
  EXPECT_EQ(decoded->metrics, in.metrics);
  ASSERT_EQ(decoded->points.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(decoded->points[i].metric, i);
    EXPECT_EQ(decoded->points[i].resource, 0u);
    EXPECT_EQ(decoded->points[i].value, in.points[i].value);
    EXPECT_EQ(decoded->points[i].attributes, in.points[i].attributes);
    EXPECT_EQ(decoded->points[i].time_unix_nano, in.points[i].time_unix_nano);
  }
  EXPECT_EQ(decoded->skipped_points, 0u);
}

TEST(otlp_metrics, reads_fields_in_any_order_and_every_value_kind) {
  // A sum whose points come before its temporality, an as_int point, attributes of each AnyValue kind, a
  // name after the data, an unknown field, and a histogram (skipped).
  pb any_int;
  any_int.number(3, static_cast<uint64_t>(-7));
  pb any_bool;
  any_bool.number(2, 1);
  pb any_bytes;
  any_bytes.text(7, "\x01\xff");
  pb any_array;
  any_array.message(5, pb{});
  pb attr_int, attr_bool, attr_bytes, attr_array;
  attr_int.text(1, "node.id").message(2, any_int);
  attr_bool.text(1, "b").message(2, any_bool);
  attr_bytes.text(1, "raw").message(2, any_bytes);
  attr_array.text(1, "list").message(2, any_array);
  pb dp;
  dp.message(7, attr_int).message(7, attr_bool).message(7, attr_bytes).message(7, attr_array);
  dp.fixed64(6, static_cast<uint64_t>(int64_t{-3})).number(99, 5);
  pb sum;
  sum.message(1, dp).number(3, 1).number(2, 1);
  pb metric;
  metric.message(7, sum).text(1, "m.total").text(2, "a count");
  auto decoded = decode_otlp_metrics(metrics_data_of(metric).bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  ASSERT_EQ(decoded->points.size(), 1u);
  ASSERT_EQ(decoded->metrics.size(), 1u);
  const auto& p = decoded->points[0];
  const auto& m = decoded->metrics[0];
  EXPECT_EQ(m.name, "m.total");
  EXPECT_EQ(m.description, "a count");
  EXPECT_EQ(m.temporality, otlp_temporality::delta);
  EXPECT_TRUE(m.monotonic);
  EXPECT_EQ(p.value, -3);
  const std::vector<otlp_attribute> expected{{"node.id", "-7"}, {"b", "true"}, {"raw", "01ff"}};
  EXPECT_EQ(p.attributes, expected);  // the array attribute is left out

  // A point without a value, and one flagged FLAG_NO_RECORDED_VALUE: skipped.
  pb empty_dp;
  empty_dp.fixed64(3, 1);
  pb flagged_dp;
  flagged_dp.fixed64(4, 0).number(8, 1);
  pb gauge;
  gauge.message(1, empty_dp).message(1, flagged_dp);
  pb gmetric;
  gmetric.text(1, "g").message(5, gauge);
  decoded = decode_otlp_metrics(metrics_data_of(gmetric).bytes);
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->points.empty());
  EXPECT_TRUE(decoded->metrics.empty());
  EXPECT_EQ(decoded->skipped_points, 2u);

  pb hdp;
  hdp.fixed64(3, 1);
  pb histogram;
  histogram.message(1, hdp).message(1, hdp);
  pb hmetric;
  hmetric.text(1, "h").message(9, histogram);
  decoded = decode_otlp_metrics(metrics_data_of(hmetric).bytes);
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->points.empty());
  EXPECT_EQ(decoded->skipped_points, 2u);
}

TEST(otlp_metrics, refuses_malformed_payloads) {
  const auto good = payload{}.add("m", otlp_metric_kind::gauge, 1).encode();
  // Every cut of a valid payload is malformed or a shorter valid one; none crashes.
  for (size_t n = 0; n < good.size(); ++n) {
    auto r = decode_otlp_metrics(std::span(good).first(n));
    if (!r.ok()) {
      EXPECT_EQ(r.error().code, error_code::invalid_record);
    }
  }
  const std::vector<std::vector<uint8_t>> bad{
      {0x0a, 0x05, 0x00},                                                        // a length past the end
      {0x0b},                                                                    // wire type 3 (group)
      {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},  // an 11-byte varint
      {0x00, 0x00},                                                              // field number 0
  };
  for (const auto& b : bad) {
    auto r = decode_otlp_metrics(b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, error_code::invalid_record);
  }
  // A string that is not UTF-8.
  EXPECT_FALSE(decode_otlp_metrics(payload{}.add("bad\xff", otlp_metric_kind::gauge, 1).encode()).ok());
  EXPECT_FALSE(
      decode_otlp_metrics(payload{}.add("m", otlp_metric_kind::gauge, 1, {{"k", "\xc0\x80"}}).encode()).ok());
  // A value of the wrong wire type.
  pb dp;
  dp.number(4, 1);  // as_double as a varint
  pb gauge;
  gauge.message(1, dp);
  pb metric;
  metric.text(1, "m").message(5, gauge);
  EXPECT_FALSE(decode_otlp_metrics(metrics_data_of(metric).bytes).ok());
}

TEST(otlp_metrics, bounds_points_resources_attributes_and_strings) {
  payload many;
  for (int i = 0; i < 11; ++i) many.add("m" + std::to_string(i), otlp_metric_kind::gauge, i);
  otlp_limits limits;
  limits.max_points = 10;
  EXPECT_FALSE(decode_otlp_metrics(many.encode(), limits).ok());
  limits.max_points = 11;
  EXPECT_TRUE(decode_otlp_metrics(many.encode(), limits).ok());

  std::vector<otlp_attribute> attributes;
  for (int i = 0; i < 5; ++i) attributes.push_back({"k" + std::to_string(i), "v"});
  limits.max_attributes = 4;
  EXPECT_FALSE(decode_otlp_metrics(payload{}.encode(attributes), limits).ok());
  EXPECT_FALSE(
      decode_otlp_metrics(payload{}.add("m", otlp_metric_kind::gauge, 1, attributes).encode(), limits).ok());

  limits = {};
  limits.max_string_bytes = 8;
  EXPECT_FALSE(
      decode_otlp_metrics(payload{}.add("a.long.name", otlp_metric_kind::gauge, 1).encode(), limits).ok());

  // Resources: each ResourceMetrics counts.
  pb rm;
  rm.message(1, pb{});
  pb data;
  for (int i = 0; i < 3; ++i) data.message(1, rm);
  limits = {};
  limits.max_resources = 2;
  EXPECT_FALSE(decode_otlp_metrics(data.bytes, limits).ok());
  limits.max_resources = 3;
  EXPECT_TRUE(decode_otlp_metrics(data.bytes, limits).ok());

  // Many points of one metric keep its name once.
  pb dp;
  dp.fixed64(4, 0);
  pb gauge;
  for (int i = 0; i < 100; ++i) gauge.message(1, dp);
  pb metric;
  metric.text(1, std::string(4000, 'n')).message(5, gauge);
  auto decoded = decode_otlp_metrics(metrics_data_of(metric).bytes);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->points.size(), 100u);
  EXPECT_EQ(decoded->metrics.size(), 1u);
}

TEST(otlp_metrics, utf8_is_checked_strictly) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("plain"));
  EXPECT_TRUE(valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(valid_utf8("\xc3"));              // truncated
  EXPECT_FALSE(valid_utf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(valid_utf8("\x80"));              // a lone continuation byte
}

}  // namespace
}  // namespace mala::protocol
