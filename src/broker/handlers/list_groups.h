// ListGroups (key 16, v0-5): the groups of every __consumer_offsets partition this node coordinates, with
// their protocol type, state (v4+, filter KIP-518) and type (v5+, filter KIP-848: "classic").
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/list_groups_request.h"
#include "mala/protocol/messages/list_groups_response.h"

namespace mala::broker::handlers {

struct list_groups_handler {
  using request = protocol::list_groups_request;
  using response = protocol::list_groups_response;
  static constexpr int16_t api_key = 16;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 5;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
