// What the broker counts for the metrics endpoint (broker/metrics_exporter.h): Kafka's BrokerTopicMetrics
// (messages and bytes in and out per topic, produce and fetch requests) and RequestMetrics (requests per API
// and version, total time per API).
//
// One shard_metrics per shard, written only on that shard's thread with plain integers: the data path pays an
// increment and, per topic of a request, a hash lookup, and shares nothing with other shards. A scrape reads
// each shard's counters on that shard (snapshot()).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mala/common/metrics.h"

namespace mala::broker {

// One topic's traffic on one shard (Kafka's BrokerTopicMetrics; the *PerSec meters' Count attributes).
struct topic_traffic {
  uint64_t messages_in = 0;  // records appended by Produce as leader (MessagesInPerSec)
  uint64_t bytes_in = 0;     // bytes of those batches (BytesInPerSec)
  uint64_t bytes_out =
      0;  // record bytes consumers fetched; followers' fetches are replication (BytesOutPerSec)
  uint64_t produce_requests = 0;  // partitions of Produce requests (TotalProduceRequestsPerSec)
  uint64_t failed_produce_requests =
      0;                        // of those, the ones answered with an error (FailedProduceRequestsPerSec)
  uint64_t fetch_requests = 0;  // partitions of consumers' Fetch requests (TotalFetchRequestsPerSec)
  uint64_t failed_fetch_requests =
      0;  // of those, the ones answered with an error (FailedFetchRequestsPerSec)

  void merge(const topic_traffic& other);
};

// The highest API key counted, and versions per API.
inline constexpr int16_t max_counted_api_key = 127;
inline constexpr int16_t max_counted_api_version = 31;
// Where a follower's Fetch is counted: Kafka's RequestMetrics tell FetchFollower from FetchConsumer.
inline constexpr int16_t fetch_follower_metric_key = max_counted_api_key + 1;

// One API's requests on one shard (Kafka's RequestMetrics: RequestsPerSec per version, TotalTimeMs).
struct api_traffic {
  std::array<uint64_t, max_counted_api_version + 1> requests_by_version{};
  metrics::latency_histogram total_time;  // from the request's start to its response, in ms

  bool empty() const { return total_time.count() == 0; }
  void merge(const api_traffic& other);
};

// What a scrape reads of one shard (or of every shard, merged).
struct traffic_snapshot {
  std::map<std::string, topic_traffic> topics;
  // What the topics deleted since the start counted: the broker-wide series (all topics) include it, so that
  // they never go down (Kafka keeps its all-topics meters apart from the per-topic ones).
  topic_traffic deleted_topics;
  std::vector<api_traffic>
      apis;  // indexed by API key (and fetch_follower_metric_key); empty for APIs not seen
  uint64_t replication_bytes_in = 0;   // bytes a follower appended from its leader (ReplicationBytesInPerSec)
  uint64_t replication_bytes_out = 0;  // bytes followers fetched from this leader (ReplicationBytesOutPerSec)

  void merge(const traffic_snapshot& other);
};

// One shard's counters. Its shard's thread only.
class shard_metrics {
 public:
  shard_metrics();

  // The counters of `name`, made on first use.
  topic_traffic& topic(std::string_view name);
  // A request of `api_key` (or fetch_follower_metric_key) v`version` answered `micros` after it started.
  // Out-of-range keys or versions are not counted.
  void record_request(int16_t api_key, int16_t version, uint64_t micros);
  void add_replication_bytes_in(uint64_t bytes) { _replication_bytes_in += bytes; }
  void add_replication_bytes_out(uint64_t bytes) { _replication_bytes_out += bytes; }

  // A copy of the counters. Topics for which `exists` says false are dropped, here and from then on (Kafka
  // removes a deleted topic's metrics), their counts kept in deleted_topics; an unset `exists` keeps every
  // topic.
  traffic_snapshot snapshot(const std::function<bool(const std::string&)>& exists);

 private:
  struct name_hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, topic_traffic, name_hash, std::equal_to<>> _topics;
  std::vector<api_traffic> _apis;
  topic_traffic _deleted_topics;
  uint64_t _replication_bytes_in = 0;
  uint64_t _replication_bytes_out = 0;
};

// Every shard's counters, and the few recorded off the shards.
class broker_metrics {
 public:
  explicit broker_metrics(size_t shard_count);

  // The calling shard's counters (the first shard's on a thread that is no shard: unit tests).
  shard_metrics& here();
  shard_metrics& on(size_t shard) { return *_shards[shard]; }
  size_t shard_count() const { return _shards.size(); }

  // Kafka's LogFlushStats.LogFlushRateAndTimeMs: each log flush's fsyncs, recorded on the blocking pool.
  metrics::shared_histogram& log_flush_time() { return _log_flush_time; }

 private:
  std::vector<std::unique_ptr<shard_metrics>> _shards;
  metrics::shared_histogram _log_flush_time;
};

}  // namespace mala::broker
