#include "handlers/add_raft_voter.h"

#include "handlers/authorization.h"
#include "handlers/raft_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<add_raft_voter_handler::response>> add_raft_voter_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::alter)) co_return std::move(*refused);
  // KafkaRaftClient.handleAddVoterRequest: the endpoint of the quorum's default listener (the first of
  // controller.listener.names) must be among the listeners given.
  const std::string listener = default_controller_listener(ctx.services);
  const auto voter = voter_on_default_listener(listener, req.voter_id, req.voter_directory_id, req.listeners);
  if (!voter) {
    response resp;
    resp.error_code = to_wire(error_code::invalid_request);
    resp.error_message = "Add voter request didn't include the endpoint (" + listener +
                         ") for the default listener " + listener;
    co_return resp;
  }
  const bool ack_when_committed = version < 1 || req.ack_when_committed;
  auto start = [voter = *voter, ack_when_committed](raft::raft_node& node,
                                                    std::function<void(raft::voter_change_answer)> done) {
    node.add_voter(voter, ack_when_committed, std::move(done));
  };
  co_return co_await voter_change_response<response>(ctx, req, version, std::move(start));
}

}  // namespace mala::broker::handlers
