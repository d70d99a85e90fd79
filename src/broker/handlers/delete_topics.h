// DeleteTopics (key 20), by name (v1-5) or by name or topic id (v6+): checked as Kafka's ControllerApis does
// (delete.topic.enable=false: INVALID_REQUEST before v3, TOPIC_DELETION_DISABLED after; a name or id given
// twice, neither or both of name and id, a name that maps to an id also given: INVALID_REQUEST with Kafka's
// messages), then deleted by the controller on the home shard (UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID
// for topics that do not exist). A node without the controller role answers NOT_CONTROLLER for every topic.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/delete_topics_request.h"
#include "mala/protocol/messages/delete_topics_response.h"

namespace mala::broker::handlers {

struct delete_topics_handler {
  using request = protocol::delete_topics_request;
  using response = protocol::delete_topics_response;
  static constexpr int16_t api_key = 20;
  static constexpr int16_t min_version = 1;
  static constexpr int16_t max_version = 6;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
