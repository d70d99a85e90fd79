#include "handlers/update_raft_voter.h"

#include "handlers/authorization.h"
#include "handlers/raft_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

namespace {

// The leader as this node knows it, with its endpoint on the request's listener (Kafka's CurrentLeader).
asio::awaitable<void> name_current_leader(const broker_services& services,
                                          update_raft_voter_handler::response& r) {
  auto* node = services.raft;
  if (!node) co_return;
  auto leader = [node] {
    ::mala::protocol::update_raft_voter_response__current_leader_data out;
    out.leader_id = node->state().leader_id();
    out.leader_epoch = node->state().epoch();
    if (auto endpoint = node->endpoint_of(out.leader_id)) {
      out.host = endpoint->host;
      out.port = endpoint->port;
    }
    return out;
  };
  r.current_leader = co_await on_home_shard(services, leader);
}

}  // namespace

asio::awaitable<std::optional<update_raft_voter_handler::response>> update_raft_voter_handler::handle_async(
    request_context& ctx, request req, int16_t) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::cluster_action))
    co_return std::move(*refused);
  response resp;
  const auto cluster_id = raft_cluster_id(ctx.services);
  const auto voter = voter_on_default_listener(default_controller_listener(ctx.services), req.voter_id,
                                               req.voter_directory_id, req.listeners);
  if (req.cluster_id && !cluster_id.empty() && *req.cluster_id != cluster_id) {
    resp.error_code = to_wire(error_code::inconsistent_cluster_id);
  } else if (!voter) {
    resp.error_code = to_wire(error_code::invalid_request);
  } else {
    auto start = [voter = *voter, epoch = req.current_leader_epoch,
                  min = req.kraft_version_feature.min_supported_version,
                  max = req.kraft_version_feature.max_supported_version](
                     raft::raft_node& node, std::function<void(raft::voter_change_answer)> done) {
      node.update_voter(epoch, voter, min, max, std::move(done));
    };
    auto answer = co_await change_voters(ctx.services, std::move(start));
    resp.error_code = to_wire(answer ? answer->error : error_code::not_leader_or_follower);
  }
  co_await name_current_leader(ctx.services, resp);
  co_return resp;
}

}  // namespace mala::broker::handlers
