// Vote (key 52, v0-v2, KIP-595): a KRaft RPC between controllers, answered by this node's Raft replica
// (raft_node) after rpc_codec's checks (cluster id, the one partition __cluster_metadata-0). A node without
// a Raft replica (handler unit tests) answers INVALID_REQUEST at top level (Kafka's
// brokers do not serve the KRaft RPCs at all), so a misdirected sender backs off.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/vote_request.h"
#include "mala/protocol/messages/vote_response.h"

namespace mala::broker::handlers {

struct vote_handler {
  using request = protocol::vote_request;
  using response = protocol::vote_response;
  static constexpr int16_t api_key = 52;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 2;
  static constexpr bool controller_only = true;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
