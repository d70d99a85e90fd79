#include "handlers/remove_raft_voter.h"

#include "handlers/authorization.h"
#include "handlers/raft_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<remove_raft_voter_handler::response>> remove_raft_voter_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::alter)) co_return std::move(*refused);
  auto start = [id = req.voter_id, directory = req.voter_directory_id](
                   raft::raft_node& node, std::function<void(raft::voter_change_answer)> done) {
    node.remove_voter(id, directory, std::move(done));
  };
  co_return co_await voter_change_response<response>(ctx, req, version, std::move(start));
}

}  // namespace mala::broker::handlers
