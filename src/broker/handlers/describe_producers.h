// DescribeProducers (key 61), v0 (KIP-664), as Apache Kafka 4.x's KafkaApis.handleDescribeProducersRequest
// and Partition.activeProducerState answer it: for each partition this node leads, the producers with state
// there (id, epoch, last sequence, last timestamp, coordinator epoch of the last marker, first offset of the
// open transaction or -1), from replication::partition::describe_producers. Errors per partition:
// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR. kafka-transactions.sh
// describe-producers and find-hanging read it.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/describe_producers_request.h"
#include "mala/protocol/messages/describe_producers_response.h"

namespace mala::broker::handlers {

struct describe_producers_handler {
  using request = protocol::describe_producers_request;
  using response = protocol::describe_producers_response;
  static constexpr int16_t api_key = 61;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
