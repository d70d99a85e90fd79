#include "handlers/update_features.h"

#include "handlers/authorization.h"

#include "handlers/admin_common.h"
#include "mala/controller/quorum_controller.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<update_features_handler::response>> update_features_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::alter)) co_return std::move(*refused);
  auto answer = co_await on_controller<response>(
      ctx, req, version,
      [&req, version](controller::quorum_controller& c) { return c.update_features(req, version); },
      broker_propagation::every_live_broker);
  if (answer.ok()) co_return std::move(*answer.response);
  // No controller reachable: the top-level error (NOT_CONTROLLER / REQUEST_TIMED_OUT, retriable).
  co_return controller_unreachable(answer);
}

}  // namespace mala::broker::handlers
