// ListConfigResources (key 74, v0-1; v0 was ListClientMetricsResources): `kafka-client-metrics.sh --list`
// and `--describe`, Admin.listConfigResources. As Kafka's KafkaApis.handleListConfigResources:
// DESCRIBE_CONFIGS on the cluster or CLUSTER_AUTHORIZATION_FAILED; the types asked for (none: every type the
// version knows, v0 CLIENT_METRICS only, v1 also TOPIC, BROKER, BROKER_LOGGER and GROUP), another type
// UNSUPPORTED_VERSION; the names from this node's metadata image, by type in Kafka's order: groups with
// configs, client metrics subscriptions, the registered brokers with the request's listener (as
// BROKER_LOGGER, then as BROKER), topics.
#pragma once

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/list_config_resources_request.h"
#include "mala/protocol/messages/list_config_resources_response.h"

namespace mala::broker::handlers {

struct list_config_resources_handler {
  using request = protocol::list_config_resources_request;
  using response = protocol::list_config_resources_response;
  static constexpr int16_t api_key = 74;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 1;

  static response handle(request_context& ctx, const request& req, int16_t version);
};

}  // namespace mala::broker::handlers
