// DeleteRecords (key 21), v0-2, as Apache Kafka 4.x's KafkaApis.handleDeleteRecordsRequest and
// ReplicaManager.deleteRecords answer it: each partition's leader raises its log start offset to the
// requested offset (-1: the high watermark) through replication::partition::delete_records, then the answer
// waits (up to timeout_ms, else REQUEST_TIMED_OUT) until the low watermark - the smallest log start offset
// over the leader and the followers on live brokers, which take the leader's log start from their fetch
// answers - reaches it, and carries that low watermark. Errors
// per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE (negative, or beyond
// the high watermark), POLICY_VIOLATION (cleanup.policy=compact), INVALID_TOPIC_EXCEPTION for an internal
// topic, KAFKA_STORAGE_ERROR; the low watermark is -1 in error answers.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/delete_records_request.h"
#include "mala/protocol/messages/delete_records_response.h"

namespace mala::broker::handlers {

struct delete_records_handler {
  using request = protocol::delete_records_request;
  using response = protocol::delete_records_response;
  static constexpr int16_t api_key = 21;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 2;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
