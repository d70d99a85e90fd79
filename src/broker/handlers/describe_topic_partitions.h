// DescribeTopicPartitions (key 75, KIP-966; AdminClient.describeTopics, kafka-topics --describe): the topics
// asked for (every topic when none are named), deduplicated and sorted by name, with their partitions
// (leader, epoch, replicas, ISR, eligible leader replicas, last known ELR, offline replicas) from the current
// image, paged: at most response_partition_limit partitions (capped by max.request.partition.size.limit,
// 2000) per answer, resuming at the request's cursor, with next_cursor naming the first partition left out.
// Named topics that do not exist are UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for illegal names);
// a cursor outside the named topics or with a negative partition fails the request with INVALID_REQUEST.
// Mirrors Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache.
#pragma once

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/describe_topic_partitions_request.h"
#include "mala/protocol/messages/describe_topic_partitions_response.h"

namespace mala::broker::handlers {

struct describe_topic_partitions_handler {
  using request = protocol::describe_topic_partitions_request;
  using response = protocol::describe_topic_partitions_response;
  static constexpr int16_t api_key = 75;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;

  static response handle(request_context& ctx, const request& req, int16_t version);
};

}  // namespace mala::broker::handlers
