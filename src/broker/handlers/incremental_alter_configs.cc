#include "handlers/incremental_alter_configs.h"

#include <algorithm>

#include "handlers/admin_common.h"
#include "handlers/alter_configs_preprocess.h"
#include "handlers/authorization.h"
#include "handlers/broker_loggers.h"
#include "mala/broker/cordoned_log_dirs.h"
#include "mala/controller/quorum_controller.h"
#include "mala/controller/topic_config.h"
#include "mala/net/coroutine_frame_warning.h"

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
  // A request forwarded by another node (on the controller listener) names that node: it checked the name.
  auto verdict =
      preprocess_alter_configs(req.resources, may_forward_to_controller(ctx) ? node_id : -1, local);
  // KIP-1066 (DynamicLogConfig.validateReconfiguration, through
  // ConfigAdminManager.validateBrokerConfigChange): the dirs cordoned on this node must be its log dirs. Only
  // this node knows them, and kafka-configs sends a broker's resource to that broker. SET and APPEND name
  // dirs; SUBTRACT and DELETE cannot add one.
  if (ctx.services.config) {
    const auto& dirs = ctx.services.config->log_dirs();
    for (size_t i = 0; i < req.resources.size(); ++i) {
      const auto& r = req.resources[i];
      if (verdict[i] || r.resource_type != config_resource_broker ||
          r.resource_name != std::to_string(node_id))
        continue;
      for (const auto& c : r.configs) {
        if (c.name != cordoned_log_dirs_config || !c.value ||
            (c.config_operation != controller::config_op_set &&
             c.config_operation != controller::config_op_append))
          continue;
        const auto entries = controller::parse_config_list(*c.value);
        for (const auto& entry : entries) {
          if (entry == "*" || std::find(dirs.begin(), dirs.end(), entry) != dirs.end()) continue;
          std::string shown;
          for (const auto& e : entries) shown += (shown.empty() ? "" : ", ") + e;
          verdict[i] =
              status::error(error_code::invalid_request,
                            "Invalid value [" + shown +
                                "] for configuration cordoned.log.dirs: Invalid entry "
                                "in cordoned.log.dirs: " +
                                entry + ". All cordoned log dirs must be entries of log.dirs or log.dir.");
          break;
        }
        if (verdict[i]) break;
      }
    }
  }
  // ALTER_CONFIGS on each resource (AuthHelper), before anything is forwarded.
  for (size_t i = 0; i < req.resources.size(); ++i) {
    const auto& r = req.resources[i];
    if (const error_code refused =
            config_resource_refusal(ctx, acl_operation::alter_configs, r.resource_type, r.resource_name);
        refused != error_code::none) {
      verdict[i] = status::error(refused, std::string(default_error_message(refused)));
    }
  }
  // A named callable, not a lambda in the coroutine call: GCC 12 destroys a prvalue argument of a coroutine
  // twice (GCC bug 100611).
  auto call = [version](controller::quorum_controller& controller, const request& forwarded) {
    return controller.incremental_alter_configs(forwarded, version);
  };
  co_return co_await forward_alter_configs<response>(ctx, req, version, verdict, std::move(call));
}

}  // namespace mala::broker::handlers
