// FindCoordinator (key 10, v0-6; batched keys from v4, KIP-699). Group keys: the leader of the group's
// partition of __consumer_offsets (coordinator/group_placement.h), whose listener endpoint the client
// connected through is returned. The first lookup creates __consumer_offsets through the controller (Kafka's
// AutoTopicCreationManager): offsets.topic.num.partitions partitions, offsets.topic.replication.factor capped
// to the live brokers, cleanup.policy=compact, compression.type=producer, segment.bytes =
// offsets.topic.segment.bytes. Kafka answers COORDINATOR_NOT_AVAILABLE while its creation runs; here the
// creation commits before the answer, which names the coordinator at once (its partition may still be
// loading: the group requests then answer COORDINATOR_LOAD_IN_PROGRESS, which clients retry).
//
// Transaction keys are answered COORDINATOR_NOT_AVAILABLE (retriable) until the transaction coordinator
// exists; share keys INVALID_REQUEST (no share coordinator). Serving the API matters beyond groups:
// librdkafka enables LZ4 and other broker features only when ApiVersions lists FindCoordinator.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

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

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
