#include "handlers/sync_group.h"

#include <utility>

#include "handlers/group_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<sync_group_handler::response>> sync_group_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  response resp;
  resp.protocol_type = std::nullopt;
  resp.protocol_name = std::nullopt;
  // SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent (v5+), checked by KafkaApis first.
  if (version >= 5 && (!req.protocol_type || !req.protocol_name)) {
    resp.error_code = to_wire(error_code::inconsistent_group_protocol);
    co_return resp;
  }
  if (!group_allowed(ctx, acl_operation::read, req.group_id)) {
    resp.error_code = to_wire(error_code::group_authorization_failed);
    co_return resp;
  }
  if (!ctx.services.groups) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
    co_return resp;
  }
  auto origin = request_origin_of(ctx, version);
  auto sync = [origin = std::move(origin), req = std::move(req)](coordinator::group_coordinator& groups,
                                                                 coordinator::sync_callback answer) mutable {
    groups.sync_group(origin, std::move(req), std::move(answer));
  };
  co_return co_await call_group_coordinator<response>(ctx.services, std::move(sync));
}

}  // namespace mala::broker::handlers
