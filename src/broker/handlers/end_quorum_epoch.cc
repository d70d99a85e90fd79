#include "handlers/end_quorum_epoch.h"

#include "handlers/raft_common.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<end_quorum_epoch_handler::response>> end_quorum_epoch_handler::handle_async(
    request_context& ctx, request req, int16_t) {
  co_return co_await answer_raft_request<response, raft::end_quorum_epoch_response>(ctx, req);
}

}  // namespace mala::broker::handlers
