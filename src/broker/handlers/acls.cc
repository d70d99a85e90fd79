#include "handlers/acls.h"

#include <map>
#include <string>
#include <tuple>

#include "handlers/admin_common.h"
#include "handlers/authorization.h"
#include "mala/common/error_code.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

namespace {
// AclApis' answer without an authorizer.
const std::string no_authorizer_message = "No Authorizer is configured.";

template <typename Result>
void fail_all(std::vector<Result>& results, size_t n, error_code code, const std::string& message) {
  results.clear();
  for (size_t i = 0; i < n; ++i) {
    auto& r = results.emplace_back();
    r.error_code = to_wire(code);
    r.error_message = message;
  }
}

}  // namespace

describe_acls_handler::response describe_acls_handler::handle(request_context& ctx, const request& req,
                                                              int16_t) {
  response resp;
  if (!authorization_enabled(ctx)) {
    resp.error_code = to_wire(error_code::security_disabled);
    resp.error_message = no_authorizer_message;
    return resp;
  }
  if (!authorized_cluster(ctx, acl_operation::describe)) {
    resp.error_code = to_wire(error_code::cluster_authorization_failed);
    resp.error_message = std::string(default_error_message(error_code::cluster_authorization_failed));
    return resp;
  }
  metadata::acl_filter filter;
  filter.resource_type = metadata::to_acl_resource_type(req.resource_type_filter);
  filter.resource_name = req.resource_name_filter;
  filter.pattern_type = metadata::to_acl_pattern_type(req.pattern_type_filter);
  filter.principal = req.principal_filter;
  filter.host = req.host_filter;
  filter.operation = metadata::to_acl_operation(req.operation);
  filter.permission = metadata::to_acl_permission(req.permission_type);
  if (auto invalid = metadata::invalid_acl_filter(filter)) {
    resp.error_code = to_wire(error_code::invalid_request);
    resp.error_message = *invalid;
    return resp;
  }
  resp.error_message = std::nullopt;
  // DescribeAclsResponse.aclsResources: the matching ACLs grouped by resource pattern.
  const auto image = ctx.services.metadata->current();
  std::map<std::tuple<int8_t, std::string, int8_t>, size_t> by_pattern;
  for (const auto& [id, acl] : image->acls.by_id) {
    if (!metadata::matches(filter, acl)) continue;
    const auto key = std::make_tuple(static_cast<int8_t>(acl.resource_type), acl.resource_name,
                                     static_cast<int8_t>(acl.pattern_type));
    auto [it, added] = by_pattern.try_emplace(key, resp.resources.size());
    if (added) {
      auto& r = resp.resources.emplace_back();
      r.resource_type = std::get<0>(key);
      r.resource_name = acl.resource_name;
      r.pattern_type = std::get<2>(key);
    }
    auto& a = resp.resources[it->second].acls.emplace_back();
    a.principal = acl.principal;
    a.host = acl.host;
    a.operation = static_cast<int8_t>(acl.operation);
    a.permission_type = static_cast<int8_t>(acl.permission);
  }
  return resp;
}

asio::awaitable<std::optional<create_acls_handler::response>> create_acls_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  response resp;
  const size_t n = req.creations.size();
  if (!authorization_enabled(ctx)) {
    fail_all(resp.results, n, error_code::security_disabled, no_authorizer_message);
    co_return resp;
  }
  if (!authorized_cluster(ctx, acl_operation::alter)) {
    fail_all(resp.results, n, error_code::cluster_authorization_failed,
             std::string(default_error_message(error_code::cluster_authorization_failed)));
    co_return resp;
  }
  // AclApis.handleCreateAcls refuses these before the authorizer sees them; the rest go to the controller.
  std::vector<std::optional<std::string>> refused(n);
  request valid;
  for (size_t i = 0; i < n; ++i) {
    const auto& c = req.creations[i];
    if (metadata::to_acl_resource_type(c.resource_type) == metadata::acl_resource_type::cluster &&
        c.resource_name != metadata::cluster_resource_name) {
      refused[i] = "The only valid name for the CLUSTER resource is kafka-cluster";
    } else if (c.resource_name.empty()) {
      refused[i] = "Invalid empty resource name";
    } else {
      valid.creations.push_back(c);
    }
  }
  std::vector<protocol::create_acls_response__acl_creation_result> created;
  if (!valid.creations.empty()) {
    // A named callable (GCC bug 100611).
    auto local = [&valid](controller::quorum_controller& c) { return c.create_acls(valid); };
    auto answer = co_await on_controller<response>(ctx, valid, version, local);
    if (answer.ok() && answer.response->results.size() == valid.creations.size()) {
      created = std::move(answer.response->results);
    } else {
      const error_code code = answer.ok() ? error_code::unknown_server_error : answer.failure();
      fail_all(created, valid.creations.size(), code, std::string(default_error_message(code)));
    }
  }
  size_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    if (refused[i]) {
      auto& r = resp.results.emplace_back();
      r.error_code = to_wire(error_code::invalid_request);
      r.error_message = std::move(refused[i]);
    } else {
      resp.results.push_back(std::move(created[next++]));
    }
  }
  co_return resp;
}

asio::awaitable<std::optional<delete_acls_handler::response>> delete_acls_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  response resp;
  const size_t n = req.filters.size();
  if (!authorization_enabled(ctx)) {
    fail_all(resp.filter_results, n, error_code::security_disabled, no_authorizer_message);
    co_return resp;
  }
  if (!authorized_cluster(ctx, acl_operation::alter)) {
    fail_all(resp.filter_results, n, error_code::cluster_authorization_failed,
             std::string(default_error_message(error_code::cluster_authorization_failed)));
    co_return resp;
  }
  if (n == 0) co_return resp;
  auto local = [&req](controller::quorum_controller& c) { return c.delete_acls(req); };
  auto answer = co_await on_controller<response>(ctx, req, version, local);
  if (answer.ok() && answer.response->filter_results.size() == n) co_return std::move(*answer.response);
  const error_code code = answer.ok() ? error_code::unknown_server_error : answer.failure();
  fail_all(resp.filter_results, n, code, std::string(default_error_message(code)));
  co_return resp;
}

}  // namespace mala::broker::handlers
