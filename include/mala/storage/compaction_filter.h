// What log compaction keeps of one record batch (Kafka's Cleaner.checkBatchRetention / shouldRetainRecord and
// MemoryRecords.filterTo). A pure function: the cleaner hands it each batch of the segments it rewrites, with
// the round's key map (the latest offset of every key in the dirty part of the log) and what it knows about
// the batch's producer, and appends the surviving bytes to the new segment's buffer.
//
// A record stays when it is beyond the map (not yet deduplicated), or it is the latest record of its key and
// either has a value or is a tombstone still within its delete horizon. Records without a key go. Control
// records stay unless the batch is discardable and past its horizon (transactions).
// What happens to the batch:
// - every record stays and no delete horizon is to be set: the batch is copied byte for byte;
// - some records stay: one batch is rebuilt with the same base offset, last offset delta, producer id, epoch,
//   base sequence, partition leader epoch, attributes and codec (offsets keep their gaps, and a producer's
//   sequence numbers stay consistent); its records are the kept ones, copied as they were, or re-encoded when
//   the batch gets a delete horizon (KIP-534: attribute bit 0x40, the horizon in baseTimestamp, the records'
//   timestamp deltas taken relative to it, so every record keeps its timestamp). The first round that keeps
//   a tombstone (or a marker of a transaction with no data left) sets the horizon to the round's start plus
//   delete.retention.ms; a later round after the horizon removes it;
// - no record stays: the batch goes, unless it is the last batch of its producer (an idempotent producer's
//   sequence and epoch live on in it) or it ends right below the round's upper bound (the log's last cleaned
//   offset stays visible): then a header-only batch (61 bytes, no records, uncompressed) keeps its offsets
//   and producer fields, Kafka's RETAIN_EMPTY.
//
// Transactions: the cleaner sets batch_facts::discardable from the aborted transaction index
// (cleaned_transactions.h) for aborted data and for markers whose transaction has no data left.
//
// Thread-safe: pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/storage/key_offset_map.h"

namespace mala::storage {

// One cleaning round of a log.
struct compaction_round {
  const key_offset_map* latest = nullptr;  // the latest offset of every key of the dirty part
  int64_t now_ms = 0;                      // when the round started (delete horizons)
  int64_t delete_retention_ms = 86'400'000;
  int64_t upper_bound =
      0;  // the round's end: a batch whose next offset is this one stays, emptied if need be
};

// What the cleaner knows about a batch beyond its bytes.
struct batch_facts {
  // The producer's last batch in the log (from the producer state): kept, emptied if need be.
  bool producers_last_batch = false;
  // Its records may go whatever their keys: an aborted transaction's data, or a marker of a transaction that
  // has no data left in the log. Transactions only.
  bool discardable = false;
};

enum class batch_outcome : uint8_t {
  kept_whole,  // copied unchanged
  rebuilt,     // some records kept, or a delete horizon set
  emptied,     // a header without records kept
  removed,     // nothing written
  corrupt,     // not a valid batch (bad framing, CRC or records): nothing written, the caller stops
};

struct filtered_batch {
  batch_outcome outcome = batch_outcome::removed;
  int32_t records_kept = 0;
  int32_t records_removed = 0;
};

// Working memory of filter_batch, reused from batch to batch by one cleaner thread.
struct filter_buffers {
  std::vector<uint8_t> decompressed;  // the records of a compressed batch
  std::vector<uint8_t> records;       // the kept records of a rebuilt compressed batch, before compression
  std::vector<uint8_t> record_head;   // a re-encoded record's fields before its key
  std::vector<protocol::record_view> kept;  // the surviving records of the batch being filtered
};

// Appends what of `batch` (one whole v2 batch) survives `round` to `out`.
filtered_batch filter_batch(std::span<const uint8_t> batch, const compaction_round& round,
                            const batch_facts& facts, std::vector<uint8_t>& out, filter_buffers& buffers);

}  // namespace mala::storage
