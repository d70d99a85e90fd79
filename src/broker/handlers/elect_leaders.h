// ElectLeaders (key 43, v0-2): `kafka-leader-election.sh --election-type preferred|unclean`. Run by the
// active controller (forwarded from any node, as Kafka brokers forward it), answered once the leader changes
// are committed.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/elect_leaders_request.h"
#include "mala/protocol/messages/elect_leaders_response.h"

namespace mala::broker::handlers {

struct elect_leaders_handler {
  using request = protocol::elect_leaders_request;
  using response = protocol::elect_leaders_response;
  static constexpr int16_t api_key = 43;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 2;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
