// Metadata (key 3): brokers (endpoints of the listener the request arrived on), cluster id, controller id,
// and the requested topics with their partitions, leaders, epochs, replicas, ISR and offline replicas, from
// the node's current metadata image.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/metadata_request.h"
#include "mala/protocol/messages/metadata_response.h"

namespace mala::broker::handlers {

struct metadata_handler {
  using request = protocol::metadata_request;
  using response = protocol::metadata_response;
  static constexpr int16_t api_key = 3;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 12;

  // Creates unknown topics first when auto-creation applies, then answers from the current image.
  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
  // The answer from the current image alone.
  static response handle(request_context& ctx, const request& req, int16_t version);
};

// Kafka's topic name rules (Topic.validate): 1..249 characters of [a-zA-Z0-9._-], not "." or "..".
bool is_valid_topic_name(const std::string& name);

}  // namespace mala::broker::handlers
