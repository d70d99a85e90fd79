// FindCoordinator (key 10, v0-6; batched keys from v4, KIP-699). PARTIAL: Mala has no group or transaction
// coordinator yet (issue 5 and the transactions work), so every key is answered COORDINATOR_NOT_AVAILABLE
// with node -1, which is what Apache Kafka answers while a coordinator's partition has no live leader: clients
// treat it as retriable and ask again. Serving the API matters beyond groups: librdkafka enables LZ4 and other
// broker features only when ApiVersions lists FindCoordinator.
#pragma once

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/find_coordinator_request.h"
#include "mala/protocol/messages/find_coordinator_response.h"

namespace mala::broker::handlers {

struct find_coordinator_handler {
  using request = protocol::find_coordinator_request;
  using response = protocol::find_coordinator_response;
  static constexpr int16_t api_key = 10;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 6;

  static response handle(request_context& ctx, const request& req, int16_t version);
};

}  // namespace mala::broker::handlers
