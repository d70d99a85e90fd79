// TxnOffsetCommit (key 28, v0-5): a transactional producer commits a group's offsets inside its transaction
// (sendOffsetsToTransaction). Topics or partitions the metadata does not know are answered
// UNKNOWN_TOPIC_OR_PARTITION without the coordinator (KafkaApis.handleTxnOffsetCommitRequest); the group
// coordinator checks the group (member and generation from v3), the metadata size, and appends the offsets
// as the producer's transactional batch to the group's __consumer_offsets partition (acks=-1). They stay
// pending, invisible to OffsetFetch, until the transaction's COMMIT marker reaches that partition.
// KIP-890: the group's __consumer_offsets partition must be in the transaction: v0-v4 ask the transaction
// coordinator (VerifyOnly; with transaction.partition.verification.enable: TRANSACTION_ABORTABLE at v4,
// INVALID_TXN_STATE before, when the producer sent no AddOffsetsToTxn), v5 (transactions v2) adds it; the
// coordinator's other verdicts as for Produce, an unfinished verification COORDINATOR_NOT_AVAILABLE. Unlike
// Produce, no verification guard is carried to the append (the group coordinator's write path has none).
// Before v2 COORDINATOR_LOAD_IN_PROGRESS is answered COORDINATOR_NOT_AVAILABLE (older clients, KAFKA-7296).
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/txn_offset_commit_request.h"
#include "mala/protocol/messages/txn_offset_commit_response.h"

namespace mala::broker::handlers {

struct txn_offset_commit_handler {
  using request = protocol::txn_offset_commit_request;
  using response = protocol::txn_offset_commit_response;
  static constexpr int16_t api_key = 28;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 5;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
