#include "handlers/offset_commit.h"

#include <utility>

#include "handlers/group_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<offset_commit_handler::response>> offset_commit_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  response resp;
  if (!ctx.services.groups) {
    for (const auto& t : req.topics) {
      auto& rt = topic_entry(resp.topics, t.name);
      for (const auto& p : t.partitions) {
        rt.partitions.push_back({p.partition_index, to_wire(error_code::coordinator_not_available)});
      }
    }
    co_return resp;
  }
  // KafkaApis.handleOffsetCommitRequest: READ on the group, else every partition is refused.
  if (!group_allowed(ctx, acl_operation::read, req.group_id)) {
    for (const auto& t : req.topics) {
      auto& rt = topic_entry(resp.topics, t.name);
      for (const auto& p : t.partitions) {
        rt.partitions.push_back({p.partition_index, to_wire(error_code::group_authorization_failed)});
      }
    }
    co_return resp;
  }
  // Topics the client may not READ and partitions the metadata does not know are answered here; the rest
  // goes to the coordinator.
  request valid = std::move(req);
  valid.topics = readable_topics(ctx, std::move(valid.topics), resp.topics);
  valid.topics = known_partitions(ctx.services, std::move(valid.topics), resp.topics);
  if (valid.topics.empty()) co_return resp;

  auto origin = request_origin_of(ctx, version);
  auto commit = [origin = std::move(origin), valid = std::move(valid)](
                    coordinator::group_coordinator& groups, std::function<void(response)> answer) mutable {
    groups.commit_offsets(origin, std::move(valid), std::move(answer));
  };
  auto committed = co_await call_group_coordinator<response>(ctx.services, std::move(commit));
  for (auto& t : committed.topics) {
    auto& rt = topic_entry(resp.topics, t.name);
    for (auto& p : t.partitions) rt.partitions.push_back(p);
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
