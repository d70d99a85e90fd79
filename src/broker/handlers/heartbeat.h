// Heartbeat (key 12, v0-4): keeps a classic member's session; REBALANCE_IN_PROGRESS tells it to rejoin,
// ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID that it is out.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/heartbeat_request.h"
#include "mala/protocol/messages/heartbeat_response.h"

namespace mala::broker::handlers {

struct heartbeat_handler {
  using request = protocol::heartbeat_request;
  using response = protocol::heartbeat_response;
  static constexpr int16_t api_key = 12;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 4;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
