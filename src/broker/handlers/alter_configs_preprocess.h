// What a Kafka 4.x broker checks in AlterConfigs and IncrementalAlterConfigs before it forwards them to the
// controller (ConfigAdminManager.preprocess), and how it puts the answer back together in request order
// (reassembleLegacyResponse / reassembleIncrementalResponse). Shared by both handlers: the two requests have
// the same shape and differ only in whether a config carries an operation.
//
// Threads: pure functions of the request and the node id, except forward_alter_configs, which runs the
// controller's part on the home shard (on_home_shard) and resumes on the caller's shard.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>

#include "handlers/admin_common.h"
#include "mala/broker/request_context.h"
#include "mala/common/result.h"
#include "mala/controller/configuration_control.h"

namespace mala::broker::handlers {

using controller::config_op_delete;
using controller::config_resource_broker;
using controller::config_resource_broker_logger;
using controller::config_resource_client_metrics;
using controller::config_resource_group;
using controller::config_resource_topic;

// The broker-side verdict on each resource of the request (by position): nullopt = forward to the controller.
// The checks are the controller's own (controller::check_alter_configs_resources); the broker's part is that
// a BROKER resource must be "" or name this node (node_id; < 0 for a request another node forwarded, which
// that node checked) and that GROUP goes on to the controller (the controller checks CLIENT_METRICS). `local`
// handles a resource type the broker answers itself (BROKER_LOGGER in IncrementalAlterConfigs); it returns
// nullopt for types it does not handle.
template <typename Resource, typename LocalFn>
std::vector<std::optional<status>> preprocess_alter_configs(const std::vector<Resource>& resources,
                                                            int32_t node_id, LocalFn local) {
  controller::alter_configs_check_rules rules;
  rules.check_broker_names = node_id >= 0;
  rules.this_node = node_id;
  rules.pass_group = true;
  return controller::check_alter_configs_resources(resources, rules, std::move(local));
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
