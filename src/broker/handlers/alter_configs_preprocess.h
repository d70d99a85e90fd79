// What a Kafka 4.x broker checks in AlterConfigs and IncrementalAlterConfigs before it forwards them to the
// controller (ConfigAdminManager.preprocess), and how it puts the answer back together in request order
// (reassembleLegacyResponse / reassembleIncrementalResponse). Shared by both handlers: the two requests have
// the same shape and differ only in whether a config carries an operation.
//
// Threads: pure functions of the request and the node id, except forward_alter_configs, which runs the
// controller's part on the home shard (on_home_shard) and resumes on the caller's shard.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>

#include "handlers/admin_common.h"
#include "mala/broker/request_context.h"
#include "mala/common/result.h"

namespace mala::broker::handlers {

// ConfigResource.Type ids.
inline constexpr int8_t config_resource_topic = 2;
inline constexpr int8_t config_resource_broker = 4;
inline constexpr int8_t config_resource_broker_logger = 8;
inline constexpr int8_t config_resource_client_metrics = 16;
inline constexpr int8_t config_resource_group = 32;

// AlterConfigOp.OpType.DELETE: the one operation that may (and does) carry a null value.
inline constexpr int8_t config_op_delete = 1;

// ConfigAdminManager.validateResourceNameIsCurrentNodeId.
inline status check_resource_names_this_node(const std::string& name, int32_t node_id) {
  const auto id = parse_java_int(name);
  if (!id)
    return status::error(error_code::invalid_request, "Node id must be an integer, but it is: " + name);
  if (*id != node_id) {
    return status::error(error_code::invalid_request, "Unexpected broker id, expected " +
                                                          std::to_string(node_id) + ", but received " + name);
  }
  return status::success();
}

template <typename Config>
std::optional<int8_t> operation_of(const Config& c) {
  if constexpr (requires { c.config_operation; }) {
    return c.config_operation;
  } else {
    return std::nullopt;
  }
}

// The broker-side verdict on each resource of the request (by position): nullopt = forward to the controller.
// `local` handles a resource type the broker answers itself (BROKER_LOGGER in IncrementalAlterConfigs); it
// returns nullopt for types it does not handle.
template <typename Resource, typename LocalFn>
std::vector<std::optional<status>> preprocess_alter_configs(const std::vector<Resource>& resources,
                                                            int32_t node_id, LocalFn local) {
  std::vector<std::optional<status>> verdict(resources.size());
  std::map<std::pair<int8_t, std::string>, std::vector<size_t>> positions;
  for (size_t i = 0; i < resources.size(); ++i) {
    positions[{resources[i].resource_type, resources[i].resource_name}].push_back(i);
  }
  for (const auto& [key, at] : positions) {
    if (at.size() < 2) continue;
    for (size_t i : at)
      verdict[i] = status::error(error_code::invalid_request, "Each resource must appear at most once.");
  }
  for (size_t i = 0; i < resources.size(); ++i) {
    if (verdict[i]) continue;
    const auto& r = resources[i];
    std::set<std::string> names;
    bool duplicate = false;
    std::string null_updates;
    for (const auto& c : r.configs) {
      if (!names.insert(c.name).second) duplicate = true;
      if (!c.value && operation_of(c) != std::optional<int8_t>(config_op_delete)) {
        null_updates += (null_updates.empty() ? "" : ", ") + c.name;
      }
    }
    if (duplicate) {
      verdict[i] = status::error(error_code::invalid_request, "Error due to duplicate config keys");
      continue;
    }
    if (!null_updates.empty()) {
      verdict[i] =
          status::error(error_code::invalid_request, "Null value not supported for : " + null_updates);
      continue;
    }
    if (std::optional<status> handled = local(r)) {
      verdict[i] = std::move(handled);
      continue;
    }
    switch (r.resource_type) {
      case config_resource_broker:
        // Blank: a cluster-wide default; otherwise it must name this node (the controller validates the
        // values themselves). node_id < 0: a request another node forwarded, which that node checked.
        if (!r.resource_name.empty() && node_id >= 0) {
          if (auto st = check_resource_names_this_node(r.resource_name, node_id); !st.ok())
            verdict[i] = std::move(st);
        }
        break;
      case config_resource_topic:
      case config_resource_client_metrics:
      case config_resource_group:
        break;
      default:
        verdict[i] = status::error(error_code::invalid_request,
                                   "Unknown resource type " + std::to_string(int{r.resource_type}));
    }
  }
  return verdict;
}

// Puts the verdicts and the controller's answers back in request order; a resource the controller did not
// answer is UNKNOWN_SERVER_ERROR, as Kafka's reassembly does.
template <typename Response, typename Resource, typename ControllerResponse>
Response reassemble_alter_configs(const std::vector<Resource>& resources,
                                  const std::vector<std::optional<status>>& verdict,
                                  const ControllerResponse& forwarded) {
  Response out;
  for (size_t i = 0; i < resources.size(); ++i) {
    auto& r = out.responses.emplace_back();
    r.resource_type = resources[i].resource_type;
    r.resource_name = resources[i].resource_name;
    if (verdict[i]) {
      r.error_code = to_wire(verdict[i]->code);
      r.error_message = verdict[i]->ok() ? std::nullopt : std::optional<std::string>(verdict[i]->message);
      continue;
    }
    bool found = false;
    for (const auto& f : forwarded.responses) {
      if (f.resource_type == r.resource_type && f.resource_name == r.resource_name) {
        r.error_code = f.error_code;
        r.error_message = f.error_message;
        found = true;
        break;
      }
    }
    if (!found) {
      r.error_code = to_wire(error_code::unknown_server_error);
      r.error_message = std::string(default_error_message(error_code::unknown_server_error));
    }
  }
  return out;
}

// Both handlers after the broker's verdict (ConfigAdminManager.preprocess): the resources without one go to
// the controller in one request (`call(controller, forwarded)` on the home shard), or get NOT_CONTROLLER when
// this node has no controller; then the whole answer is reassembled in request order. `req` is the caller's,
// which awaits this at once.
template <typename Response, typename Request, typename ControllerCall>
asio::awaitable<Response> forward_alter_configs(request_context& ctx, const Request& req, int16_t version,
                                                std::vector<std::optional<status>> verdict,
                                                ControllerCall call) {
  Request forwarded;
  forwarded.validate_only = req.validate_only;
  for (size_t i = 0; i < req.resources.size(); ++i) {
    if (!verdict[i]) forwarded.resources.push_back(req.resources[i]);
  }
  Response answered;
  if (!forwarded.resources.empty()) {
    auto answer = co_await on_controller<Response>(
        ctx, forwarded, version,
        [&forwarded, &call](controller::quorum_controller& c) { return call(c, forwarded); },
        broker_propagation::every_live_broker);
    if (answer.ok()) {
      answered = std::move(*answer.response);
    } else {
      for (const auto& r : forwarded.resources) {
        auto& a = answered.responses.emplace_back();
        a.resource_type = r.resource_type;
        a.resource_name = r.resource_name;
        a.error_code = to_wire(answer.failure());
        a.error_message = std::string(default_error_message(answer.failure()));
      }
    }
  }
  co_return reassemble_alter_configs<Response>(req.resources, verdict, answered);
}

}  // namespace mala::broker::handlers
