// AllocateProducerIds (key 67, v0, KIP-730): a broker asks the active controller for the next block of
// producer ids (ProducerIdsRecord). Served on the CONTROLLER listener; a node that is not the active
// controller answers NOT_CONTROLLER.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/allocate_producer_ids_request.h"
#include "mala/protocol/messages/allocate_producer_ids_response.h"

namespace mala::controller {
class quorum_controller;
}

namespace mala::broker::handlers {

struct allocate_producer_ids_handler {
  using request = protocol::allocate_producer_ids_request;
  using response = protocol::allocate_producer_ids_response;
  static constexpr int16_t api_key = 67;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;
  static constexpr bool controller_only = true;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
  // The controller's side (also InitProducerId's when this node is the active controller).
  static response allocate_on_controller(controller::quorum_controller& controller, const request& req);
};

}  // namespace mala::broker::handlers
