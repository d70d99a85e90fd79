#include "handlers/describe_cluster.h"

#include "handlers/authorization.h"

#include <algorithm>
#include <string>

#include "handlers/admin_common.h"

namespace mala::broker::handlers {

namespace {

// Kafka's EndpointType ids.
constexpr int8_t endpoint_broker = 1;
constexpr int8_t endpoint_controller = 2;

std::string_view endpoint_name(int8_t type) {
  return type == endpoint_controller ? "CONTROLLER" : "BROKER";
}

}  // namespace

describe_cluster_handler::response describe_cluster_handler::handle(request_context& ctx, const request& req,
                                                                    int16_t version) {
  response resp;
  const auto& services = ctx.services;
  const int8_t served = (services.config && is_controller_listener(services, ctx.connection.listener_name))
                            ? endpoint_controller
                            : endpoint_broker;
  // AuthHelper.computeDescribeClusterResponse.
  if (req.endpoint_type != endpoint_broker && req.endpoint_type != endpoint_controller) {
    resp.error_code =
        to_wire(version == 0 ? error_code::invalid_request : error_code::unsupported_endpoint_type);
    resp.error_message = "Unsupported endpoint type " + std::to_string(int{req.endpoint_type});
    return resp;
  }
  if (req.endpoint_type != served) {
    resp.error_code =
        to_wire(version == 0 ? error_code::invalid_request : error_code::mismatched_endpoint_type);
    resp.error_message = "The request was sent to an endpoint of type " + std::string(endpoint_name(served)) +
                         ", but we wanted an endpoint of type " +
                         std::string(endpoint_name(req.endpoint_type));
    return resp;
  }
  const auto image = services.metadata->current();
  resp.cluster_id = image->cluster_id;
  resp.endpoint_type = served;
  // AuthHelper.computeDescribeClusterResponse: anyone may describe the cluster; the authorized operations are
  // reported to a client with DESCRIBE on it, 0 to others.
  resp.cluster_authorized_operations =
      !req.include_cluster_authorized_operations ? INT32_MIN
      : authorized_cluster(ctx, acl_operation::describe)
          ? authorized_operations(ctx, acl_resource_type::cluster, metadata::cluster_resource_name,
                                  all_cluster_operations)
          : 0;
  int32_t controller_id = -1;
  if (served == endpoint_broker) {
    // MetadataCache.getAliveBrokerNodes(listener): unfenced brokers with that listener.
    for (const auto& [id, broker] : image->brokers) {
      if (broker.fenced) continue;
      const auto* ep = broker.endpoint_for(ctx.connection.listener_name);
      if (!ep) continue;
      auto& b = resp.brokers.emplace_back();
      b.broker_id = id;
      b.host = ep->host;
      b.port = ep->port;
      b.rack = broker.rack;
    }
    controller_id = image->controller_id;
  } else {
    // The controllers of the quorum (controller.quorum.voters, or the voter set in the log of a KIP-853
    // quorum); without a Raft node (handler unit tests) the configured voters, the active one this node when
    // it runs the controller. The Raft node's voters and their endpoints do not change after it opened.
    if (services.raft) {
      for (int32_t id : services.raft->voters()) {
        auto endpoint = services.raft->endpoint_of(id);
        if (!endpoint) continue;
        auto& b = resp.brokers.emplace_back();
        b.broker_id = id;
        b.host = endpoint->host;
        b.port = endpoint->port;
      }
    } else {
      for (const auto& voter : services.config->quorum_voters()) {
        auto& b = resp.brokers.emplace_back();
        b.broker_id = voter.id;
        b.host = voter.host;
        b.port = voter.port;
      }
    }
    // The active one: the quorum's leader as the image names it.
    const int32_t leader = services.metadata->current()->controller_id;
    controller_id = services.raft ? leader : (services.controller ? services.node_id : -1);
  }
  const bool listed = std::any_of(resp.brokers.begin(), resp.brokers.end(),
                                  [&](const auto& b) { return b.broker_id == controller_id; });
  // As in Metadata: the active controller when it is listed, else (on a broker listener) another live broker,
  // which forwards controller-bound requests.
  resp.controller_id = listed ? controller_id : -1;
  if (!listed && served == endpoint_broker && !resp.brokers.empty())
    resp.controller_id = resp.brokers.front().broker_id;
  return resp;
}

}  // namespace mala::broker::handlers
