// EndQuorumEpoch (key 54, v0-v1, KIP-595): a KRaft RPC between controllers, answered by this node's Raft
// replica (raft_node) after rpc_codec's checks (cluster id, the one partition __cluster_metadata-0). A node
// without a Raft replica (handler unit tests) answers INVALID_REQUEST at top level (Kafka's
// brokers do not serve the KRaft RPCs at all), so a misdirected sender backs off.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/end_quorum_epoch_request.h"
#include "mala/protocol/messages/end_quorum_epoch_response.h"

namespace mala::broker::handlers {

struct end_quorum_epoch_handler {
  using request = protocol::end_quorum_epoch_request;
  using response = protocol::end_quorum_epoch_response;
  static constexpr int16_t api_key = 54;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 1;
  static constexpr bool controller_only = true;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
