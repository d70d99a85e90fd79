// AddPartitionsToTxn (key 24).
//   v0-v3 (a producer of transactions v1, before its first record to a partition): partitions of unknown
//   topics get UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, nothing added, as Kafka;
//   otherwise the coordinator adds them to the transaction (Ongoing) and its one answer goes to every
//   partition (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED - INVALID_PRODUCER_EPOCH before v2 -,
//   CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, ...).
//   v4+ (a partition leader, KIP-890): several transactions; VerifyOnly asks whether the partitions are in
//   the transaction (NONE, or TRANSACTION_ABORTABLE per partition); without it the partitions are added
//   (transactions v2's implicit add from Produce v12+).
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/add_partitions_to_txn_request.h"
#include "mala/protocol/messages/add_partitions_to_txn_response.h"

namespace mala::broker::handlers {

struct add_partitions_to_txn_handler {
  using request = protocol::add_partitions_to_txn_request;
  using response = protocol::add_partitions_to_txn_response;
  static constexpr int16_t api_key = 24;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 5;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
