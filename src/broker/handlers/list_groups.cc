#include "handlers/list_groups.h"

#include <utility>

#include "handlers/group_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<list_groups_handler::response>> list_groups_handler::handle_async(
    request_context& ctx, request req, int16_t /*version*/) {
  if (!ctx.services.groups) {
    response resp;
    resp.error_code = to_wire(error_code::coordinator_not_available);
    co_return resp;
  }
  auto list = [req = std::move(req)](coordinator::group_coordinator& groups,
                                     std::function<void(response)> answer) {
    answer(groups.list_groups(req));
  };
  auto resp = co_await call_group_coordinator<response>(ctx.services, std::move(list));
  // KafkaApis.handleListGroupsRequest: DESCRIBE on the cluster lists every group, else only the groups the
  // client may DESCRIBE.
  if (authorization_enabled(ctx) && !authorized_cluster(ctx, acl_operation::describe)) {
    std::erase_if(resp.groups,
                  [&ctx](const auto& g) { return !group_allowed(ctx, acl_operation::describe, g.group_id); });
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
