#include "handlers/offset_fetch.h"

#include <utility>

#include "handlers/group_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

namespace {

using group_request = offset_fetch_handler::request::offset_fetch_request_group;
using group_response = offset_fetch_handler::response::offset_fetch_response_group;

asio::awaitable<group_response> fetch_group(const broker_services& services, group_request group,
                                            bool require_stable) {
  if (!services.groups) {
    group_response r;
    r.group_id = group.group_id;
    r.error_code = to_wire(error_code::coordinator_not_available);
    co_return r;
  }
  auto fetch = [group = std::move(group), require_stable](coordinator::group_coordinator& groups,
                                                          std::function<void(group_response)> answer) {
    groups.fetch_offsets(group, require_stable, std::move(answer));
  };
  co_return co_await call_group_coordinator<group_response>(services, std::move(fetch));
}

}  // namespace

asio::awaitable<std::optional<offset_fetch_handler::response>> offset_fetch_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  response resp;
  if (version >= 8) {
    for (auto& g : req.groups) {
      resp.groups.push_back(co_await fetch_group(ctx.services, std::move(g), req.require_stable));
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
  auto answer = co_await fetch_group(ctx.services, std::move(g), version >= 7 && req.require_stable);
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
