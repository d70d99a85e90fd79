#include "handlers/join_group.h"

#include <utility>

#include "handlers/group_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<join_group_handler::response>> join_group_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  response resp;
  if (!ctx.services.groups) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
    resp.member_id = req.member_id;
    resp.protocol_name = version >= 7 ? std::nullopt : std::optional<std::string>("");
    co_return resp;
  }
  if (!group_allowed(ctx, acl_operation::read, req.group_id)) {
    resp.error_code = to_wire(error_code::group_authorization_failed);
    resp.member_id = req.member_id;
    resp.protocol_name = version >= 7 ? std::nullopt : std::optional<std::string>("");
    co_return resp;
  }
  // JoinGroupRequest.maybeOverrideRebalanceTimeout: v0 has none, the session timeout stands in.
  if (version == 0) req.rebalance_timeout_ms = req.session_timeout_ms;
  auto origin = request_origin_of(ctx, version);
  auto join = [origin = std::move(origin), req = std::move(req)](coordinator::group_coordinator& groups,
                                                                 coordinator::join_callback answer) mutable {
    groups.join_group(origin, std::move(req), std::move(answer));
  };
  resp = co_await call_group_coordinator<response>(ctx.services, std::move(join));
  // JoinGroupResponse: before v7 the protocol name is never null, from v7 an empty one is sent as null.
  if (version < 7 && !resp.protocol_name) resp.protocol_name = "";
  if (version >= 7 && resp.protocol_name && resp.protocol_name->empty()) resp.protocol_name = std::nullopt;
  co_return resp;
}

}  // namespace mala::broker::handlers
