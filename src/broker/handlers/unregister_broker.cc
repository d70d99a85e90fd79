#include "handlers/unregister_broker.h"

#include "handlers/admin_common.h"
#include "handlers/authorization.h"
#include "mala/controller/quorum_controller.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<unregister_broker_handler::response>> unregister_broker_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::alter)) co_return std::move(*refused);
  auto answer = co_await on_controller<response>(
      ctx, req, version, [&req](controller::quorum_controller& c) { return c.unregister_broker(req); },
      broker_propagation::every_live_broker);
  if (answer.ok()) co_return std::move(*answer.response);
  // No controller reachable: NOT_CONTROLLER / REQUEST_TIMED_OUT (retriable), as UpdateFeatures answers.
  co_return controller_unreachable(answer);
}

}  // namespace mala::broker::handlers
