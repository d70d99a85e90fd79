#include "handlers/alter_configs.h"

#include "handlers/admin_common.h"
#include "handlers/alter_configs_preprocess.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<alter_configs_handler::response>> alter_configs_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  // Legacy AlterConfigs has no BROKER_LOGGER support: it falls into "Unknown resource type 8".
  const auto verdict = preprocess_alter_configs(
      req.resources, ctx.services.node_id,
      [](const request::alter_configs_resource&) -> std::optional<status> { return std::nullopt; });
  request forwarded;
  forwarded.validate_only = req.validate_only;
  for (size_t i = 0; i < req.resources.size(); ++i) {
    if (!verdict[i]) forwarded.resources.push_back(req.resources[i]);
  }
  response answered;
  if (!forwarded.resources.empty()) {
    if (auto* controller = ctx.services.controller) {
      answered = co_await on_home_shard(ctx.services, [controller, &forwarded, version] {
        return controller->alter_configs(forwarded, version);
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
