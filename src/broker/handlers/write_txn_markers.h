// WriteTxnMarkers (key 27), v1, as Apache Kafka 4.x's KafkaApis.handleWriteTxnMarkersRequest answers it: the
// transaction coordinator (or Admin.abortTransaction) asks this node, as the leader of each listed partition,
// to end a producer's transaction with a COMMIT or ABORT marker. Per partition: UNKNOWN_TOPIC_OR_PARTITION
// for one the metadata does not know, markers on __consumer_offsets handed to the group coordinator
// (broker_services::group_txn_marker_writer), the others appended through
// replication::partition::append_txn_marker with acks=all (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
// INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, KAFKA_STORAGE_ERROR; nothing written on an error),
// answered once every append is replicated to the ISR (NOT_ENOUGH_REPLICAS_AFTER_APPEND, or REQUEST_TIMED_OUT
// after request.timeout.ms's default). The answer lists the markers and their topics in request order.
//
// write_txn_markers_locally is the same path for the transaction coordinator's markers to partitions this
// node leads (no request on the wire).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/write_txn_markers_request.h"
#include "mala/protocol/messages/write_txn_markers_response.h"
#include "mala/storage/txn_marker.h"

namespace mala::broker::handlers {

// Kafka appends markers with request.timeout.ms (default 30 s) as the acks=all timeout.
inline constexpr std::chrono::milliseconds txn_marker_append_timeout{30'000};

// One marker for one partition.
struct txn_marker_write {
  std::string topic;
  int32_t partition = 0;
  storage::txn_marker_request marker;
};

// Writes every marker on this node as WriteTxnMarkers does and answers one error per write, in order, once
// all are replicated or `deadline` passed. Runs from any shard (it hops to the partitions' shards and, for
// __consumer_offsets, the home shard) and resumes on the caller's.
asio::awaitable<std::vector<error_code>> write_txn_markers_locally(
    const broker_services& services, std::vector<txn_marker_write> writes,
    std::chrono::steady_clock::time_point deadline);

struct write_txn_markers_handler {
  using request = protocol::write_txn_markers_request;
  using response = protocol::write_txn_markers_response;
  static constexpr int16_t api_key = 27;
  static constexpr int16_t min_version = 1;
  // v2 (KIP-890) adds TransactionVersion to each marker.
  static constexpr int16_t max_version = 2;
  // A cluster action (Kafka's ApiKeys.clusterAction): exempt from request quotas.
  static bool exempt_from_request_quota(const request&, int16_t) { return true; }

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
