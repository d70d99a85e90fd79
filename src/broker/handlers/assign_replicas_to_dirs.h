// AssignReplicasToDirs (key 73, v0, KIP-858): a broker with several log dirs tells the active controller
// which dir holds each of its replicas, and the controller records it in the partitions' Directories. Served
// on the CONTROLLER listener (CLUSTER_ACTION; brokers send it there, through the controller channel); a node
// that is not the active controller answers NOT_CONTROLLER.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/assign_replicas_to_dirs_request.h"
#include "mala/protocol/messages/assign_replicas_to_dirs_response.h"

namespace mala::broker::handlers {

struct assign_replicas_to_dirs_handler {
  using request = protocol::assign_replicas_to_dirs_request;
  using response = protocol::assign_replicas_to_dirs_response;
  static constexpr int16_t api_key = 73;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;
  static constexpr bool controller_only = true;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
