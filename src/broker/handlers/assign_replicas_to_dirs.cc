#include "handlers/assign_replicas_to_dirs.h"

#include "handlers/admin_common.h"
#include "handlers/authorization.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<assign_replicas_to_dirs_handler::response>>
assign_replicas_to_dirs_handler::handle_async(request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::cluster_action))
    co_return std::move(*refused);
  auto answer = co_await on_controller<response>(
      ctx, req, version, [&req](controller::quorum_controller& c) { return c.assign_replicas_to_dirs(req); });
  if (answer.ok()) co_return std::move(*answer.response);
  response resp;
  resp.error_code = to_wire(answer.failure());
  co_return resp;
}

}  // namespace mala::broker::handlers
