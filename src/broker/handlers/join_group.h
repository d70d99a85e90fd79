// JoinGroup (key 11, v0-9; v0-v1 answered as Kafka 4.0.1+ does, KAFKA-19444): the classic rebalance's
// first phase, run by the group coordinator on the home shard. The request parks there until the join phase
// completes (every member rejoined, the rebalance timeout, or group.initial.rebalance.delay.ms for a new
// group), then every member gets the generation and the leader the members' metadata. v4+ new members first
// get MEMBER_ID_REQUIRED with their id (KIP-394); v0 has no rebalance timeout and uses the session timeout.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/join_group_request.h"
#include "mala/protocol/messages/join_group_response.h"

namespace mala::broker::handlers {

struct join_group_handler {
  using request = protocol::join_group_request;
  using response = protocol::join_group_response;
  static constexpr int16_t api_key = 11;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 9;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
