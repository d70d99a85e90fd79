#include "handlers/controller_registration.h"

#include <utility>

#include "handlers/admin_common.h"
#include "handlers/authorization.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<controller_registration_handler::response>>
controller_registration_handler::handle_async(request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::cluster_action))
    co_return std::move(*refused);
  auto answer = co_await on_controller<response>(
      ctx, req, version, [&req](controller::quorum_controller& c) { return c.register_controller(req); });
  if (answer.ok()) co_return std::move(*answer.response);
  response resp;
  resp.error_code = to_wire(answer.failure());
  co_return resp;
}

}  // namespace mala::broker::handlers
