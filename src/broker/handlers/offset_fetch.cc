#include "handlers/offset_fetch.h"

#include <utility>

#include "handlers/group_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

namespace {

using group_request = offset_fetch_handler::request::offset_fetch_request_group;
using group_response = offset_fetch_handler::response::offset_fetch_response_group;

// KafkaApis.handleOffsetFetchRequest: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) and on each topic
// (named topics the client may not DESCRIBE are TOPIC_AUTHORIZATION_FAILED, and left out of an all-topics
// answer).
asio::awaitable<group_response> fetch_group(const request_context& ctx, group_request group,
                                            bool require_stable) {
  const broker_services& services = ctx.services;
  if (!services.groups || !group_allowed(ctx, acl_operation::describe, group.group_id)) {
    group_response r;
    r.group_id = group.group_id;
    r.error_code = to_wire(services.groups ? error_code::group_authorization_failed
                                           : error_code::coordinator_not_available);
    co_return r;
  }
  auto may_describe = [&ctx](const std::string& topic) {
    return authorized(ctx, acl_operation::describe, acl_resource_type::topic, topic);
  };
  std::vector<protocol::offset_fetch_response__offset_fetch_response_topics> refused;
  const bool all_topics = !group.topics.has_value();
  if (group.topics && authorization_enabled(ctx)) {
    std::vector<protocol::offset_fetch_request__offset_fetch_request_topics> kept;
    for (auto& t : *group.topics) {
      if (may_describe(t.name)) {
        kept.push_back(std::move(t));
        continue;
      }
      auto& rt = refused.emplace_back();
      rt.name = t.name;
      for (int32_t p : t.partition_indexes) {
        auto& rp = rt.partitions.emplace_back();
        rp.partition_index = p;
        rp.committed_offset = -1;
        rp.committed_leader_epoch = -1;
        rp.metadata = "";
        rp.error_code = to_wire(error_code::topic_authorization_failed);
      }
    }
    group.topics = std::move(kept);
  }
  auto fetch = [group = std::move(group), require_stable](coordinator::group_coordinator& groups,
                                                          std::function<void(group_response)> answer) {
    groups.fetch_offsets(group, require_stable, std::move(answer));
  };
  auto answer = co_await call_group_coordinator<group_response>(services, std::move(fetch));
  if (all_topics && authorization_enabled(ctx)) {
    std::erase_if(answer.topics, [&](const auto& t) { return !may_describe(t.name); });
  }
  for (auto& t : refused) answer.topics.push_back(std::move(t));
  co_return answer;
}

}  // namespace

asio::awaitable<std::optional<offset_fetch_handler::response>> offset_fetch_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  response resp;
  if (version >= 8) {
    for (auto& g : req.groups) {
      resp.groups.push_back(co_await fetch_group(ctx, std::move(g), req.require_stable));
    }
    co_return resp;
  }
  // OffsetFetchRequest.groups() / OffsetFetchResponse(groups, version) for one group: the top-level error
  // (v2+), or before v2 the group's error on every requested partition.
  group_request g;
  g.group_id = req.group_id;
  if (req.topics) {
    std::vector<request::offset_fetch_request_topics> topics;
    for (const auto& t : *req.topics) topics.push_back({t.name, t.partition_indexes});
    g.topics = std::move(topics);
  } else {
    g.topics = std::nullopt;
  }
  const auto requested = req.topics;
  auto answer = co_await fetch_group(ctx, std::move(g), version >= 7 && req.require_stable);
  resp.error_code = answer.error_code;
  if (answer.error_code != to_wire(error_code::none)) {
    if (version < 2 && requested) {
      for (const auto& t : *requested) {
        auto& rt = resp.topics.emplace_back();
        rt.name = t.name;
        for (int32_t p : t.partition_indexes) {
          auto& rp = rt.partitions.emplace_back();
          rp.partition_index = p;
          rp.committed_offset = -1;
          rp.committed_leader_epoch = -1;
          rp.metadata = "";
          rp.error_code = answer.error_code;
        }
      }
    }
    co_return resp;
  }
  for (auto& t : answer.topics) {
    auto& rt = resp.topics.emplace_back();
    rt.name = t.name;
    for (auto& p : t.partitions) {
      auto& rp = rt.partitions.emplace_back();
      rp.partition_index = p.partition_index;
      rp.committed_offset = p.committed_offset;
      rp.committed_leader_epoch = p.committed_leader_epoch;
      rp.metadata = p.metadata;
      rp.error_code = p.error_code;
    }
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
