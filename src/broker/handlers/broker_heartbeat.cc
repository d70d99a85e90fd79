#include "handlers/broker_heartbeat.h"

#include "handlers/authorization.h"

#include "handlers/admin_common.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

broker_heartbeat_handler::response broker_heartbeat_handler::heartbeat_on_controller(
    controller::quorum_controller& c, const request& req, int64_t now_ms) {
  return c.broker_heartbeat(req, now_ms);
}

asio::awaitable<std::optional<broker_heartbeat_handler::response>> broker_heartbeat_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::cluster_action))
    co_return std::move(*refused);
  auto clock = ctx.services.clock_ms;
  auto answer =
      co_await on_controller<response>(ctx, req, version, [&req, &clock](controller::quorum_controller& c) {
        return heartbeat_on_controller(c, req, clock ? clock() : 0);
      });
  if (answer.ok()) co_return std::move(*answer.response);
  response resp;
  resp.error_code = to_wire(answer.failure());
  co_return resp;
}

}  // namespace mala::broker::handlers
