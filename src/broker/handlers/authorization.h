// The ACL checks of handlers (Kafka's AuthHelper): whether the connection's principal may do an operation on
// a resource, through the node's authorizer (broker_services::acl_authorizer) and the current metadata
// image's ACLs. Without an authorizer everything is allowed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mala/broker/authorizer.h"
#include "mala/broker/request_context.h"
#include "mala/metadata/acl.h"

namespace mala::broker::handlers {

using metadata::acl_operation;
using metadata::acl_resource_type;

inline bool authorization_enabled(const request_context& ctx) {
  return ctx.services.acl_authorizer != nullptr;
}

bool authorized(const request_context& ctx, acl_operation op, acl_resource_type type, std::string_view name);
inline bool authorized_cluster(const request_context& ctx, acl_operation op) {
  return authorized(ctx, op, acl_resource_type::cluster, metadata::cluster_resource_name);
}
// The same checks for many resources of one request (Metadata for every topic): the principal, host and
// image are taken once.
class acl_checker {
 public:
  explicit acl_checker(const request_context& ctx);
  bool allows(acl_operation op, acl_resource_type type, std::string_view name) const;

 private:
  const request_context& _ctx;
  metadata::metadata_image_ptr _image;
  std::string _principal;
  std::string _host;
  bool _from_another_node = false;
};

// authorizeByResourceType: some resource of the type allows `op`.
bool authorized_any(const request_context& ctx, acl_operation op, acl_resource_type type);

// AuthHelper.authorizeClusterOperation: nullopt when the client may do `op` on the cluster, else the
// request's answer with the top-level CLUSTER_AUTHORIZATION_FAILED.
template <typename Response>
std::optional<Response> cluster_refusal(const request_context& ctx, acl_operation op) {
  if (authorized_cluster(ctx, op)) return std::nullopt;
  Response r;
  r.error_code = to_wire(error_code::cluster_authorization_failed);
  if constexpr (requires { r.error_message = std::string(); })
    r.error_message = "Cluster authorization failed.";
  return r;
}

// The error for a config resource (ConfigResource.Type code, name) the client may not do `op` on
// (DESCRIBE_CONFIGS or ALTER_CONFIGS): TOPIC and GROUP on the resource itself, BROKER, BROKER_LOGGER and
// CLIENT_METRICS on the cluster (KafkaApis / AuthHelper); none when it may.
error_code config_resource_refusal(const request_context& ctx, acl_operation op, int8_t type,
                                   const std::string& name);

// The bitfield of the operations of `ops` the principal may do on a resource (the include_*_authorized_
// operations fields of Metadata, DescribeCluster, DescribeGroups); `all_ops` without an authorizer.
int32_t authorized_operations(const request_context& ctx, acl_resource_type type, std::string_view name,
                              int32_t all_ops);

}  // namespace mala::broker::handlers
