// What the log cleaner knows about transactions while it walks a range of a log in offset order (Kafka's
// CleanedTransactionMetadata): which data batches belong to an aborted transaction, which markers may go, and
// which aborted transactions the cleaned segment's .txnindex must still list.
//
// It starts from the aborted transactions (the .txnindex entries) overlapping the range. Walking batch by
// batch, every aborted transaction whose first offset is at or below the batch's last offset becomes ongoing
// for its producer:
// - a transactional data batch of a producer with an ongoing aborted transaction is aborted (discardable: its
//   records go whatever their keys; the transaction is remembered as seen); any other transactional data
//   batch marks its producer's transaction as ongoing and committed;
// - an ABORT marker ends the producer's aborted transaction: when one of its batches was seen in this walk,
//   the marker stays (readers still need it, the batch may have been kept empty) and its aborted transaction
//   goes to retained_aborts(); otherwise the marker is discardable;
// - a COMMIT marker is discardable unless a batch of its transaction was seen in this walk;
// - a control batch without records (already cleaned) is discardable; one of an unknown type stays.
// A discardable marker still stays until its delete horizon has passed (compaction_filter.h).
//
// Threads: one cleaner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/storage/transaction_index.h"
#include "mala/storage/txn_marker.h"

namespace mala::storage {

class cleaned_transactions {
 public:
  // `aborted`: the aborted transactions overlapping the range walked, in any order.
  explicit cleaned_transactions(std::vector<aborted_txn> aborted);

  // A data batch, in log order: true when it belongs to an aborted transaction.
  bool on_data_batch(const protocol::record_batch_header& batch);
  // A control batch, in log order, with its marker (nullopt: no records, or an unknown control type): true
  // when it may go.
  bool on_control_batch(const protocol::record_batch_header& batch, const std::optional<txn_marker>& marker);

  // The aborted transactions whose ABORT markers stay, in marker order (the cleaned .txnindex).
  const std::vector<aborted_txn>& retained_aborts() const { return _retained; }

 private:
  struct ongoing_abort {
    aborted_txn txn;
    bool batch_seen = false;
  };
  // Makes ongoing the aborted transactions that start at or below `offset`.
  void start_aborts_up_to(int64_t offset);

  std::vector<aborted_txn> _pending;  // ascending first offset
  size_t _next = 0;                   // the first of _pending not yet ongoing
  std::unordered_map<int64_t, ongoing_abort> _aborting;
  std::unordered_set<int64_t> _committing;
  std::vector<aborted_txn> _retained;
};

}  // namespace mala::storage
