// ConsumerGroupHeartbeat (key 68, v0-1; KIP-848): the one request of the consumer protocol. A member joins
// with epoch 0, heartbeats with its member epoch and receives its assignment from the server-side assignor,
// leaves with epoch -1 (or -2, a static member leaving temporarily). v1 adds SubscribedTopicRegex and has
// the client choose its member id. The group coordinator (consumer_group_manager) does the work.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/consumer_group_heartbeat_request.h"
#include "mala/protocol/messages/consumer_group_heartbeat_response.h"

namespace mala::broker::handlers {

struct consumer_group_heartbeat_handler {
  using request = protocol::consumer_group_heartbeat_request;
  using response = protocol::consumer_group_heartbeat_response;
  static constexpr int16_t api_key = 68;
  static constexpr int16_t min_version = 0;
  // v1 (regex subscriptions) is stable since Kafka 4.0, which the reference schema predates.
  static constexpr int16_t max_version = 1;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
