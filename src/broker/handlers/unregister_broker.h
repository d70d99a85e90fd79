// UnregisterBroker (key 64, v0): `kafka-cluster.sh unregister --id N` removes a broker's registration (a
// broker taken out of the cluster for good). Run by the active controller (forwarded from any node, as Kafka
// brokers forward it), answered once the records are committed and every live broker has them, so that a
// DescribeCluster that follows no longer lists it. ALTER on the cluster.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/unregister_broker_request.h"
#include "mala/protocol/messages/unregister_broker_response.h"

namespace mala::broker::handlers {

struct unregister_broker_handler {
  using request = protocol::unregister_broker_request;
  using response = protocol::unregister_broker_response;
  static constexpr int16_t api_key = 64;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
