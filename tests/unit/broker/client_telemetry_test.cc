#include "mala/broker/client_telemetry.h"

#include <gtest/gtest.h>

#include "mala/protocol/compression.h"
#include "mala/protocol/otlp_metrics.h"

namespace mala::broker {
namespace {

using protocol::otlp_metric_kind;
using protocol::otlp_number_point;
using protocol::otlp_temporality;

constexpr int64_t t0 = 1'700'000'000'000;

const telemetry_client java_client{"app-1", "apache-kafka-java", "4.4.0", "127.0.0.1", "50000"};

metadata::metadata_image with_subscription(const std::string& name, metadata::config_map configs) {
  metadata::metadata_image image;
  image.configs[{metadata::config_resource_type::client_metrics, name}] = std::move(configs);
  return image;
}

// Metrics with one point each, as encode_otlp_metrics takes them.
struct payload {
  std::vector<protocol::otlp_metric> metrics;
  std::vector<otlp_number_point> points;

  payload& add(std::string name, otlp_metric_kind kind, double value,
               std::vector<protocol::otlp_attribute> attributes = {},
               otlp_temporality temporality = otlp_temporality::cumulative, std::string description = "") {
    protocol::otlp_metric m;
    m.name = std::move(name);
    m.kind = kind;
    m.monotonic = kind == otlp_metric_kind::sum;
    m.temporality = kind == otlp_metric_kind::sum ? temporality : otlp_temporality::unspecified;
    m.description = std::move(description);
    otlp_number_point p;
    p.metric = metrics.size();
    p.value = value;
    p.attributes = std::move(attributes);
    metrics.push_back(std::move(m));
    points.push_back(std::move(p));
    return *this;
  }
  std::vector<uint8_t> encode(const std::vector<protocol::otlp_attribute>& resource = {}) const {
    return protocol::encode_otlp_metrics(resource, metrics, points);
  }
};

protocol::push_telemetry_request push_of(const protocol::get_telemetry_subscriptions_response& subscription,
                                         std::vector<uint8_t> metrics, int8_t compression = 0) {
  protocol::push_telemetry_request r;
  r.client_instance_id = subscription.client_instance_id;
  r.subscription_id = subscription.subscription_id;
  r.compression_type = compression;
  r.metrics = std::move(metrics);
  return r;
}

TEST(client_telemetry, subscribes_a_matching_client_and_shows_what_it_pushes) {
  client_telemetry telemetry;
  const auto image = with_subscription(
      "producers",
      {{"metrics", "org.apache.kafka.producer."}, {"interval.ms", "1000"}, {"match", "client_id=app-.*"}});
  auto sub = telemetry.get_subscriptions(image, uuid{}, java_client, t0);
  EXPECT_EQ(sub.error_code, 0);
  EXPECT_FALSE(sub.client_instance_id.is_zero());
  EXPECT_EQ(sub.push_interval_ms, 1000);
  EXPECT_EQ(sub.requested_metrics, std::vector<std::string>{"org.apache.kafka.producer."});
  EXPECT_EQ(sub.accepted_compression_types, (std::vector<int8_t>{4, 3, 1, 2}));  // zstd, lz4, gzip, snappy
  EXPECT_EQ(sub.telemetry_max_bytes, 1024 * 1024);
  EXPECT_FALSE(sub.delta_temporality);

  // The first push right after the subscription is taken whatever the interval; zstd-compressed.
  const auto first =
      payload{}
          .add("org.apache.kafka.producer.record.send.total", otlp_metric_kind::sum, 10, {{"topic", "t"}})
          .add("org.apache.kafka.producer.record-send.rate", otlp_metric_kind::gauge, 2.5, {{"node.id", "1"}},
               otlp_temporality::unspecified, "sends per second")
          .add("org.apache.kafka.consumer.fetch.total", otlp_metric_kind::sum, 1)  // not asked for
          .encode({{"client_rack", "r1"}});
  auto pushed =
      telemetry.push(image, push_of(sub, protocol::compress(protocol::compression_codec::zstd, first), 4),
                     java_client, t0 + 10);
  EXPECT_EQ(pushed.error_code, 0);
  std::string text;
  telemetry.append_prometheus(text, t0 + 10);
  const std::string labels = "client_instance_id=\"" + sub.client_instance_id.to_string() +
                             "\",client_id=\"app-1\",client_software_name=\"apache-kafka-java\","
                             "client_software_version=\"4.4.0\",client_rack=\"r1\"";
  EXPECT_NE(text.find("# TYPE org_apache_kafka_producer_record_send_total counter\n"
                      "org_apache_kafka_producer_record_send_total{" +
                      labels + ",topic=\"t\"} 10\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# HELP org_apache_kafka_producer_record_send_rate sends per second\n"
                      "# TYPE org_apache_kafka_producer_record_send_rate gauge\n"
                      "org_apache_kafka_producer_record_send_rate{" +
                      labels + ",node_id=\"1\"} 2.5\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(telemetry.series_count(), 2u);  // the consumer metric was not asked for
  EXPECT_EQ(text.find("consumer"), std::string::npos) << text;

  // A push before the interval is throttled; after it, the cumulative sum replaces the value.
  EXPECT_EQ(telemetry.push(image, push_of(sub, first), java_client, t0 + 500).error_code,
            to_wire(error_code::throttling_quota_exceeded));
  const auto later =
      payload{}
          .add("org.apache.kafka.producer.record.send.total", otlp_metric_kind::sum, 25, {{"topic", "t"}})
          .encode();
  EXPECT_EQ(telemetry.push(image, push_of(sub, later), java_client, t0 + 1100).error_code, 0);
  // Delta sums add up.
  const auto delta = payload{}
                         .add("org.apache.kafka.producer.bytes.total", otlp_metric_kind::sum, 5,
                              {{"topic", "t"}}, otlp_temporality::delta)
                         .encode();
  EXPECT_EQ(telemetry.push(image, push_of(sub, delta), java_client, t0 + 2200).error_code, 0);
  EXPECT_EQ(telemetry.push(image, push_of(sub, delta), java_client, t0 + 3300).error_code, 0);
  text.clear();
  telemetry.append_prometheus(text, t0 + 3300);
  EXPECT_NE(text.find("topic=\"t\"} 25\n"), std::string::npos) << text;
  EXPECT_NE(text.find("org_apache_kafka_producer_bytes_total{"), std::string::npos) << text;
  EXPECT_NE(text.find("topic=\"t\"} 10\n"), std::string::npos) << text;  // 5 + 5

  // Forgotten max(60 s, 3 intervals) after its last request, with its series.
  text.clear();
  telemetry.append_prometheus(text, t0 + 3300 + 61'000);
  EXPECT_EQ(text, "");
  EXPECT_EQ(telemetry.instance_count(), 0u);
  EXPECT_EQ(telemetry.series_count(), 0u);
}

TEST(client_telemetry, a_client_no_subscription_matches_gets_no_metrics) {
  client_telemetry telemetry;
  const auto image = with_subscription("other", {{"metrics", "*"}, {"match", "client_id=other"}});
  auto sub = telemetry.get_subscriptions(image, uuid{}, java_client, t0);
  EXPECT_EQ(sub.error_code, 0);
  EXPECT_TRUE(sub.requested_metrics.empty());
  EXPECT_EQ(sub.push_interval_ms, 300000);

  // "*" in any matching subscription: every metric, and the shortest interval.
  metadata::metadata_image both = with_subscription("all", {{"metrics", "*"}, {"interval.ms", "2000"}});
  both.configs[{metadata::config_resource_type::client_metrics, "some"}] = {{"metrics", "a.b"},
                                                                            {"interval.ms", "500"}};
  client_telemetry other;
  sub = other.get_subscriptions(both, uuid{}, java_client, t0);
  EXPECT_EQ(sub.requested_metrics, std::vector<std::string>{"*"});
  EXPECT_EQ(sub.push_interval_ms, 500);
}

TEST(client_telemetry, refuses_pushes_as_kafka_does) {
  client_telemetry_options options;
  options.telemetry_max_bytes = 64;
  client_telemetry telemetry(options);
  auto image = with_subscription("s", {{"metrics", "*"}, {"interval.ms", "1000"}});
  auto sub = telemetry.get_subscriptions(image, uuid{}, java_client, t0);
  ASSERT_EQ(sub.error_code, 0);
  // A second GetTelemetrySubscriptions within the interval.
  EXPECT_EQ(telemetry.get_subscriptions(image, sub.client_instance_id, java_client, t0 + 10).error_code,
            to_wire(error_code::throttling_quota_exceeded));

  // No instance id.
  auto bad = push_of(sub, {});
  bad.client_instance_id = uuid{};
  EXPECT_EQ(telemetry.push(image, bad, java_client, t0 + 20).error_code,
            to_wire(error_code::invalid_request));
  // Another subscription id: UNKNOWN_SUBSCRIPTION_ID, after which a new GetTelemetrySubscriptions is taken
  // at once.
  auto wrong = push_of(sub, {});
  wrong.subscription_id ^= 1;
  EXPECT_EQ(telemetry.push(image, wrong, java_client, t0 + 30).error_code,
            to_wire(error_code::unknown_subscription_id));
  sub = telemetry.get_subscriptions(image, sub.client_instance_id, java_client, t0 + 40);
  EXPECT_EQ(sub.error_code, 0);
  // Over telemetry.max.bytes.
  EXPECT_EQ(telemetry.push(image, push_of(sub, std::vector<uint8_t>(65, 0)), java_client, t0 + 50).error_code,
            to_wire(error_code::telemetry_too_large));
  // An unknown codec.
  EXPECT_EQ(telemetry.push(image, push_of(sub, {}, 9), java_client, t0 + 2000).error_code,
            to_wire(error_code::unsupported_compression_type));
  // Not decodable: INVALID_RECORD.
  sub = telemetry.get_subscriptions(image, sub.client_instance_id, java_client, t0 + 2010);
  ASSERT_EQ(sub.error_code, 0);
  EXPECT_EQ(telemetry.push(image, push_of(sub, {0x0a, 0x05}), java_client, t0 + 2020).error_code,
            to_wire(error_code::invalid_record));
  // A terminating push is taken inside the interval; anything after it is INVALID_REQUEST.
  auto last = push_of(sub, {});
  last.terminating = true;
  EXPECT_EQ(telemetry.push(image, last, java_client, t0 + 2030).error_code, 0);
  EXPECT_EQ(telemetry.push(image, push_of(sub, {}), java_client, t0 + 9000).error_code,
            to_wire(error_code::invalid_request));
}

TEST(client_telemetry, a_subscription_change_gives_a_new_subscription_id_every_broker_agrees_on) {
  client_telemetry first, second;
  auto image = with_subscription("s", {{"metrics", "a.,b."}, {"interval.ms", "1000"}});
  auto sub = first.get_subscriptions(image, uuid{}, java_client, t0);
  ASSERT_EQ(sub.error_code, 0);
  // Another broker that never saw the client takes its push: the id is computed, not remembered.
  EXPECT_EQ(second.push(image, push_of(sub, {}), java_client, t0 + 10).error_code, 0);

  image = with_subscription("s", {{"metrics", "a."}, {"interval.ms", "1000"}});
  EXPECT_EQ(first.push(image, push_of(sub, {}), java_client, t0 + 2000).error_code,
            to_wire(error_code::unknown_subscription_id));
  auto renewed = first.get_subscriptions(image, sub.client_instance_id, java_client, t0 + 2010);
  EXPECT_EQ(renewed.error_code, 0);
  EXPECT_NE(renewed.subscription_id, sub.subscription_id);
  EXPECT_EQ(renewed.requested_metrics, std::vector<std::string>{"a."});
}

TEST(client_telemetry, bounds_instances_and_series) {
  client_telemetry_options options;
  options.max_instances = 2;
  options.max_series_per_instance = 3;
  client_telemetry telemetry(options);
  const auto image = with_subscription("s", {{"metrics", "*"}, {"interval.ms", "1000"}});
  payload points;
  for (int i = 0; i < 5; ++i) points.add("m" + std::to_string(i), otlp_metric_kind::gauge, i);
  auto sub = telemetry.get_subscriptions(image, uuid{}, java_client, t0);
  EXPECT_EQ(telemetry.push(image, push_of(sub, points.encode()), java_client, t0 + 1).error_code, 0);
  EXPECT_EQ(telemetry.series_count(), 3u);  // the rest are dropped
  telemetry.get_subscriptions(image, uuid{}, java_client, t0 + 2);
  telemetry.get_subscriptions(image, uuid{}, java_client, t0 + 3);
  EXPECT_EQ(telemetry.instance_count(), 2u);  // the least recently seen went
  EXPECT_EQ(telemetry.series_count(), 0u);
}

TEST(client_telemetry, bounds_the_bytes_an_instance_stores) {
  client_telemetry_options options;
  options.max_bytes_per_instance = 2000;
  client_telemetry telemetry(options);
  const auto image = with_subscription("s", {{"metrics", "*"}, {"interval.ms", "1000"}});
  auto sub = telemetry.get_subscriptions(image, uuid{}, java_client, t0);
  // A large resource attribute is cut at 512 bytes; series stop once the instance's bytes are spent.
  payload points;
  for (int i = 0; i < 20; ++i) points.add("m" + std::to_string(i), otlp_metric_kind::gauge, i);
  EXPECT_EQ(
      telemetry
          .push(image, push_of(sub, points.encode({{"big", std::string(4000, 'x')}})), java_client, t0 + 1)
          .error_code,
      0);
  EXPECT_GT(telemetry.series_count(), 0u);
  EXPECT_LT(telemetry.series_count(), 5u);
  std::string text;
  telemetry.append_prometheus(text, t0 + 2);
  EXPECT_NE(text.find("big=\"" + std::string(512, 'x') + "\""), std::string::npos);
  EXPECT_EQ(text.find(std::string(513, 'x')), std::string::npos);
}

TEST(client_telemetry, names_labels_and_values_are_made_safe_for_the_text_format) {
  client_telemetry telemetry;
  const auto image = with_subscription("s", {{"metrics", "*"}, {"interval.ms", "1000"}});
  telemetry_client odd = java_client;
  odd.client_id = "a\"b\\c\nd\xff";  // quote, backslash, newline, a byte that is not UTF-8
  auto sub = telemetry.get_subscriptions(image, uuid{}, odd, t0);
  const auto pushed =
      payload{}
          .add("9lives-rate", otlp_metric_kind::gauge, 1, {{"1st.key", "v"}, {"__name__", "x"}})
          .add("kafka_server_brokertopicmetrics_messagesin_total", otlp_metric_kind::sum, 7)
          .add("process_cpu_seconds", otlp_metric_kind::gauge, 7)
          .add("x", otlp_metric_kind::sum, 3)
          .add("x_total", otlp_metric_kind::gauge, 4)  // the same name as a gauge: dropped
          .encode();
  ASSERT_EQ(telemetry.push(image, push_of(sub, pushed), odd, t0 + 1).error_code, 0);
  std::string text;
  telemetry.append_prometheus(text, t0 + 2);
  EXPECT_NE(text.find("# TYPE _9lives_rate gauge\n_9lives_rate{"), std::string::npos) << text;
  EXPECT_NE(text.find("client_id=\"a\\\"b\\\\c\\nd\xef\xbf\xbd\""), std::string::npos) << text;
  EXPECT_NE(text.find(",_1st_key=\"v\"}"), std::string::npos) << text;  // __name__ left out
  EXPECT_EQ(text.find("kafka_"), std::string::npos) << text;  // the node's own names are not pushed into
  EXPECT_EQ(text.find("process_"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE x_total counter\nx_total{"), std::string::npos) << text;
  EXPECT_NE(text.find("} 3\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("} 4\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace mala::broker
