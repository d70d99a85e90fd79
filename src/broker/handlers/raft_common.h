// Shared by the handlers of the KRaft RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch, and Fetch of
// __cluster_metadata): hands the request to this node's raft_node on the home shard and waits for the
// replica's answer (a Fetch may long-poll).
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include <asio/awaitable.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "handlers/authorization.h"
#include "mala/broker/request_context.h"
#include "mala/net/shard_pool.h"
#include "mala/raft/raft_node.h"
#include "mala/raft/rpc_codec.h"

namespace mala::broker::handlers {

// The sender a request names (CandidateId / ReplicaId, LeaderId, ReplicaState.ReplicaId, ReplicaId).
inline int32_t raft_sender(const raft::raft_message_body& body) {
  if (auto* v = std::get_if<raft::vote_request>(&body)) return v->candidate_id;
  if (auto* b = std::get_if<raft::begin_quorum_epoch_request>(&body)) return b->leader_id;
  if (auto* e = std::get_if<raft::end_quorum_epoch_request>(&body)) return e->leader_id;
  if (auto* f = std::get_if<raft::fetch_request>(&body)) return f->replica_id;
  if (auto* s = std::get_if<raft::fetch_snapshot_request>(&body)) return s->replica_id;
  return -1;
}

// `body` by reference: the caller's lambda owns it while this runs (GCC 12 destroys a coroutine argument
// moved in from a temporary twice, GCC bug 100611).
inline asio::awaitable<std::optional<raft::raft_message_body>> ask_raft_on_home_shard(
    raft::raft_node* node, const raft::raft_message_body& body) {
  if (!node) co_return std::nullopt;
  struct waiting {
    std::optional<raft::raft_message_body> answer;
    asio::steady_timer* timer = nullptr;
  };
  auto w = std::make_shared<waiting>();
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(std::chrono::seconds(30));  // raft_node answers every request by its own timeout
  w->timer = &timer;
  const int32_t from = raft_sender(body);
  node->handle_request(from, body, [w](raft::raft_message_body answer) {
    w->answer = std::move(answer);
    if (w->timer) w->timer->cancel();
  });
  if (!w->answer) {
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  w->timer = nullptr;
  co_return std::move(w->answer);
}

// The replica's answer, or nullopt when this node has no Raft replica.
inline asio::awaitable<std::optional<raft::raft_message_body>> ask_raft(const broker_services& services,
                                                                        raft::raft_message_body body) {
  auto* node = services.raft;
  if (!services.shards) co_return co_await ask_raft_on_home_shard(node, body);
  // A named callable moved in, not a lambda prvalue: GCC 12 destroys a prvalue argument of a coroutine
  // twice (GCC bug 100611), and this one owns the message.
  auto ask = [node, b = std::move(body)] { return ask_raft_on_home_shard(node, b); };
  co_return co_await services.shards->invoke_on_async(services.home_shard, std::move(ask));
}

// The cluster id the quorum checks requests against (home shard's raft_node; immutable, so read anywhere).
inline std::string raft_cluster_id(const broker_services& services) {
  return services.raft ? services.raft->cluster_id() : std::string();
}

// A KRaft RPC answered by the replica: rpc_codec's checks, the replica's answer of type RaftResponse, the
// protocol response. INVALID_REQUEST at top level without a Raft replica here. `req` lives in the caller's
// frame, which awaits this at once.
template <typename Response, typename RaftResponse, typename Request>
asio::awaitable<Response> answer_raft_request(request_context& ctx, const Request& req) {
  if (!ctx.services.raft) co_return raft::top_level_error_response<Response>(error_code::invalid_request);
  // ControllerApis: the KRaft RPCs need CLUSTER_ACTION on the cluster.
  if (!authorized_cluster(ctx, acl_operation::cluster_action))
    co_return raft::top_level_error_response<Response>(error_code::cluster_authorization_failed);
  auto message = raft::from_protocol(req, raft_cluster_id(ctx.services));
  if (!message.ok()) co_return raft::top_level_error_response<Response>(message.error().code);
  auto answer = co_await ask_raft(ctx.services, std::move(*message));
  if (!answer) co_return raft::top_level_error_response<Response>(error_code::request_timed_out);
  if (auto* r = std::get_if<RaftResponse>(&*answer)) co_return raft::to_protocol(*r);
  co_return raft::top_level_error_response<Response>(error_code::unknown_server_error);
}

}  // namespace mala::broker::handlers
