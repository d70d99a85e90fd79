// SyncGroup (key 14, v0-5): the classic rebalance's second phase. The leader's request carries every member's
// assignment, which the coordinator persists in __consumer_offsets before answering everyone; followers park
// on the home shard until then. v5+ must name the protocol type and name (INCONSISTENT_GROUP_PROTOCOL
// otherwise, as KafkaApis checks before the coordinator).
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/sync_group_request.h"
#include "mala/protocol/messages/sync_group_response.h"

namespace mala::broker::handlers {

struct sync_group_handler {
  using request = protocol::sync_group_request;
  using response = protocol::sync_group_response;
  static constexpr int16_t api_key = 14;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 5;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
