// ConsumerGroupDescribe (key 69, v0; KIP-848): the state, epochs, assignor and members (with current and
// target assignments) of consumer groups; GROUP_ID_NOT_FOUND for classic groups and unknown ids, as Kafka's
// admin client expects before it falls back to DescribeGroups.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/consumer_group_describe_request.h"
#include "mala/protocol/messages/consumer_group_describe_response.h"

namespace mala::broker::handlers {

struct consumer_group_describe_handler {
  using request = protocol::consumer_group_describe_request;
  using response = protocol::consumer_group_describe_response;
  static constexpr int16_t api_key = 69;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
