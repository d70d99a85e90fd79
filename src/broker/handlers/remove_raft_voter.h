// RemoveRaftVoter (key 81, v0, KIP-853): `kafka-metadata-quorum.sh remove-controller` takes a voter (its
// id and directory id) out of the quorum; a leader that removes itself resigns once the change commits. Run
// by the Raft leader (raft::replica remove_voter: Kafka's RemoveVoterHandler checks, the new voter set
// appended as a VotersRecord and answered once committed); a node that does not lead forwards it to the
// active controller, as Kafka's brokers do. ALTER on the cluster.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/remove_raft_voter_request.h"
#include "mala/protocol/messages/remove_raft_voter_response.h"

namespace mala::broker::handlers {

struct remove_raft_voter_handler {
  using request = protocol::remove_raft_voter_request;
  using response = protocol::remove_raft_voter_response;
  static constexpr int16_t api_key = 81;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
