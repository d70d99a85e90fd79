// AddRaftVoter (key 80, v0-1, KIP-853; v1: AckWhenCommitted false answers once the record is appended):
// `kafka-metadata-quorum.sh add-controller` makes a controller that observes the quorum (a new one, started
// without --initial-controllers) a voter. Run by the Raft leader (raft::replica add_voter: Kafka's
// AddVoterHandler checks, the new voter set appended as a VotersRecord and answered once committed); a node
// that does not lead forwards it to the active controller, as Kafka's brokers do. ALTER on the cluster.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/add_raft_voter_request.h"
#include "mala/protocol/messages/add_raft_voter_response.h"

namespace mala::broker::handlers {

struct add_raft_voter_handler {
  using request = protocol::add_raft_voter_request;
  using response = protocol::add_raft_voter_response;
  static constexpr int16_t api_key = 80;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 1;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
