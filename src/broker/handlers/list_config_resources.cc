#include "handlers/list_config_resources.h"

#include <algorithm>
#include <string>

#include "handlers/authorization.h"
#include "mala/controller/configuration_control.h"
#include "mala/metadata/metadata_image.h"

namespace mala::broker::handlers {

namespace {

using controller::config_resource_broker;
using controller::config_resource_broker_logger;
using controller::config_resource_client_metrics;
using controller::config_resource_group;
using controller::config_resource_topic;

}  // namespace

list_config_resources_handler::response list_config_resources_handler::handle(request_context& ctx,
                                                                              const request& req,
                                                                              int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::describe_configs)) return *refused;
  response resp;
  const std::vector<int8_t> supported =
      version == 0
          ? std::vector<int8_t>{config_resource_client_metrics}
          : std::vector<int8_t>{config_resource_topic, config_resource_broker, config_resource_broker_logger,
                                config_resource_client_metrics, config_resource_group};
  std::vector<int8_t> types = req.resource_types.empty() ? supported : req.resource_types;
  for (int8_t t : types) {
    if (std::find(supported.begin(), supported.end(), t) == supported.end()) {
      resp.error_code = to_wire(error_code::unsupported_version);
      return resp;
    }
  }
  const auto wanted = [&types](int8_t t) { return std::find(types.begin(), types.end(), t) != types.end(); };
  const auto add = [&resp](const std::string& name, int8_t type) {
    auto& r = resp.config_resources.emplace_back();
    r.resource_name = name;
    r.resource_type = type;
  };
  const auto image = ctx.services.metadata->current();
  const auto add_configured = [&](metadata::config_resource_type type) {
    for (const auto& [resource, configs] : image->configs)
      if (resource.type == type) add(resource.name, static_cast<int8_t>(type));
  };
  if (wanted(config_resource_group)) add_configured(metadata::config_resource_type::group);
  if (wanted(config_resource_client_metrics)) add_configured(metadata::config_resource_type::client_metrics);
  for (int8_t type : {config_resource_broker_logger, config_resource_broker}) {
    if (!wanted(type)) continue;
    // MetadataCache.getBrokerNodes(listener): every registered broker with that listener.
    for (const auto& [id, broker] : image->brokers)
      if (broker.endpoint_for(ctx.connection.listener_name)) add(std::to_string(id), type);
  }
  if (wanted(config_resource_topic))
    for (const auto& [name, topic] : image->topics) add(name, config_resource_topic);
  return resp;
}

}  // namespace mala::broker::handlers
