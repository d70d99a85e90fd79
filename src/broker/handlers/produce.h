// Produce (key 0): appends each partition's record batch on the leader replica (replication::partition), as
// Apache Kafka 4.x's KafkaApis.handleProduceRequest and ReplicaManager.appendRecords answer it:
// - transactional batches without a transactional id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the request;
// - acks must be -1, 0 or 1 (INVALID_REQUIRED_ACKS for every known partition with valid records otherwise);
// - a partition unknown to the metadata is UNKNOWN_TOPIC_OR_PARTITION, one this node does not lead
//   NOT_LEADER_OR_FOLLOWER (with the current leader and its endpoint from v10, KIP-951), an internal topic
//   INVALID_TOPIC_EXCEPTION unless the client id is "__admin_client";
// - v3+ records must be exactly one magic-2 batch (INVALID_RECORD), and a client may not write control
//   batches or leave out the sequence of an idempotent batch (replication::validate_produced_records, which
//   parses the batch header once; partition::append takes the parsed batch down to the log);
// - idempotent producers: INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, and a retried batch answered
//   with its original base offset without being written again;
// - storage errors (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_RECORD,
//   INVALID_TIMESTAMP with RecordErrors and ErrorMessage, KAFKA_STORAGE_ERROR), NOT_ENOUGH_REPLICAS;
// - acks=-1 waits up to timeout_ms for the high watermark to pass each partition's last offset
//   (REQUEST_TIMED_OUT, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min.insync.replicas);
// - acks=0 gets no response at all.
// Answers carry base_offset, log_append_time_ms (-1 unless the topic uses LogAppendTime) and
// log_start_offset; errors carry -1 in all three, as Kafka's PartitionResponse(error) does.
//
// - v13+ names topics by id: an id the metadata does not know is UNKNOWN_TOPIC_ID, and the answer names
//   topics by id;
// - KIP-890: transactional batches of a producer with no open transaction on their partition are verified
// with
//   the transaction coordinator before the append (transaction.partition.verification.enable):
//   PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH, a partition not in the transaction INVALID_TXN_STATE
//   ("Partition was not added to the transaction"; TRANSACTION_ABORTABLE from v11), a verification that could
//   not finish NOT_ENOUGH_REPLICAS, batches of several producers INVALID_PRODUCER_ID_MAPPING; an unverified
//   batch, or one whose producer got a marker between the verification and the append, INVALID_TXN_STATE;
// - v12 is v11 on the wire: a client that sends it with transactional batches uses transactions v2, and the
//   verification adds the partition to the transaction (implicit add, client transaction version 2).
//
// Served v3-13; ApiVersions advertises v0 (KAFKA-18659: librdkafka checks the advertised minimum before
// sending compressed batches), and v0-v2 requests are refused as Kafka 4 refuses them.
//
// Not yet: Kafka closes the connection of an acks=0 producer whose request failed (so that it refreshes
// its metadata), which needs a "close" handler outcome that the handler table does not have yet.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/produce_request.h"
#include "mala/protocol/messages/produce_response.h"

namespace mala::broker::handlers {

// The first Produce version that names topics by id instead of by name (KIP-516).
inline constexpr int16_t produce_topic_ids_min_version = 13;

struct produce_handler {
  using request = protocol::produce_request;
  using response = protocol::produce_response;
  static constexpr int16_t api_key = 0;
  static constexpr int16_t min_version = 3;
  static constexpr int16_t max_version = 13;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
