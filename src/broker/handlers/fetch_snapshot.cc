#include "handlers/fetch_snapshot.h"

#include "handlers/authorization.h"
#include "handlers/raft_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<fetch_snapshot_handler::response>> fetch_snapshot_handler::handle_async(
    request_context& ctx, request req, int16_t) {
  fetch_snapshot_reply reply;
  if (!ctx.services.raft) {
    reply.body.error_code = to_wire(error_code::invalid_request);
    co_return reply;
  }
  // ControllerApis: CLUSTER_ACTION on the cluster.
  if (!authorized_cluster(ctx, acl_operation::cluster_action)) {
    reply.body.error_code = to_wire(error_code::cluster_authorization_failed);
    co_return reply;
  }
  auto message = raft::from_protocol(req, raft_cluster_id(ctx.services));
  if (!message.ok()) {
    reply.body.error_code = to_wire(message.error().code);
    co_return reply;
  }
  auto answer = co_await ask_raft(ctx.services, std::move(*message));
  auto* chunk = answer ? std::get_if<raft::fetch_snapshot_response>(&*answer) : nullptr;
  if (!chunk) {
    reply.body.error_code = to_wire(error_code::unknown_server_error);
    co_return reply;
  }
  auto encoded = raft::to_protocol(std::move(*chunk));
  // Moving the vector into shared ownership keeps its buffer, which the body's records view points into.
  reply.owned_bytes = std::make_shared<const std::vector<uint8_t>>(std::move(encoded.bytes));
  reply.body = std::move(encoded.message);
  co_return reply;
}

}  // namespace mala::broker::handlers
