// Fetch (key 1), v4-18, as Apache Kafka 4.x's KafkaApis.handleFetchRequest and ReplicaManager.fetchMessages
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
//   transactions yet);
// - a follower's v18 HighWatermark (KIP-1166) is read and not used: Kafka 4.4 uses it only on the Raft quorum
//   (its ReplicaManager ignores it), and Kafka's followers send v18 from metadata.version 4.1-IV1 on.
// The records are not copied: each partition's records field is a range of its segment file
// (records_view::external), which the server sends with sendfile(2) on plaintext connections, as Kafka sends
// FileRecords with FileChannel.transferTo; the dispatcher reads them into memory for connections that cannot
// (unit tests). The response holds the segment files open until it is sent.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/net/request_dispatcher.h"
#include "mala/protocol/messages/fetch_request.h"
#include "mala/protocol/messages/fetch_response.h"
#include "mala/protocol/wire.h"

namespace mala::broker::handlers {

// A Fetch response whose partitions' records are segment file ranges: records_view::external(i, size) for
// files[i]. Encoding writes the message with a gap for each of them (see handler_table.h).
struct fetch_reply {
  protocol::fetch_response body;
  std::vector<net::file_range> files;
  // Record bytes the body's records views point into, when they are not files (the KRaft Fetch).
  std::shared_ptr<const std::vector<uint8_t>> owned_records;

  // Bytes encoded in memory: the message without its external records.
  size_t encoded_size(int16_t version) const;
  void encode(protocol::wire_writer& w, int16_t version) const { body.encode(w, version); }
  std::span<const net::file_range> external_records() const { return files; }
};

struct fetch_handler {
  using request = protocol::fetch_request;
  using response = fetch_reply;
  static constexpr int16_t api_key = 1;
  static constexpr int16_t min_version = 4;
  static constexpr int16_t max_version = 18;

  // A follower's fetch is exempt from request quotas, as Kafka's (replication is not throttled by them).
  static bool exempt_from_request_quota(const request& req, int16_t version) {
    return (version >= 15 ? req.replica_state.replica_id : req.replica_id) >= 0;
  }
  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
