// Shared by the handlers of the KRaft RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch, and Fetch of
// __cluster_metadata): hands the request to this node's raft_node on the home shard and waits for the
// replica's answer (a Fetch may long-poll).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include <asio/awaitable.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "handlers/admin_common.h"
#include "handlers/authorization.h"
#include "mala/broker/request_context.h"
#include "mala/controller/quorum_controller.h"
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

// Waits on the calling coroutine's thread for the answer `start` hands to the callback it is given (called on
// this thread, at once or later), at most `bound`; nullopt when none came by then.
template <typename T, typename Start>
asio::awaitable<std::optional<T>> answer_of(std::chrono::seconds bound, const Start& start) {
  struct waiting {
    std::optional<T> answer;
    asio::steady_timer* timer = nullptr;
  };
  auto w = std::make_shared<waiting>();
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(bound);
  w->timer = &timer;
  start([w](T answer) {
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

// `body` by reference: the caller's lambda owns it while this runs (GCC 12 destroys a coroutine argument
// moved in from a temporary twice, GCC bug 100611).
inline asio::awaitable<std::optional<raft::raft_message_body>> ask_raft_on_home_shard(
    raft::raft_node* node, const raft::raft_message_body& body) {
  if (!node) co_return std::nullopt;
  const int32_t from = raft_sender(body);
  auto start = [node, from, &body](std::function<void(raft::raft_message_body)> done) {
    node->handle_request(from, body, std::move(done));
  };
  // raft_node answers every request by its own timeout; this bound is a safety net.
  co_return co_await answer_of<raft::raft_message_body>(std::chrono::seconds(30), start);
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

// KIP-853 voter changes (AddRaftVoter / RemoveRaftVoter): `start(node, done)` runs on this node's Raft
// replica, on the home shard, when this node leads the quorum; the answer once the replica gives it (after
// the change committed, or the refusal or timeout: the replica answers by
// controller.quorum.request.timeout.ms). nullopt when this node does not lead the quorum (the request goes to
// the node that does).
template <typename Start>
asio::awaitable<std::optional<raft::voter_change_answer>> change_voters_on_home_shard(raft::raft_node* node,
                                                                                      const Start& start) {
  if (!node || node->state().current_role() != raft::role::leader) co_return std::nullopt;
  auto run = [node, &start](std::function<void(raft::voter_change_answer)> done) {
    start(*node, std::move(done));
  };
  auto answer = co_await answer_of<raft::voter_change_answer>(std::chrono::seconds(60), run);
  if (!answer) answer = raft::voter_change_answer{0, error_code::request_timed_out, {}};
  co_return answer;
}

template <typename Start>
asio::awaitable<std::optional<raft::voter_change_answer>> change_voters(const broker_services& services,
                                                                        Start start) {
  auto* node = services.raft;
  if (!services.shards) co_return co_await change_voters_on_home_shard(node, start);
  // A named callable moved in (GCC bug 100611, as ask_raft).
  auto change = [node, s = std::move(start)] { return change_voters_on_home_shard(node, s); };
  co_return co_await services.shards->invoke_on_async(services.home_shard, std::move(change));
}

// The cluster id the quorum checks requests against (home shard's raft_node; immutable, so read anywhere).
inline std::string raft_cluster_id(const broker_services& services) {
  return services.raft ? services.raft->cluster_id() : std::string();
}

// The quorum's default listener: the first of controller.listener.names (Kafka's channel.listenerName()).
inline std::string default_controller_listener(const broker_services& services) {
  if (!services.config || services.config->controller_listener_names().empty()) return "CONTROLLER";
  return services.config->controller_listener_names().front();
}

// AddRaftVoter / UpdateRaftVoter: the voter with its endpoint on the default listener, nullopt when the
// request's listeners do not include that one (KafkaRaftClient refuses those with INVALID_REQUEST).
template <typename Listeners>
std::optional<raft::voter_info> voter_on_default_listener(const std::string& listener, int32_t id,
                                                          const uuid& directory_id,
                                                          const Listeners& listeners) {
  for (const auto& l : listeners) {
    if (l.name != listener) continue;
    raft::voter_info voter;
    voter.id = id;
    voter.directory_id = directory_id;
    voter.listener_name = l.name;
    voter.endpoint = {l.host, l.port};
    return voter;
  }
  return std::nullopt;
}

// AddRaftVoter / RemoveRaftVoter: the cluster id checked (KafkaRaftClient: a null one passes), the change
// made here when this node leads the quorum (change_voters), else the request forwarded to the active
// controller (from a controller listener, as Kafka's controllers, NOT_LEADER_OR_FOLLOWER).
template <typename Response, typename Request, typename Start>
asio::awaitable<Response> voter_change_response(request_context& ctx, const Request& req, int16_t version,
                                                Start start) {
  Response resp;
  const auto cluster_id = raft_cluster_id(ctx.services);
  if (req.cluster_id && !cluster_id.empty() && *req.cluster_id != cluster_id) {
    resp.error_code = to_wire(error_code::inconsistent_cluster_id);
    resp.error_message =
        "The given id \"" + *req.cluster_id + "\" doesn't match the cluster id \"" + cluster_id + "\"";
    co_return resp;
  }
  auto answer = co_await change_voters(ctx.services, std::move(start));
  if (answer) {
    resp.error_code = to_wire(answer->error);
    if (!answer->message.empty()) resp.error_message = answer->message;
    co_return resp;
  }
  auto not_leader = [](controller::quorum_controller&) {
    Response r;
    r.error_code = to_wire(error_code::not_leader_or_follower);
    return r;
  };
  auto forwarded = co_await on_controller<Response>(ctx, req, version, not_leader);
  if (forwarded.ok()) co_return std::move(*forwarded.response);
  resp.error_code = to_wire(error_code::not_leader_or_follower);
  co_return resp;
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
