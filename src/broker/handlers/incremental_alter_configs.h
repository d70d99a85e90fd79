// IncrementalAlterConfigs (key 44; SET / DELETE / APPEND / SUBTRACT per key): checked as a Kafka 4.x broker
// does before forwarding (ConfigAdminManager.preprocess: a resource given twice, a config key given twice, a
// null value outside DELETE, a broker resource naming another node, unknown resource types are
// INVALID_REQUEST with Kafka's messages); BROKER_LOGGER resources are applied here, to this process's loggers
// (broker_loggers.h); the rest is applied by the controller on the home shard. Answers in request order. A
// node without the controller role answers NOT_CONTROLLER for the resources it would forward.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/incremental_alter_configs_request.h"
#include "mala/protocol/messages/incremental_alter_configs_response.h"

namespace mala::broker::handlers {

struct incremental_alter_configs_handler {
  using request = protocol::incremental_alter_configs_request;
  using response = protocol::incremental_alter_configs_response;
  static constexpr int16_t api_key = 44;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 1;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
