#include "handlers/describe_groups.h"

#include <utility>

#include "handlers/group_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<describe_groups_handler::response>> describe_groups_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  response resp;
  if (!ctx.services.groups) {
    for (const auto& id : req.groups) {
      auto& g = resp.groups.emplace_back();
      g.group_id = id;
      g.error_code = to_wire(error_code::coordinator_not_available);
    }
    co_return resp;
  }
  // KafkaApis.handleDescribeGroupsRequest: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED, listed first).
  std::vector<std::string> ids;
  for (const auto& id : req.groups) {
    if (group_allowed(ctx, acl_operation::describe, id)) {
      ids.push_back(id);
    } else {
      auto& g = resp.groups.emplace_back();
      g.group_id = id;
      g.error_code = to_wire(error_code::group_authorization_failed);
    }
  }
  if (ids.empty()) co_return resp;
  using described = std::vector<response::described_group>;
  auto describe = [ids = std::move(ids)](coordinator::group_coordinator& groups,
                                         std::function<void(described)> answer) {
    answer(groups.describe_groups(ids));
  };
  auto groups = co_await call_group_coordinator<described>(ctx.services, std::move(describe));
  if (version >= 3 && req.include_authorized_operations) {
    for (auto& g : groups) {
      if (g.error_code == to_wire(error_code::none)) {
        g.authorized_operations =
            authorized_operations(ctx, acl_resource_type::group, g.group_id, all_group_operations);
      }
    }
  }
  for (auto& g : groups) resp.groups.push_back(std::move(g));
  co_return resp;
}

}  // namespace mala::broker::handlers
