#include "handlers/consumer_group_describe.h"

#include <utility>

#include "handlers/group_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<consumer_group_describe_handler::response>>
consumer_group_describe_handler::handle_async(request_context& ctx, request req, int16_t /*version*/) {
  response resp;
  if (!ctx.services.groups) {
    for (const auto& id : req.group_ids) {
      auto& g = resp.groups.emplace_back();
      g.group_id = id;
      g.error_code = to_wire(error_code::coordinator_not_available);
    }
    co_return resp;
  }
  // KafkaApis.handleConsumerGroupDescribe: DESCRIBE on each group.
  std::vector<std::string> ids;
  for (const auto& id : req.group_ids) {
    if (group_allowed(ctx, acl_operation::describe, id)) {
      ids.push_back(id);
    } else {
      auto& g = resp.groups.emplace_back();
      g.group_id = id;
      g.error_code = to_wire(error_code::group_authorization_failed);
    }
  }
  if (ids.empty()) co_return resp;
  using described = std::vector<protocol::consumer_group_describe_response__described_group>;
  auto describe = [ids = std::move(ids), ops = req.include_authorized_operations](
                      coordinator::group_coordinator& groups, std::function<void(described)> answer) {
    answer(groups.consumer_group_describe(ids, ops));
  };
  for (auto& g : co_await call_group_coordinator<described>(ctx.services, std::move(describe))) {
    resp.groups.push_back(std::move(g));
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
