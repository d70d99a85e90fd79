#include "handlers/authorization.h"

#include "mala/common/logging.h"

namespace mala::broker::handlers {

namespace {

// A request on a controller listener comes from another node: a broker forwarding a client's admin request
// (checked against the client's principal by that broker; Mala forwards without Kafka's Envelope, so the
// client's principal does not travel), or a KRaft / broker lifecycle RPC. Kafka checks CLUSTER_ACTION on the
// Envelope's sender; Mala checks it on the sender of every such request, in place of the client-level check.
bool from_another_node(const request_context& ctx) {
  return ctx.services.config && is_controller_listener(ctx.services, ctx.connection.listener_name);
}

}  // namespace

bool authorized(const request_context& ctx, acl_operation op, acl_resource_type type, std::string_view name) {
  const authorizer* a = ctx.services.acl_authorizer;
  if (!a) return true;
  if (from_another_node(ctx)) {
    op = acl_operation::cluster_action;
    type = acl_resource_type::cluster;
    name = metadata::cluster_resource_name;
  }
  const auto image = ctx.services.metadata->current();
  const std::string principal = principal_of(ctx.connection);
  const std::string host = host_of(ctx.connection);
  const bool ok = a->authorize(*image, principal, host, op, type, name);
  if (!ok) {
    // Kafka's authorizer audit log writes denials at INFO (kafka.authorizer.logger).
    subsystem_logger("authorizer")
        ->debug(
            "Principal = {} is Denied operation = {} from host = {} on resource = {}:{} for request api key "
            "{}",
            principal, metadata::name_of(op), host, metadata::name_of(type), name, ctx.header.api_key);
  }
  return ok;
}

acl_checker::acl_checker(const request_context& ctx) : _ctx(ctx) {
  if (!ctx.services.acl_authorizer) return;
  _image = ctx.services.metadata->current();
  _principal = principal_of(ctx.connection);
  _host = host_of(ctx.connection);
  _from_another_node = from_another_node(ctx);
}

bool acl_checker::allows(acl_operation op, acl_resource_type type, std::string_view name) const {
  const authorizer* a = _ctx.services.acl_authorizer;
  if (!a) return true;
  if (_from_another_node) return authorized_cluster(_ctx, acl_operation::cluster_action);
  return a->authorize(*_image, _principal, _host, op, type, name);
}

bool authorized_any(const request_context& ctx, acl_operation op, acl_resource_type type) {
  const authorizer* a = ctx.services.acl_authorizer;
  if (!a) return true;
  if (from_another_node(ctx)) return authorized_cluster(ctx, acl_operation::cluster_action);
  const auto image = ctx.services.metadata->current();
  return a->authorize_any(*image, principal_of(ctx.connection), host_of(ctx.connection), op, type);
}

error_code config_resource_refusal(const request_context& ctx, acl_operation op, int8_t type,
                                   const std::string& name) {
  if (!authorization_enabled(ctx)) return error_code::none;
  switch (type) {
    case 2:  // TOPIC
      return authorized(ctx, op, acl_resource_type::topic, name) ? error_code::none
                                                                 : error_code::topic_authorization_failed;
    case 32:  // GROUP
      return authorized(ctx, op, acl_resource_type::group, name) ? error_code::none
                                                                 : error_code::group_authorization_failed;
    default:  // BROKER, BROKER_LOGGER, CLIENT_METRICS
      return authorized_cluster(ctx, op) ? error_code::none : error_code::cluster_authorization_failed;
  }
}

int32_t authorized_operations(const request_context& ctx, acl_resource_type type, std::string_view name,
                              int32_t all_ops) {
  const authorizer* a = ctx.services.acl_authorizer;
  if (!a) return all_ops;
  const auto image = ctx.services.metadata->current();
  const std::string principal = principal_of(ctx.connection);
  const std::string host = host_of(ctx.connection);
  int32_t out = 0;
  for (int code = 0; code < 31; ++code) {
    if (!(all_ops & (int32_t{1} << code))) continue;
    if (a->authorize(*image, principal, host, static_cast<acl_operation>(code), type, name))
      out |= int32_t{1} << code;
  }
  return out;
}

}  // namespace mala::broker::handlers
