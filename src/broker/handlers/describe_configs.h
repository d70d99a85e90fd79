// DescribeConfigs (key 32), answered from this node as Kafka's ConfigHelper does:
// - TOPIC: every topic config (topic_config.h) with its value in effect (topic override, else the broker's
//   value of the server default property: dynamic per broker, dynamic cluster-wide, static, Kafka's default),
//   the synonym chain and source (DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
//   STATIC_BROKER_CONFIG, DEFAULT_CONFIG, including Kafka's quirk of dropping synonyms listed before the
//   property's own name, so retention.ms with only log.retention.hours set is DEFAULT_CONFIG with no
//   synonyms); an invalid name is INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
// - BROKER "<this node's id>": every broker key Mala knows (common/config.h) plus the broker properties
// behind
//   topic defaults and any dynamic key, with read_only from the key's update mode, passwords sensitive (null
//   value); BROKER "" (cluster-wide defaults): only the dynamic default configs; another id: INVALID_REQUEST.
// - BROKER_LOGGER (this node's loggers), CLIENT_METRICS (the subscription's configs), GROUP (Kafka 4.0's
//   group configs with their defaults and overrides).
// Synonyms only when include_synonyms, documentation only when include_documentation (v3+); a resource type
// Kafka does not know fails the whole request with INVALID_REQUEST, as Kafka's authorization step does.
#pragma once

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/describe_configs_request.h"
#include "mala/protocol/messages/describe_configs_response.h"

namespace mala::broker::handlers {

struct describe_configs_handler {
  using request = protocol::describe_configs_request;
  using response = protocol::describe_configs_response;
  static constexpr int16_t api_key = 32;
  static constexpr int16_t min_version = 1;
  static constexpr int16_t max_version = 4;

  static response handle(request_context& ctx, const request& req, int16_t version);
};

}  // namespace mala::broker::handlers
