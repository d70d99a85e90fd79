// Transaction markers (Kafka's end-transaction control batches, EndTransactionMarker and
// MemoryRecords.withEndTransactionMarker): the batch a partition leader appends when the transaction
// coordinator tells it a producer's transaction committed or aborted (WriteTxnMarkers), and the group
// coordinator writes to __consumer_offsets for transactional offsets.
//
// Layout: a v2 batch with attributes 0x30 (transactional | control), the producer's id and epoch,
// baseSequence -1, offsets assigned on append like any batch, and one record:
//   key   = version int16 (0) | type int16 (0 = ABORT, 1 = COMMIT)          (ControlRecordTypeSchema)
//   value = version int16 (0) | coordinatorEpoch int32                       (EndTxnMarker)
// all big-endian, no headers. Readers accept a higher value version and ignore trailing bytes, as Kafka does.
//
// Pure functions of their arguments; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace mala::storage {

// ControlRecordType ids (the int16 in the marker key).
enum class txn_marker_type : int16_t { abort = 0, commit = 1 };

inline constexpr int16_t txn_marker_key_version = 0;
inline constexpr int16_t txn_marker_value_version = 0;
inline constexpr size_t txn_marker_key_size = 4;    // version + type
inline constexpr size_t txn_marker_value_size = 6;  // version + coordinator epoch

struct txn_marker {
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  txn_marker_type type = txn_marker_type::abort;
  int32_t coordinator_epoch = -1;
  int64_t timestamp = -1;  // of the marker record (the time the leader wrote it)

  bool is_commit() const { return type == txn_marker_type::commit; }
  friend bool operator==(const txn_marker&, const txn_marker&) = default;
};

// One control batch holding `marker`, base offset 0 (the log assigns it), partition leader epoch -1 (the
// leader stamps it), CRC valid.
std::vector<uint8_t> encode_txn_marker_batch(const txn_marker& marker);

// The marker of a control batch (attributes checked: transactional and control), nullopt for anything else:
// a data batch, an empty control batch (everything it ended was cleaned away), an unknown control record type
// (Kafka's ControlRecordType.UNKNOWN, skipped by readers), or unreadable bytes. The CRC is not checked (the
// log checked it on the way in).
std::optional<txn_marker> decode_txn_marker_batch(std::span<const uint8_t> batch);

}  // namespace mala::storage
