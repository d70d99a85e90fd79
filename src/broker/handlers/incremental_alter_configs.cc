#include "handlers/incremental_alter_configs.h"

#include "handlers/admin_common.h"
#include "handlers/alter_configs_preprocess.h"
#include "handlers/broker_loggers.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<incremental_alter_configs_handler::response>>
incremental_alter_configs_handler::handle_async(request_context& ctx, request req, int16_t version) {
  const int32_t node_id = ctx.services.node_id;
  const bool validate_only = req.validate_only;
  // RuntimeLoggerManager: the resource must name this node (Kafka's wording differs from the BROKER check;
  // Kafka prints its own id where the received one belongs, Mala the received one), then every operation is
  // validated before any is applied.
  auto local = [node_id, validate_only](const request::alter_configs_resource& r) -> std::optional<status> {
    if (r.resource_type != config_resource_broker_logger) return std::nullopt;
    const auto id = parse_java_int(r.resource_name);
    if (!id)
      return status::error(error_code::invalid_request,
                           "Node id must be an integer, but it is: " + r.resource_name);
    if (*id != node_id) {
      return status::error(
          error_code::invalid_request,
          "Unexpected node id. Expected " + std::to_string(node_id) + ", but received " + r.resource_name);
    }
    return apply_broker_logger_changes(r.configs, validate_only);
  };
  const auto verdict = preprocess_alter_configs(req.resources, node_id, local);
  request forwarded;
  forwarded.validate_only = req.validate_only;
  for (size_t i = 0; i < req.resources.size(); ++i) {
    if (!verdict[i]) forwarded.resources.push_back(req.resources[i]);
  }
  response answered;
  if (!forwarded.resources.empty()) {
    if (auto* controller = ctx.services.controller) {
      answered = co_await on_home_shard(ctx.services, [controller, &forwarded, version] {
        return controller->incremental_alter_configs(forwarded, version);
      });
    } else {
      for (const auto& r : forwarded.resources) {
        auto& a = answered.responses.emplace_back();
        a.resource_type = r.resource_type;
        a.resource_name = r.resource_name;
        a.error_code = to_wire(error_code::not_controller);
        a.error_message = std::string(default_error_message(error_code::not_controller));
      }
    }
  }
  co_return reassemble_alter_configs<response>(req.resources, verdict, answered);
}

}  // namespace mala::broker::handlers
