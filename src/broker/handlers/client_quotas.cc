#include "handlers/client_quotas.h"

#include <map>
#include <set>
#include <string>
#include <utility>

#include "handlers/admin_common.h"
#include "handlers/authorization.h"
#include "mala/controller/client_quota_control.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

namespace {

// DescribeClientQuotasRequest's MatchType.
constexpr int8_t match_exact = 0;
constexpr int8_t match_default = 1;
constexpr int8_t match_specified = 2;

struct describe_filter {
  std::map<std::string, std::optional<std::string>> exact;  // nullopt: the default entity
  std::set<std::string> specified;
};

bool matches(const metadata::client_quota_entity& entity, const describe_filter& filter, bool strict) {
  if (strict && entity.size() != filter.exact.size() + filter.specified.size()) return false;
  for (const auto& [type, name] : filter.exact) {
    auto it = entity.find(type);
    if (it == entity.end() || it->second != name) return false;
  }
  for (const auto& type : filter.specified) {
    if (!entity.contains(type)) return false;
  }
  return true;
}

}  // namespace

protocol::describe_client_quotas_response describe_client_quotas(
    const metadata::metadata_image& image, const protocol::describe_client_quotas_request& req) {
  protocol::describe_client_quotas_response resp;
  auto refuse = [&resp](error_code code, std::string message) {
    resp.error_code = to_wire(code);
    resp.error_message = std::move(message);
    resp.entries = std::nullopt;
    return resp;
  };
  describe_filter filter;
  for (const auto& c : req.components) {
    if (c.entity_type.empty()) return refuse(error_code::invalid_request, "Invalid empty entity type.");
    if (filter.exact.contains(c.entity_type) || filter.specified.contains(c.entity_type)) {
      return refuse(error_code::invalid_request,
                    "Entity type " + c.entity_type + " cannot appear more than once in the filter.");
    }
    if (c.entity_type != controller::quota_entity_ip && c.entity_type != controller::quota_entity_user &&
        c.entity_type != controller::quota_entity_client_id) {
      return refuse(error_code::unsupported_version, "Unsupported entity type " + c.entity_type);
    }
    switch (c.match_type) {
      case match_exact:
        if (!c.match) {
          return refuse(error_code::invalid_request,
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.");
        }
        filter.exact[c.entity_type] = c.match;
        break;
      case match_default:
        if (c.match) {
          return refuse(error_code::invalid_request,
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.");
        }
        filter.exact[c.entity_type] = std::nullopt;
        break;
      case match_specified:
        if (c.match) {
          return refuse(error_code::invalid_request,
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.");
        }
        filter.specified.insert(c.entity_type);
        break;
      default:
        return refuse(error_code::invalid_request, "Unknown match type " + std::to_string(c.match_type));
    }
  }
  auto named = [&filter](const char* type) {
    return filter.exact.contains(type) || filter.specified.contains(type);
  };
  if (named(controller::quota_entity_ip) &&
      (named(controller::quota_entity_user) || named(controller::quota_entity_client_id))) {
    return refuse(error_code::invalid_request,
                  "Invalid entity filter component combination. IP filter component should not be used with "
                  "user or clientId filter component.");
  }
  resp.error_code = 0;
  resp.error_message = std::nullopt;
  auto& entries = resp.entries.emplace();
  if (!image.client_quotas.entities) return resp;
  for (const auto& [entity, values] : *image.client_quotas.entities) {
    if (!matches(entity, filter, req.strict)) continue;
    auto& e = entries.emplace_back();
    for (const auto& [type, name] : entity) e.entity.push_back({type, name});
    for (const auto& [key, value] : values) e.values.push_back({key, value});
  }
  return resp;
}

describe_client_quotas_handler::response describe_client_quotas_handler::handle(request_context& ctx,
                                                                                const request& req,
                                                                                int16_t version) {
  (void)version;
  // KafkaApis.handleDescribeClientQuotasRequest: DESCRIBE_CONFIGS on the cluster.
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::describe_configs))
    return std::move(*refused);
  return describe_client_quotas(*ctx.services.metadata->current(), req);
}

asio::awaitable<std::optional<alter_client_quotas_handler::response>>
alter_client_quotas_handler::handle_async(request_context& ctx, request req, int16_t version) {
  // ControllerApis.handleAlterClientQuotas: ALTER_CONFIGS on the cluster, else every entity answers
  // CLUSTER_AUTHORIZATION_FAILED (AlterClientQuotasRequest.getErrorResponse).
  if (!authorized_cluster(ctx, acl_operation::alter_configs)) {
    response resp;
    for (const auto& entry : req.entries) {
      auto& e = resp.entries.emplace_back();
      e.error_code = to_wire(error_code::cluster_authorization_failed);
      e.error_message = std::string(default_error_message(error_code::cluster_authorization_failed));
      for (const auto& entity : entry.entity) e.entity.push_back({entity.entity_type, entity.entity_name});
    }
    co_return resp;
  }
  auto answer = co_await on_controller<response>(
      ctx, req, version,
      [&req, version](controller::quorum_controller& c) { return c.alter_client_quotas(req, version); },
      broker_propagation::every_live_broker);
  if (answer.ok()) co_return std::move(*answer.response);
  // No controller reachable: every entity answers NOT_CONTROLLER / REQUEST_TIMED_OUT (retriable).
  response resp;
  for (const auto& entry : req.entries) {
    auto& e = resp.entries.emplace_back();
    e.error_code = to_wire(answer.failure());
    e.error_message = std::string(default_error_message(answer.failure()));
    for (const auto& entity : entry.entity) e.entity.push_back({entity.entity_type, entity.entity_name});
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
