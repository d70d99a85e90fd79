// InitProducerId (key 22). Without a transactional id (an idempotent producer; librdkafka and the Java client
// with enable.idempotence, the default): a new producer id from this broker's block (producer_id_allocator.h,
// blocks from the controller's AllocateProducerIds) and epoch 0, as Kafka's TransactionCoordinator does
// whatever producer id and epoch the request carries (a KIP-360 epoch bump of an idempotent producer gets a
// fresh id). A request with exactly one of producer id / epoch set is INVALID_REQUEST. When no block can be
// had the answer is COORDINATOR_LOAD_IN_PROGRESS, Kafka's retriable "waiting for the next block".
//
// With a transactional id: an empty one is INVALID_REQUEST; then the transaction coordinator (on the home
// shard) answers: a timeout outside (0, transaction.max.timeout.ms] is INVALID_TRANSACTION_TIMEOUT, the next
// epoch of the id (a new producer id once exhausted), CONCURRENT_TRANSACTIONS while an open transaction is
// aborted first (fencing its producer), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as Kafka. v0-v3 get
// INVALID_PRODUCER_EPOCH where v4+ get PRODUCER_FENCED.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/init_producer_id_request.h"
#include "mala/protocol/messages/init_producer_id_response.h"

namespace mala::broker::handlers {

struct init_producer_id_handler {
  using request = protocol::init_producer_id_request;
  using response = protocol::init_producer_id_response;
  static constexpr int16_t api_key = 22;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 5;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
