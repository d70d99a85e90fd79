// CreateTopics (key 19): checked as Kafka's ControllerApis does before the controller sees the request
// (a name given twice is INVALID_REQUEST "Duplicate topic name.", __cluster_metadata cannot be created), then
// run by the controller on the home shard (names, partitions, replication factor, assignments, configs,
// validate_only, and from v5 the resulting configs and topic id). A node without the controller role answers
// NOT_CONTROLLER for every topic, which clients treat as "refresh metadata and retry".
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/create_topics_request.h"
#include "mala/protocol/messages/create_topics_response.h"

namespace mala::broker::handlers {

struct create_topics_handler {
  using request = protocol::create_topics_request;
  using response = protocol::create_topics_response;
  static constexpr int16_t api_key = 19;
  static constexpr int16_t min_version = 2;
  static constexpr int16_t max_version = 7;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
