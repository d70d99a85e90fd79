// OffsetDelete (key 47, v0, KIP-496): removes committed offsets of partitions the group does not consume from
// (GROUP_SUBSCRIBED_TO_TOPIC for the others; NON_EMPTY_GROUP for an active group not using the consumer
// protocol). Unknown topics and partitions are answered UNKNOWN_TOPIC_OR_PARTITION without the coordinator.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/offset_delete_request.h"
#include "mala/protocol/messages/offset_delete_response.h"

namespace mala::broker::handlers {

struct offset_delete_handler {
  using request = protocol::offset_delete_request;
  using response = protocol::offset_delete_response;
  static constexpr int16_t api_key = 47;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
