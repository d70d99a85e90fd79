// DescribeAcls (key 29), CreateAcls (key 30), DeleteAcls (key 31): kafka-acls and AdminClient's ACL calls
// (Kafka's AclApis).
//
// Without `authorizer.class.name` they answer as Apache Kafka does: SECURITY_DISABLED with "No Authorizer is
// configured." for the request (DescribeAcls) or for every creation and filter (CreateAcls, DeleteAcls).
// With the authorizer: DescribeAcls needs DESCRIBE on the cluster and answers from this node's metadata
// image (filter semantics of metadata/acl.h, grouped by resource pattern); CreateAcls and DeleteAcls need
// ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every item otherwise), refuse a CLUSTER resource not
// named kafka-cluster and an empty name (INVALID_REQUEST, as AclApis), and are forwarded to the active
// controller (acl_control.h), answered once the records are committed.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/create_acls_request.h"
#include "mala/protocol/messages/create_acls_response.h"
#include "mala/protocol/messages/delete_acls_request.h"
#include "mala/protocol/messages/delete_acls_response.h"
#include "mala/protocol/messages/describe_acls_request.h"
#include "mala/protocol/messages/describe_acls_response.h"

namespace mala::broker::handlers {

struct describe_acls_handler {
  using request = protocol::describe_acls_request;
  using response = protocol::describe_acls_response;
  static constexpr int16_t api_key = 29;
  static constexpr int16_t min_version = 1;
  static constexpr int16_t max_version = 3;

  static response handle(request_context& ctx, const request& req, int16_t version);
};

struct create_acls_handler {
  using request = protocol::create_acls_request;
  using response = protocol::create_acls_response;
  static constexpr int16_t api_key = 30;
  static constexpr int16_t min_version = 1;
  static constexpr int16_t max_version = 3;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

struct delete_acls_handler {
  using request = protocol::delete_acls_request;
  using response = protocol::delete_acls_response;
  static constexpr int16_t api_key = 31;
  static constexpr int16_t min_version = 1;
  static constexpr int16_t max_version = 3;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
