#include "handlers/describe_quorum.h"

#include "handlers/authorization.h"

#include <chrono>
#include <string>

#include "handlers/admin_common.h"
#include "mala/net/coroutine_frame_warning.h"
#include "mala/raft/raft_node.h"
#include "mala/raft/rpc_codec.h"

namespace mala::broker::handlers {

namespace {

int64_t steady_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The leader's view (home shard). The replica's times are steady-clock milliseconds; the answer carries
// wall-clock timestamps as Kafka's does.
describe_quorum_handler::response describe_on_leader(const broker_services& services) {
  describe_quorum_handler::response resp;
  auto& topic = resp.topics.emplace_back();
  topic.topic_name = std::string(raft::metadata_topic_name);
  auto& p = topic.partitions.emplace_back();
  p.partition_index = 0;
  p.error_message = std::nullopt;
  const int64_t wall_now = services.clock_ms ? services.clock_ms() : 0;
  const int64_t steady_now = steady_now_ms();
  auto wall = [&](int64_t steady) { return steady < 0 ? int64_t{-1} : wall_now - (steady_now - steady); };
  const auto* node = services.raft;
  if (!node) {
    // No metadata quorum here (handler unit tests).
    p.error_code = to_wire(error_code::not_leader_or_follower);
    return resp;
  }
  const auto& state = node->state();
  p.leader_id = state.leader_id();
  p.leader_epoch = state.epoch();
  p.high_watermark = state.high_watermark();
  auto& self = p.current_voters.emplace_back();
  self.replica_id = state.node_id();
  self.log_end_offset = state.log().end_offset();
  self.last_fetch_timestamp = wall_now;
  self.last_caught_up_timestamp = wall_now;
  for (const auto& r : state.progress()) {
    protocol::describe_quorum_response::replica_state s;
    s.replica_id = r.replica_id;
    s.log_end_offset = r.log_end_offset;
    s.last_fetch_timestamp = wall(r.last_fetch_ms);
    // Caught up: it had fetched up to the high watermark at its last fetch.
    s.last_caught_up_timestamp = r.log_end_offset >= p.high_watermark ? s.last_fetch_timestamp : -1;
    s.replica_directory_id = r.directory_id;
    (r.voter ? p.current_voters : p.observers).push_back(s);
  }
  const auto listener_names =
      services.config ? services.config->controller_listener_names() : std::vector<std::string>{"CONTROLLER"};
  std::string listener = listener_names.empty() ? "CONTROLLER" : listener_names.front();
  // KIP-853: the voters' directory ids and listener names as the voter set in the log has them.
  const auto voter_set = node->voter_set();
  auto voter_info = [&](int32_t id) -> const raft::voter_info* {
    if (!voter_set) return nullptr;
    for (const auto& v : *voter_set) {
      if (v.id == id) return &v;
    }
    return nullptr;
  };
  for (auto& v : p.current_voters) {
    if (const auto* info = voter_info(v.replica_id)) v.replica_directory_id = info->directory_id;
  }
  for (int32_t id : node->voters()) {
    auto endpoint = node->endpoint_of(id);
    if (!endpoint) continue;
    auto& n = resp.nodes.emplace_back();
    n.node_id = id;
    const auto* info = voter_info(id);
    n.listeners.push_back({info && !info->listener_name.empty() ? info->listener_name : listener,
                           endpoint->host, static_cast<uint16_t>(endpoint->port)});
  }
  return resp;
}

}  // namespace

asio::awaitable<std::optional<describe_quorum_handler::response>> describe_quorum_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::describe)) co_return std::move(*refused);
  response resp;
  resp.error_message = std::nullopt;
  const bool asks_for_metadata =
      req.topics.size() == 1 && req.topics[0].topic_name == raft::metadata_topic_name &&
      req.topics[0].partitions.size() == 1 && req.topics[0].partitions[0].partition_index == 0;
  if (!asks_for_metadata) {
    resp.error_code = to_wire(error_code::invalid_request);
    co_return resp;
  }
  const broker_services* services = &ctx.services;
  auto answer = co_await on_controller<response>(
      ctx, req, version,
      [services](controller::quorum_controller&) { return describe_on_leader(*services); });
  if (answer.ok()) co_return std::move(*answer.response);
  resp.error_code = to_wire(error_code::not_leader_or_follower);
  co_return resp;
}

}  // namespace mala::broker::handlers
