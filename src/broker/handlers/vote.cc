#include "handlers/vote.h"

#include "handlers/raft_common.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<vote_handler::response>> vote_handler::handle_async(request_context& ctx,
                                                                                  request req, int16_t) {
  co_return co_await answer_raft_request<response, raft::vote_response>(ctx, req);
}

}  // namespace mala::broker::handlers
