// ListOffsets (key 2), v1-11, as Apache Kafka 4.x's KafkaApis.handleListOffsetRequest and
// Partition.fetchOffsetForTimestamp answer it: for each partition, on its leader,
// - earliest (-2) and earliest local (-4; the same without tiered storage): the log start offset;
// - latest (-1): the high watermark for read_uncommitted consumers, the last stable offset for read_committed
//   ones, the log end offset for a replica (replica id >= 0 or -2);
// - max timestamp (-3, KIP-734): the offset and timestamp of the record with the largest timestamp;
// - latest tiered (-5, KIP-1005) and earliest pending upload (-6, KIP-1023): offset -1, timestamp -1, leader
//   epoch -1, as Kafka answers without tiered storage;
// - a timestamp: the first offset whose record timestamp is >= it, below the offset bound above; none (offset
//   -1, timestamp -1) when no record qualifies;
// with the leader epoch of the found offset (v4+). Errors per partition: UNKNOWN_TOPIC_OR_PARTITION,
// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a current_leader_epoch that is not
// ours (KIP-320), OFFSET_NOT_AVAILABLE while a new leader's high watermark has not reached the start of its
// epoch (LEADER_NOT_AVAILABLE before v5), KAFKA_STORAGE_ERROR, INVALID_REQUEST for a partition named twice,
// UNSUPPORTED_VERSION for a special timestamp newer than the request version (-3 needs v7, -4 v8, -5 v9, -6
// v11) or an unknown negative one.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/list_offsets_request.h"
#include "mala/protocol/messages/list_offsets_response.h"

namespace mala::broker::handlers {

struct list_offsets_handler {
  using request = protocol::list_offsets_request;
  using response = protocol::list_offsets_response;
  static constexpr int16_t api_key = 2;
  static constexpr int16_t min_version = 1;
  static constexpr int16_t max_version = 11;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
