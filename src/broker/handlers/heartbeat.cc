#include "handlers/heartbeat.h"

#include <utility>

#include "handlers/group_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<heartbeat_handler::response>> heartbeat_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  if (!ctx.services.groups || !group_allowed(ctx, acl_operation::read, req.group_id)) {
    response resp;
    resp.error_code = to_wire(ctx.services.groups ? error_code::group_authorization_failed
                                                  : error_code::coordinator_not_available);
    co_return resp;
  }
  auto origin = request_origin_of(ctx, version);
  auto beat = [origin = std::move(origin), req = std::move(req)](coordinator::group_coordinator& groups,
                                                                 std::function<void(response)> answer) {
    answer(groups.heartbeat(origin, req));
  };
  co_return co_await call_group_coordinator<response>(ctx.services, std::move(beat));
}

}  // namespace mala::broker::handlers
