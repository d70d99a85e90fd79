#include "mala/protocol/otlp_metrics.h"

#include <gtest/gtest.h>

namespace mala::protocol {
namespace {

otlp_number_point point(std::string name, otlp_metric_kind kind, double value,
                        std::vector<otlp_attribute> attributes = {}) {
  otlp_number_point p;
  p.metric = std::move(name);
  p.kind = kind;
  p.value = value;
  p.attributes = std::move(attributes);
  p.time_unix_nano = 1700000000000000000ULL;
  if (kind == otlp_metric_kind::sum) {
    p.monotonic = true;
    p.temporality = otlp_temporality::cumulative;
  }
  return p;
}

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
  const std::vector<otlp_number_point> points{
      point("org.apache.kafka.producer.record.send.total", otlp_metric_kind::sum, 42, {{"topic", "t"}}),
      point("org.apache.kafka.producer.record.send.rate", otlp_metric_kind::gauge, 1.5,
            {{"node_id", "1"}, {"topic", "t"}}),
  };
  const auto bytes = encode_otlp_metrics(resource, points);
  auto decoded = decode_otlp_metrics(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  ASSERT_EQ(decoded->resources.size(), 1u);
  EXPECT_EQ(decoded->resources[0], resource);
  ASSERT_EQ(decoded->points.size(), 2u);
  EXPECT_EQ(decoded->points[0].metric, "org.apache.kafka.producer.record.send.total");
  EXPECT_EQ(decoded->points[0].kind, otlp_metric_kind::sum);
  EXPECT_TRUE(decoded->points[0].monotonic);
  EXPECT_EQ(decoded->points[0].temporality, otlp_temporality::cumulative);
  EXPECT_EQ(decoded->points[0].value, 42);
  EXPECT_EQ(decoded->points[0].attributes, points[0].attributes);
  EXPECT_EQ(decoded->points[0].time_unix_nano, points[0].time_unix_nano);
  EXPECT_EQ(decoded->points[1].kind, otlp_metric_kind::gauge);
  EXPECT_EQ(decoded->points[1].value, 1.5);
  EXPECT_EQ(decoded->points[1].attributes, points[1].attributes);
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
  const auto& p = decoded->points[0];
  EXPECT_EQ(p.metric, "m.total");
  EXPECT_EQ(p.description, "a count");
  EXPECT_EQ(p.temporality, otlp_temporality::delta);
  EXPECT_TRUE(p.monotonic);
  EXPECT_EQ(p.value, -3);
  const std::vector<otlp_attribute> expected{{"node.id", "-7"}, {"b", "true"}, {"raw", "01ff"}};
  EXPECT_EQ(p.attributes, expected);  // the array attribute is left out

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
  const auto good = encode_otlp_metrics({}, {point("m", otlp_metric_kind::gauge, 1)});
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
  // A value of the wrong wire type.
  pb dp;
  dp.number(4, 1);  // as_double as a varint
  pb gauge;
  gauge.message(1, dp);
  pb metric;
  metric.text(1, "m").message(5, gauge);
  EXPECT_FALSE(decode_otlp_metrics(metrics_data_of(metric).bytes).ok());
}

TEST(otlp_metrics, bounds_points_attributes_and_strings) {
  std::vector<otlp_number_point> many;
  for (int i = 0; i < 11; ++i) many.push_back(point("m" + std::to_string(i), otlp_metric_kind::gauge, i));
  otlp_limits limits;
  limits.max_points = 10;
  EXPECT_FALSE(decode_otlp_metrics(encode_otlp_metrics({}, many), limits).ok());
  limits.max_points = 11;
  EXPECT_TRUE(decode_otlp_metrics(encode_otlp_metrics({}, many), limits).ok());

  std::vector<otlp_attribute> attributes;
  for (int i = 0; i < 5; ++i) attributes.push_back({"k" + std::to_string(i), "v"});
  limits.max_attributes = 4;
  EXPECT_FALSE(decode_otlp_metrics(encode_otlp_metrics(attributes, {}), limits).ok());
  EXPECT_FALSE(decode_otlp_metrics(
                   encode_otlp_metrics({}, {point("m", otlp_metric_kind::gauge, 1, attributes)}), limits)
                   .ok());

  limits = {};
  limits.max_string_bytes = 8;
  EXPECT_FALSE(
      decode_otlp_metrics(encode_otlp_metrics({}, {point("a.long.name", otlp_metric_kind::gauge, 1)}), limits)
          .ok());
}

}  // namespace
}  // namespace mala::protocol
