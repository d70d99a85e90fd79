#include "handlers/offset_delete.h"

#include <utility>

#include "handlers/group_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<offset_delete_handler::response>> offset_delete_handler::handle_async(
    request_context& ctx, request req, int16_t /*version*/) {
  response resp;
  if (!ctx.services.groups) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
    co_return resp;
  }
  // KafkaApis.handleOffsetDeleteRequest: DELETE on the group, READ on each topic.
  if (!group_allowed(ctx, acl_operation::remove, req.group_id)) {
    resp.error_code = to_wire(error_code::group_authorization_failed);
    co_return resp;
  }
  request valid;
  valid.group_id = req.group_id;
  req.topics = readable_topics(ctx, std::move(req.topics), resp.topics);
  for (auto& t : req.topics) {
    request::offset_delete_request_topic kept;
    kept.name = t.name;
    for (const auto& p : t.partitions) {
      if (partition_exists(ctx.services, t.name, p.partition_index)) {
        kept.partitions.push_back(p);
      } else {
        topic_entry(resp.topics, t.name)
            .partitions.push_back({p.partition_index, to_wire(error_code::unknown_topic_or_partition)});
      }
    }
    if (!kept.partitions.empty()) valid.topics.push_back(std::move(kept));
  }
  auto del = [valid = std::move(valid)](coordinator::group_coordinator& groups,
                                        std::function<void(response)> answer) mutable {
    groups.delete_offsets(std::move(valid), std::move(answer));
  };
  auto answer = co_await call_group_coordinator<response>(ctx.services, std::move(del));
  // OffsetDeleteResponse.Builder.merge: a top-level error replaces everything.
  if (answer.error_code != to_wire(error_code::none)) co_return answer;
  for (auto& t : answer.topics) {
    auto& rt = topic_entry(resp.topics, t.name);
    for (auto& p : t.partitions) rt.partitions.push_back(p);
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
