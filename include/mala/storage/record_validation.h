// The checks Kafka's LogValidator makes inside a produced batch beyond its framing and CRC (which
// partition_log checks itself): the rules for batches that come from clients (not from replicas or
// coordinators), and the per-record key and timestamp rules whose failures Produce answers with RecordErrors
// (KIP-467). partition_log::append_as_leader runs validate_record_contents on every batch and fails the
// append with its code; the Produce handler runs validate_client_batch before appending and, when an append
// fails with INVALID_TIMESTAMP or INVALID_RECORD, validate_record_contents again to list the records at
// fault.
//
// Compressed batches: their records are decompressed only for a compacted topic (every record needs a key);
// otherwise the timestamp bounds are checked on the batch header's base and max timestamps, since the
// records are stored as sent (Kafka decompresses every compressed batch here).
//
// Threads: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mala/common/result.h"
#include "mala/protocol/record_batch.h"
#include "mala/storage/log_config.h"

namespace mala::storage {

// Kafka's RecordError: a record the leader refused, by its index in its batch.
struct record_error {
  int32_t batch_index = 0;
  std::string message;
  friend bool operator==(const record_error&, const record_error&) = default;
};

// Why a batch was refused: INVALID_TIMESTAMP when any record's timestamp is at fault, else INVALID_RECORD
// (Kafka's LogValidator.processRecordErrors); CORRUPT_MESSAGE when a compressed batch cannot be read.
struct record_validation_failure {
  error_code code = error_code::invalid_record;
  std::string message;  // Kafka's exception message; Produce sends it as the partition's ErrorMessage
  std::vector<record_error> record_errors;
};

// Per-record rules of LogValidator.validateRecord for one batch appended as leader: on a compacted topic
// every record needs a key; with message.timestamp.type=CreateTime every record timestamp (other than -1)
// must lie within [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]; and a
// producer may never set the LogAppendTime attribute. nullopt when the batch passes.
// Whether validate_record_contents could find anything in an uncompressed batch whose records scanned as
// `scan`: a null key on a compacted topic, a LogAppendTime batch from a producer, or a smallest or largest
// timestamp outside message.timestamp.before/after.max.ms (bounds are monotonic, so every timestamp between
// them is inside). False lets a leader skip the second pass over the records.
bool record_contents_need_check(const protocol::record_batch_header& header,
                                const protocol::record_scan& scan, const log_config& config, int64_t now_ms);

std::optional<record_validation_failure> validate_record_contents(std::span<const uint8_t> batch,
                                                                  const log_config& config, int64_t now_ms);

// One batch of a Produce request (v3+: exactly one v2 batch per partition) whose framing was checked and
// header parsed once, carried down to the log: its bytes (the request's own: the leader stamps its offsets in
// place) and its header, which the leader's stamping keeps in step with the bytes.
struct produced_batch {
  std::span<uint8_t> bytes;
  protocol::record_batch_header header;
  // KIP-890 part 1: set by a Produce with transaction.partition.verification.enable, with the guard its
  // verification got (producer_state.h); unset, a transactional batch may open a transaction unverified.
  std::optional<uint64_t> verification_guard;
};

// ProduceRequest.validateRecords for v3+ then validate_client_batch: a first batch whose size field is
// impossible is CORRUPT_MESSAGE (Kafka's CorruptRecordException from the batch iterator); no whole batch, a
// second one or another magic is INVALID_RECORD; then the batch rules for clients.
result<produced_batch> validate_produced_records(std::span<uint8_t> records);

// LogValidator.validateBatch for AppendOrigin.CLIENT: no control batches (only coordinators write transaction
// markers), a record count that is positive and agrees with lastOffsetDelta, and a sequence number on every
// batch that carries a producer id. INVALID_RECORD otherwise.
status validate_client_batch(const protocol::record_batch_header& batch);

}  // namespace mala::storage
