// ControllerRegistration (key 70, v0, KIP-919): served by the active controller on its CONTROLLER listener;
// every controller sends it (controller_registration_manager) so that the metadata log names the
// controllers, their listeners and supported features (RegisterControllerRecord), as Kafka's
// ControllerRegistrationManager does. Needs CLUSTER_ACTION; a node that is not the active controller
// answers NOT_CONTROLLER.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/controller_registration_request.h"
#include "mala/protocol/messages/controller_registration_response.h"

namespace mala::broker::handlers {

struct controller_registration_handler {
  using request = protocol::controller_registration_request;
  using response = protocol::controller_registration_response;
  static constexpr int16_t api_key = 70;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;
  static constexpr bool controller_only = true;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
