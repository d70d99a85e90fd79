// Latency histograms and the Prometheus text exposition format the metrics endpoint writes.
#include "mala/common/metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace mala::metrics {
namespace {

TEST(latency_histogram, a_latency_falls_in_the_first_bucket_whose_bound_is_at_or_above_it) {
  EXPECT_EQ(latency_bucket_of(0), 0u);
  EXPECT_EQ(latency_bucket_of(50), 0u);    // 0.05 ms, the first bound
  EXPECT_EQ(latency_bucket_of(51), 1u);    // just above it
  EXPECT_EQ(latency_bucket_of(1000), 4u);  // 1 ms
  EXPECT_EQ(latency_bucket_of(1001), 5u);
  EXPECT_EQ(latency_bucket_of(30'000'000), latency_bounds_ms.size() - 1);  // 30 s
  EXPECT_EQ(latency_bucket_of(30'000'001), latency_bounds_ms.size());      // +Inf
}

TEST(latency_histogram, merging_adds_counts_and_sums) {
  latency_histogram a;
  latency_histogram b;
  a.record(100);
  a.record(2'000);
  b.record(100);
  a.merge(b);
  EXPECT_EQ(a.count(), 3u);
  EXPECT_EQ(a.sum_micros, 2'200u);
  EXPECT_EQ(a.buckets[latency_bucket_of(100)], 2u);
}

TEST(shared_histogram, a_snapshot_holds_what_was_recorded) {
  shared_histogram h;
  h.record(10);
  h.record(40'000'000);
  const auto s = h.snapshot();
  EXPECT_EQ(s.count(), 2u);
  EXPECT_EQ(s.buckets.back(), 1u);
  EXPECT_EQ(s.sum_micros, 40'000'010u);
}

TEST(prometheus_text, a_counter_family_is_named_as_its_samples_with_total) {
  prometheus_text out;
  out.family("kafka_server_brokertopicmetrics_messagesin_total", "Records in.",
             prometheus_text::type::counter);
  out.sample("kafka_server_brokertopicmetrics_messagesin_total", {}, uint64_t{7});
  out.sample("kafka_server_brokertopicmetrics_messagesin_total", {{"topic", "orders"}}, uint64_t{5});
  EXPECT_EQ(out.text(),
            "# HELP kafka_server_brokertopicmetrics_messagesin_total Records in.\n"
            "# TYPE kafka_server_brokertopicmetrics_messagesin_total counter\n"
            "kafka_server_brokertopicmetrics_messagesin_total 7\n"
            "kafka_server_brokertopicmetrics_messagesin_total{topic=\"orders\"} 5\n");
}

TEST(prometheus_text, label_values_are_escaped) {
  prometheus_text out;
  out.sample("g", {{"group", "a\"b\\c\nd"}, {"x", "y"}}, 1.5);
  EXPECT_EQ(out.text(), "g{group=\"a\\\"b\\\\c\\nd\",x=\"y\"} 1.5\n");
}

TEST(prometheus_text, special_values_are_written_as_prometheus_reads_them) {
  prometheus_text out;
  out.sample("a", {}, std::numeric_limits<double>::infinity());
  out.sample("b", {}, std::numeric_limits<double>::quiet_NaN());
  out.sample("c", {}, -1.0);
  EXPECT_EQ(out.text(), "a +Inf\nb NaN\nc -1\n");
}

TEST(prometheus_text, a_histogram_has_cumulative_buckets_sum_in_ms_and_count) {
  latency_histogram h;
  h.record(30);          // 0.03 ms: first bucket
  h.record(700);         // 0.7 ms: le=1
  h.record(60'000'000);  // 60 s: +Inf only
  prometheus_text out;
  out.histogram("t", {{"request", "Produce"}}, h);
  const std::string& text = out.text();
  EXPECT_NE(text.find("t_bucket{request=\"Produce\",le=\"0.05\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_bucket{request=\"Produce\",le=\"0.5\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_bucket{request=\"Produce\",le=\"1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_bucket{request=\"Produce\",le=\"30000\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_bucket{request=\"Produce\",le=\"+Inf\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_sum{request=\"Produce\"} 60000.73\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_count{request=\"Produce\"} 3\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace mala::metrics
