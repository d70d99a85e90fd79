// LeaveGroup (key 13, v0-5): members leave a classic group (one by member id before v3, a batch with
// group.instance.id from v3, KIP-345), which rebalances the rest. v0-v2 answers carry only a top-level error:
// the member's error when there is one (LeaveGroupResponse for old versions).
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/leave_group_request.h"
#include "mala/protocol/messages/leave_group_response.h"

namespace mala::broker::handlers {

struct leave_group_handler {
  using request = protocol::leave_group_request;
  using response = protocol::leave_group_response;
  static constexpr int16_t api_key = 13;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 5;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
