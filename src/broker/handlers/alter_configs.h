// AlterConfigs (key 33, the legacy form that replaces every override of a resource): checked as a Kafka 4.x
// broker does before forwarding (ConfigAdminManager.preprocess: a resource given twice, a config key given
// twice, null values, a broker resource naming another node, BROKER_LOGGER and unknown types are
// INVALID_REQUEST with Kafka's messages), then applied by the controller on the home shard; answers in
// request order. A node without the controller role answers NOT_CONTROLLER for the resources it would
// forward.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/alter_configs_request.h"
#include "mala/protocol/messages/alter_configs_response.h"

namespace mala::broker::handlers {

struct alter_configs_handler {
  using request = protocol::alter_configs_request;
  using response = protocol::alter_configs_response;
  static constexpr int16_t api_key = 33;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 2;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
