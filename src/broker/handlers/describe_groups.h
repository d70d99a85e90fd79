// DescribeGroups (key 15, v0-5): state, protocol and members of classic groups (member metadata only while
// Stable); an unknown group is described as Dead. v3+ may ask for the authorized operations (all of a
// GROUP's, without an authorizer).
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/describe_groups_request.h"
#include "mala/protocol/messages/describe_groups_response.h"

namespace mala::broker::handlers {

struct describe_groups_handler {
  using request = protocol::describe_groups_request;
  using response = protocol::describe_groups_response;
  static constexpr int16_t api_key = 15;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 5;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
