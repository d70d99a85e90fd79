// CreatePartitions (key 37): a topic named twice is refused as a whole (INVALID_REQUEST "Duplicate topic
// name.", Kafka's ControllerApis), the rest is run by the controller on the home shard (INVALID_PARTITIONS
// when the count does not grow, manual assignments checked, validate_only). A node without the controller
// role answers NOT_CONTROLLER for every topic.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/create_partitions_request.h"
#include "mala/protocol/messages/create_partitions_response.h"

namespace mala::broker::handlers {

struct create_partitions_handler {
  using request = protocol::create_partitions_request;
  using response = protocol::create_partitions_response;
  static constexpr int16_t api_key = 37;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 3;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
