// AddOffsetsToTxn (key 25): the __consumer_offsets partition of the group joins the transaction (its
// TxnOffsetCommit follows to the group coordinator). Errors as AddPartitionsToTxn's, in ErrorCode;
// INVALID_PRODUCER_EPOCH before v2 where Kafka answers PRODUCER_FENCED.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/add_offsets_to_txn_request.h"
#include "mala/protocol/messages/add_offsets_to_txn_response.h"

namespace mala::broker::handlers {

struct add_offsets_to_txn_handler {
  using request = protocol::add_offsets_to_txn_request;
  using response = protocol::add_offsets_to_txn_response;
  static constexpr int16_t api_key = 25;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 4;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
