// EndTxn (key 26): commit or abort the transaction. Answered once PrepareCommit / PrepareAbort is written;
// the markers and CompleteCommit / CompleteAbort follow (transaction_coordinator.h). v5+ (transactions v2)
// bumps the producer epoch and answers the producer id and epoch to use next; v0-v4 are transactions v1.
// INVALID_PRODUCER_EPOCH before v2 where Kafka answers PRODUCER_FENCED.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/end_txn_request.h"
#include "mala/protocol/messages/end_txn_response.h"

namespace mala::broker::handlers {

struct end_txn_handler {
  using request = protocol::end_txn_request;
  using response = protocol::end_txn_response;
  static constexpr int16_t api_key = 26;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 5;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
