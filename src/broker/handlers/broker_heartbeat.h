// BrokerHeartbeat (key 63, v0-v2; v2 carries the cordoned log dirs, KIP-1066): served by the active
// controller on its CONTROLLER listener (a broker's broker_lifecycle sends it through the controller channel,
// forwarded like any controller-bound request). A node that is not the active controller answers
// NOT_CONTROLLER, and the broker looks for the leader again.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/broker_heartbeat_request.h"
#include "mala/protocol/messages/broker_heartbeat_response.h"

namespace mala::controller {
class quorum_controller;
}

namespace mala::broker::handlers {

struct broker_heartbeat_handler {
  using request = protocol::broker_heartbeat_request;
  using response = protocol::broker_heartbeat_response;
  static constexpr int16_t api_key = 63;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 2;
  static constexpr bool controller_only = true;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
  // The controller's side of a heartbeat at now_ms (also called by the local broker_lifecycle).
  static response heartbeat_on_controller(controller::quorum_controller& controller, const request& req,
                                          int64_t now_ms);
};

}  // namespace mala::broker::handlers
