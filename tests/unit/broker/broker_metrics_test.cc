// The per-shard counters behind the metrics endpoint: topics counted and dropped once deleted, requests
// counted per API and version within bounds, shards merged.
#include "mala/broker/broker_metrics.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace mala::broker {
namespace {

TEST(shard_metrics, a_snapshot_drops_topics_that_no_longer_exist_for_good) {
  shard_metrics m;
  m.topic("orders").messages_in += 3;
  m.topic("orders").bytes_in += 300;
  m.topic("gone").messages_in += 1;
  std::set<std::string> existing{"orders", "gone"};
  auto exists = [&existing](const std::string& t) { return existing.contains(t); };
  auto first = m.snapshot(exists);
  ASSERT_EQ(first.topics.size(), 2u);
  EXPECT_EQ(first.topics["orders"].messages_in, 3u);
  existing.erase("gone");
  auto second = m.snapshot(exists);
  EXPECT_EQ(second.topics.size(), 1u);
  // The broker-wide series keep what it counted: they never go down.
  EXPECT_EQ(second.deleted_topics.messages_in, 1u);
  // A topic re-created under the same name starts from zero, as Kafka's metrics of a new topic do.
  existing.insert("gone");
  EXPECT_EQ(m.topic("gone").messages_in, 0u);
}

TEST(shard_metrics, requests_are_counted_per_version_and_out_of_range_ones_ignored) {
  shard_metrics m;
  m.record_request(0, 9, 1500);
  m.record_request(0, 9, 500);
  m.record_request(0, 11, 100);
  m.record_request(fetch_follower_metric_key, 17, 10);
  m.record_request(-1, 0, 1);
  m.record_request(fetch_follower_metric_key + 1, 0, 1);
  m.record_request(3, max_counted_api_version + 1, 1);
  auto s = m.snapshot({});
  EXPECT_EQ(s.apis[0].requests_by_version[9], 2u);
  EXPECT_EQ(s.apis[0].requests_by_version[11], 1u);
  EXPECT_EQ(s.apis[0].total_time.count(), 3u);
  EXPECT_EQ(s.apis[0].total_time.sum_micros, 2100u);
  EXPECT_EQ(s.apis[fetch_follower_metric_key].requests_by_version[17], 1u);
  EXPECT_TRUE(s.apis[3].empty());
}

TEST(broker_metrics, shards_merge_into_one_view) {
  broker_metrics metrics(2);
  metrics.on(0).topic("t").bytes_out += 10;
  metrics.on(1).topic("t").bytes_out += 5;
  metrics.on(1).add_replication_bytes_out(7);
  metrics.on(0).record_request(18, 3, 10);
  metrics.on(1).record_request(18, 3, 20);
  traffic_snapshot all;
  for (size_t s = 0; s < metrics.shard_count(); ++s) all.merge(metrics.on(s).snapshot({}));
  EXPECT_EQ(all.topics["t"].bytes_out, 15u);
  EXPECT_EQ(all.replication_bytes_out, 7u);
  EXPECT_EQ(all.apis[18].requests_by_version[3], 2u);
  // A thread that is no shard (this test) counts into the first shard.
  metrics.here().topic("t").bytes_out += 1;
  EXPECT_EQ(metrics.on(0).snapshot({}).topics["t"].bytes_out, 11u);
}

}  // namespace
}  // namespace mala::broker
