// ListTransactions (key 66; kafka-transactions.sh list / find-hanging): the transactions this node
// coordinates, filtered by state names (unknown names are echoed in UnknownStateFilters), producer ids and
// (v1+) how long they have been open and (v2+) a regular expression the whole id must match.
// COORDINATOR_LOAD_IN_PROGRESS while a partition loads.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/list_transactions_request.h"
#include "mala/protocol/messages/list_transactions_response.h"

namespace mala::broker::handlers {

struct list_transactions_handler {
  using request = protocol::list_transactions_request;
  using response = protocol::list_transactions_response;
  static constexpr int16_t api_key = 66;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 2;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
