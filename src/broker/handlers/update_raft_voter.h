// UpdateRaftVoter (key 82, v0, KIP-853, controller listener only): a voter tells the quorum's leader its
// current controller listener and supported kraft.version range (Kafka's voters send it when the voter set
// holds other endpoints for them). Run by the Raft leader (raft::replica update_voter: Kafka's
// UpdateVoterHandler checks; the set appended with the voter's new endpoint and answered at once); every
// answer names the current leader and its endpoint. CLUSTER_ACTION on the cluster.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/update_raft_voter_request.h"
#include "mala/protocol/messages/update_raft_voter_response.h"

namespace mala::broker::handlers {

struct update_raft_voter_handler {
  using request = protocol::update_raft_voter_request;
  using response = protocol::update_raft_voter_response;
  static constexpr int16_t api_key = 82;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;
  static constexpr bool controller_only = true;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
