#include "handlers/delete_groups.h"

#include <set>
#include <utility>

#include "handlers/group_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<delete_groups_handler::response>> delete_groups_handler::handle_async(
    request_context& ctx, request req, int16_t /*version*/) {
  // KafkaApis takes the distinct names, in order.
  std::vector<std::string> ids;
  std::set<std::string> seen;
  for (auto& id : req.groups_names) {
    if (seen.insert(id).second) ids.push_back(std::move(id));
  }
  response resp;
  if (!ctx.services.groups) {
    for (const auto& id : ids) resp.results.push_back({id, to_wire(error_code::coordinator_not_available)});
    co_return resp;
  }
  // KafkaApis.handleDeleteGroupsRequest: DELETE on each group (GROUP_AUTHORIZATION_FAILED).
  std::vector<std::string> allowed;
  for (auto& id : ids) {
    if (group_allowed(ctx, acl_operation::remove, id)) {
      allowed.push_back(std::move(id));
    } else {
      resp.results.push_back({id, to_wire(error_code::group_authorization_failed)});
    }
  }
  if (allowed.empty()) co_return resp;
  using results = std::vector<response::deletable_group_result>;
  auto del = [ids = std::move(allowed)](coordinator::group_coordinator& groups,
                                        std::function<void(results)> answer) mutable {
    groups.delete_groups(std::move(ids), std::move(answer));
  };
  for (auto& r : co_await call_group_coordinator<results>(ctx.services, std::move(del))) {
    resp.results.push_back(std::move(r));
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
