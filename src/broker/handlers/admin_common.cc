#include "handlers/admin_common.h"

namespace mala::broker::handlers {

std::string_view default_error_message(error_code code) {
  switch (code) {
    case error_code::unknown_server_error:
      return "The server experienced an unexpected error when processing the request.";
    case error_code::unknown_topic_or_partition:
      return "This server does not host this topic-partition.";
    case error_code::coordinator_load_in_progress:
      return "The coordinator is loading and hence can't process requests.";
    case error_code::coordinator_not_available:
      return "The coordinator is not available.";
    case error_code::invalid_topic_exception:
      return "The request attempted to perform an operation on an invalid topic.";
    case error_code::unsupported_version:
      return "The version of API is not supported.";
    case error_code::not_controller:
      return "This is not the correct controller for this cluster.";
    case error_code::invalid_request:
      return "This most likely occurs because of a request being malformed by the client library or the "
             "message was sent to an incompatible broker. See the broker logs for more details.";
    case error_code::topic_deletion_disabled:
      return "Topic deletion is disabled.";
    case error_code::unknown_topic_id:
      return "This server does not host this topic ID.";
    case error_code::topic_authorization_failed:
      return "Topic authorization failed.";
    case error_code::group_authorization_failed:
      return "Group authorization failed.";
    case error_code::cluster_authorization_failed:
      return "Cluster authorization failed.";
    case error_code::transactional_id_authorization_failed:
      return "Transactional Id authorization failed.";
    default:
      return "";
  }
}

bool is_known_config_resource_type(int8_t type) {
  return type == 2 || type == 4 || type == 8 || type == 16 || type == 32;
}

}  // namespace mala::broker::handlers

namespace mala::broker::handlers {

bool may_forward_to_controller(const request_context& ctx) {
  return !ctx.services.config || !is_controller_listener(ctx.services, ctx.connection.listener_name);
}

controller_mutation_quota mutation_quota_for(const request_context& ctx, bool strict) {
  // A request on a controller listener was forwarded by the broker that received it, which applied the quota
  // of the client's principal already.
  if (!ctx.services.quotas || !may_forward_to_controller(ctx)) return {};
  const auto image = ctx.services.metadata->current();
  if (image->client_quotas.empty()) return {};
  static const std::string none;
  return ctx.services.quotas->mutation_quota(image->client_quotas, ctx.connection.principal_name,
                                             ctx.header.client_id ? *ctx.header.client_id : none, strict);
}

int32_t throttle_for_mutations(request_context& ctx, const controller_mutation_quota& quota) {
  const int32_t throttle = quota.throttle_time_ms();
  if (throttle > 0) ctx.connection.throttle_for(std::chrono::milliseconds(throttle));
  return throttle;
}

}  // namespace mala::broker::handlers
