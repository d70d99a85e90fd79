// The records of __transaction_state, byte for byte as Apache Kafka 4.x writes them (kafka-dump-log
// --transaction-log-decoder reads Mala's, and Mala loads Kafka's): the key is the int16 record type 0 and a
// TransactionLogKey (the transactional id); the value an int16 version and a TransactionLogValue
// (proto/TransactionLog*.msg). Kafka writes value version 1 (flexible, with the previous / next producer ids
// and the client's transaction version as tagged fields) when transaction.version >= 1, else 0. The
// partitions are null in Empty and grouped by topic otherwise. A null value is a tombstone: the id expired.
//
// Also where a transactional id lives: partition = Utils.abs(id.hashCode()) % partitions, as Kafka computes
// it (TransactionStateManager.partitionFor).
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "mala/common/java_hash.h"
#include "mala/common/result.h"
#include "mala/coordinator/group_records.h"
#include "mala/coordinator/transaction_metadata.h"

namespace mala::coordinator {

// Kafka's Topic.TRANSACTION_STATE_TOPIC_NAME.
inline constexpr std::string_view transaction_state_topic_name = "__transaction_state";

inline int32_t transaction_partition(std::string_view transactional_id, int32_t num_partitions) {
  return kafka_abs(java_string_hash(transactional_id)) % num_partitions;
}

// The value version Kafka writes for a finalized transaction.version.
inline int16_t transaction_log_value_version(int16_t transaction_version) {
  return transaction_version >= 1 ? 1 : 0;
}

coordinator_record transaction_log_record(const std::string& transactional_id,
                                          const transaction_transition& t, int16_t value_version);
coordinator_record transaction_log_tombstone(const std::string& transactional_id);

// A record read back; `value` is nullopt for a tombstone.
struct transaction_log_entry {
  std::string transactional_id;
  std::optional<transaction_transition> value;
};

// CORRUPT_MESSAGE for a key or value that does not parse; UNSUPPORTED_VERSION for a key or value version this
// schema does not know (skipped on load, as Kafka does).
result<transaction_log_entry> decode_transaction_log_record(std::span<const uint8_t> key,
                                                            std::optional<std::span<const uint8_t>> value);

}  // namespace mala::coordinator
