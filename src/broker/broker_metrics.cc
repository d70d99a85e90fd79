#include "mala/broker/broker_metrics.h"

#include <algorithm>

#include "mala/common/current_shard.h"

namespace mala::broker {

void topic_traffic::merge(const topic_traffic& other) {
  messages_in += other.messages_in;
  bytes_in += other.bytes_in;
  bytes_out += other.bytes_out;
  produce_requests += other.produce_requests;
  failed_produce_requests += other.failed_produce_requests;
  fetch_requests += other.fetch_requests;
  failed_fetch_requests += other.failed_fetch_requests;
}

void api_traffic::merge(const api_traffic& other) {
  for (size_t v = 0; v < requests_by_version.size(); ++v)
    requests_by_version[v] += other.requests_by_version[v];
  total_time.merge(other.total_time);
}

void traffic_snapshot::merge(const traffic_snapshot& other) {
  for (const auto& [name, t] : other.topics) topics[name].merge(t);
  deleted_topics.merge(other.deleted_topics);
  if (apis.size() < other.apis.size()) apis.resize(other.apis.size());
  for (size_t k = 0; k < other.apis.size(); ++k) apis[k].merge(other.apis[k]);
  replication_bytes_in += other.replication_bytes_in;
  replication_bytes_out += other.replication_bytes_out;
}

shard_metrics::shard_metrics() : _apis(fetch_follower_metric_key + 1) {}

topic_traffic& shard_metrics::topic(std::string_view name) {
  auto it = _topics.find(name);
  if (it == _topics.end()) it = _topics.emplace(std::string(name), topic_traffic{}).first;
  return it->second;
}

void shard_metrics::record_request(int16_t api_key, int16_t version, uint64_t micros) {
  if (api_key < 0 || api_key > fetch_follower_metric_key || version < 0 || version > max_counted_api_version)
    return;
  auto& api = _apis[static_cast<size_t>(api_key)];
  ++api.requests_by_version[static_cast<size_t>(version)];
  api.total_time.record(micros);
}

traffic_snapshot shard_metrics::snapshot(const std::function<bool(const std::string&)>& exists) {
  traffic_snapshot out;
  for (auto it = _topics.begin(); it != _topics.end();) {
    if (exists && !exists(it->first)) {
      _deleted_topics.merge(it->second);
      it = _topics.erase(it);
      continue;
    }
    out.topics.emplace(it->first, it->second);
    ++it;
  }
  out.apis = _apis;
  out.deleted_topics = _deleted_topics;
  out.replication_bytes_in = _replication_bytes_in;
  out.replication_bytes_out = _replication_bytes_out;
  return out;
}

broker_metrics::broker_metrics(size_t shard_count) {
  _shards.reserve(std::max<size_t>(shard_count, 1));
  for (size_t i = 0; i < std::max<size_t>(shard_count, 1); ++i)
    _shards.push_back(std::make_unique<shard_metrics>());
}

shard_metrics& broker_metrics::here() {
  const int shard = current_shard();
  if (shard < 0 || static_cast<size_t>(shard) >= _shards.size()) return *_shards[0];
  return *_shards[static_cast<size_t>(shard)];
}

}  // namespace mala::broker
