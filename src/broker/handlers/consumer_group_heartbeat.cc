#include "handlers/consumer_group_heartbeat.h"

#include <utility>

#include "handlers/group_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<consumer_group_heartbeat_handler::response>>
consumer_group_heartbeat_handler::handle_async(request_context& ctx, request req, int16_t version) {
  if (!ctx.services.groups) {
    response resp;
    resp.error_code = to_wire(error_code::coordinator_not_available);
    co_return resp;
  }
  // KafkaApis.handleConsumerGroupHeartbeat: READ on the group, DESCRIBE on the subscribed topics.
  if (!group_allowed(ctx, acl_operation::read, req.group_id)) {
    response resp;
    resp.error_code = to_wire(error_code::group_authorization_failed);
    co_return resp;
  }
  if (req.subscribed_topic_names) {
    for (const auto& topic : *req.subscribed_topic_names) {
      if (!authorized(ctx, acl_operation::describe, acl_resource_type::topic, topic)) {
        response resp;
        resp.error_code = to_wire(error_code::topic_authorization_failed);
        resp.error_message = "The client is not authorized to describe topic " + topic;
        co_return resp;
      }
    }
  }
  auto origin = request_origin_of(ctx, version);
  auto beat = [origin = std::move(origin), req = std::move(req)](
                  coordinator::group_coordinator& groups, std::function<void(response)> answer) mutable {
    groups.consumer_group_heartbeat(origin, std::move(req), std::move(answer));
  };
  co_return co_await call_group_coordinator<response>(ctx.services, std::move(beat));
}

}  // namespace mala::broker::handlers
