// DescribeTransactions (key 65; kafka-transactions.sh describe): per transactional id its state, timeout,
// start time, producer id and epoch, and the partitions still in the transaction (while Prepare*: those
// still waiting for their marker). TRANSACTIONAL_ID_NOT_FOUND for an unknown id, NOT_COORDINATOR for an id
// another node coordinates, COORDINATOR_LOAD_IN_PROGRESS while loading.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/describe_transactions_request.h"
#include "mala/protocol/messages/describe_transactions_response.h"

namespace mala::broker::handlers {

struct describe_transactions_handler {
  using request = protocol::describe_transactions_request;
  using response = protocol::describe_transactions_response;
  static constexpr int16_t api_key = 65;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
