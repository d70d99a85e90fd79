// Fetch (key 1), v4-17, as Apache Kafka 4.x's KafkaApis.handleFetchRequest and ReplicaManager.fetchMessages
// answer it:
// - fetch sessions (KIP-227) through broker::fetch_session_cache: full and incremental fetches, session
// errors
//   at the top level, incremental responses carrying only partitions with something new;
// - topics by id from v13 (UNKNOWN_TOPIC_ID for an id the metadata does not know), by name before
//   (UNKNOWN_TOPIC_OR_PARTITION);
// - each partition is read on its leader replica (replication::partition::read): FENCED_LEADER_EPOCH /
//   UNKNOWN_LEADER_EPOCH (KIP-320), NOT_LEADER_OR_FOLLOWER (with the current leader and its endpoint from
//   v16, KIP-951), OFFSET_OUT_OF_RANGE outside [log start, log end], KAFKA_STORAGE_ERROR for an offline log
//   dir;
// - consumers read up to the high watermark (read_uncommitted) or last stable offset (read_committed),
//   followers (replica id >= 0) up to the log end offset, and a follower's fetch updates what the leader
//   knows of it (and may move the high watermark); a diverging last fetched epoch is answered with
//   DivergingEpoch (KIP-595);
// - max_bytes for the whole response and partition_max_bytes per partition, whole batches only, and at least
//   one batch (the first partition with data may exceed both, KIP-74);
// - the long poll: unless max_wait_ms <= 0, some partition failed or diverged, or min_bytes are already
// there,
//   the request parks on the partitions' data waiters (woken by appends, high watermark and log start
//   changes) until min_bytes are readable or max_wait_ms passed, then reads again;
// - every partition answer carries high_watermark, last_stable_offset and log_start_offset (-1 in error
//   answers, as Kafka's), aborted_transactions an empty list for read_committed and null otherwise (no
//   transactions yet).
// The records are copied out of the segment files into the response; sending them with sendfile(2) straight
// from the segment (zero copy) is a later step.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/fetch_request.h"
#include "mala/protocol/messages/fetch_response.h"
#include "mala/protocol/wire.h"

namespace mala::broker::handlers {

// A Fetch response with the record bytes its partitions' records views point into (the generated message only
// views them). Encoded like the message itself.
struct fetch_reply {
  protocol::fetch_response body;
  std::vector<std::vector<uint8_t>> record_buffers;

  size_t encoded_size(int16_t version) const { return body.encoded_size(version); }
  void encode(protocol::wire_writer& w, int16_t version) const { body.encode(w, version); }
};

struct fetch_handler {
  using request = protocol::fetch_request;
  using response = fetch_reply;
  static constexpr int16_t api_key = 1;
  static constexpr int16_t min_version = 4;
  static constexpr int16_t max_version = 17;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
