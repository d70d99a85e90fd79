// The metrics and health endpoint's answers (metrics.listeners, net/http_server.h):
//   /metrics        Prometheus text, named as the Prometheus JMX exporter names Kafka's MBeans with its Kafka
//                   example rules (kafka_server_brokertopicmetrics_messagesin_total{topic=...}, ...), so that
//                   Kafka dashboards and alerts work unchanged; consumer group lag as kafka_exporter names
//                   it.
//   /health/live    200 while the process serves.
//   /health/ready   200 once the node serves (broker: caught up with the metadata log and its listeners
//                   open; controller only: the quorum has a leader), 503 before.
// Runs on the home shard; a scrape hops to each shard to read its counters and replicas there.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>

#include "mala/broker/broker_metrics.h"
#include "mala/broker/request_context.h"
#include "mala/net/http_server.h"

namespace mala::broker {

struct metrics_exporter_options {
  // Whether the node serves: see /health/ready above. Home shard.
  std::function<bool()> ready;
  // The node's roles.
  bool broker_role = true;
  bool controller_role = true;
};

class metrics_exporter {
 public:
  metrics_exporter(const broker_services& services, broker_metrics& counters,
                   metrics_exporter_options options);

  // The HTTP server's handler. Home shard.
  asio::awaitable<net::http_response> serve(const http_request_head& request);
  // The /metrics text. Home shard.
  asio::awaitable<std::string> scrape();

 private:
  const broker_services& _services;
  broker_metrics& _counters;
  metrics_exporter_options _options;
  // The shards' CPU clocks at the previous scrape, for their idle ratio since then.
  struct cpu_sample {
    int64_t wall_nanos = 0;
    std::vector<int64_t> shard_cpu_nanos;
  };
  cpu_sample _previous;
  std::vector<double> _idle_ratio;  // per shard, as of the last scrape at least a second after the one before
};

}  // namespace mala::broker
