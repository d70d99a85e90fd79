#include "handlers/end_quorum_epoch.h"

#include "handlers/raft_common.h"
#include "mala/raft/rpc_codec.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<end_quorum_epoch_handler::response>> end_quorum_epoch_handler::handle_async(
    request_context& ctx, request req, int16_t) {
  if (!ctx.services.raft) co_return raft::top_level_error_response<response>(error_code::invalid_request);
  auto message = raft::from_protocol(req, raft_cluster_id(ctx.services));
  if (!message.ok()) co_return raft::top_level_error_response<response>(message.error().code);
  auto answer = co_await ask_raft(ctx.services, std::move(*message));
  if (!answer) co_return raft::top_level_error_response<response>(error_code::invalid_request);
  if (auto* r = std::get_if<raft::end_quorum_epoch_response>(&*answer)) co_return raft::to_protocol(*r);
  co_return raft::top_level_error_response<response>(error_code::unknown_server_error);
}

}  // namespace mala::broker::handlers
