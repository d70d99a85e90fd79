#include "handlers/leave_group.h"

#include <utility>

#include "handlers/group_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<leave_group_handler::response>> leave_group_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  // LeaveGroupRequest.normalizedData: v0-v2 name one member by id.
  if (version < 3) {
    req.members.clear();
    auto& m = req.members.emplace_back();
    m.member_id = req.member_id;
    m.group_instance_id = std::nullopt;
  }
  response resp;
  if (!ctx.services.groups) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
  } else if (!group_allowed(ctx, acl_operation::read, req.group_id)) {
    resp.error_code = to_wire(error_code::group_authorization_failed);
  } else {
    auto origin = request_origin_of(ctx, version);
    auto leave = [origin = std::move(origin), req = std::move(req)](coordinator::group_coordinator& groups,
                                                                    std::function<void(response)> answer) {
      answer(groups.leave_group(origin, req));
    };
    resp = co_await call_group_coordinator<response>(ctx.services, std::move(leave));
  }
  if (version < 3) {
    // Only the top-level error exists: the request's error, else the member's.
    int16_t error = resp.error_code;
    for (const auto& m : resp.members) {
      if (error == to_wire(error_code::none)) error = m.error_code;
    }
    response old;
    old.error_code = error;
    co_return old;
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
