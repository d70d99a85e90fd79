#include "handlers/alter_configs.h"

#include "handlers/admin_common.h"
#include "handlers/alter_configs_preprocess.h"
#include "handlers/authorization.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<alter_configs_handler::response>> alter_configs_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  // Legacy AlterConfigs has no BROKER_LOGGER support: it falls into "Unknown resource type 8".
  auto verdict = preprocess_alter_configs(
      req.resources, may_forward_to_controller(ctx) ? ctx.services.node_id : -1,
      [](const request::alter_configs_resource&) -> std::optional<status> { return std::nullopt; });
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
    return controller.alter_configs(forwarded, version);
  };
  co_return co_await forward_alter_configs<response>(ctx, req, version, verdict, std::move(call));
}

}  // namespace mala::broker::handlers
