// DescribeCluster (key 60; AdminClient.describeCluster, kafka-topics --describe, kafka-cluster cluster-id,
// kafka-metadata-quorum). On a broker listener (EndpointType BROKER, KIP-919): the cluster id, the live
// brokers' endpoints on the listener the request came through, and the controller id clients are told
// (-1 when it is not among those brokers, as Kafka does). On a controller listener (EndpointType CONTROLLER,
// `--bootstrap-controller`): the quorum's voters and the active controller. An endpoint type of the other
// kind is MISMATCHED_ENDPOINT_TYPE, an unknown one UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST at v0).
// Cluster authorized operations, when asked, are every cluster operation (no authorizer).
#pragma once

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/describe_cluster_request.h"
#include "mala/protocol/messages/describe_cluster_response.h"

namespace mala::broker::handlers {

struct describe_cluster_handler {
  using request = protocol::describe_cluster_request;
  using response = protocol::describe_cluster_response;
  static constexpr int16_t api_key = 60;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 1;

  static response handle(request_context& ctx, const request& req, int16_t version);
};

}  // namespace mala::broker::handlers
