// One transactional id's state at its transaction coordinator (Kafka's TransactionMetadata and
// TransactionState): the producer id and epoch handed to the producer, the state of its current transaction,
// the partitions in it, its timeout and timestamps.
//
// Transitions are two-phase, as Kafka's: prepare_*() checks that the move is allowed, computes the state
// after it (a transaction_transition) and marks the metadata pending; the caller appends that state to
// __transaction_state and, once the append is committed, complete_transition() adopts it. While a transition
// is pending every other one is refused (the coordinator answers CONCURRENT_TRANSACTIONS); a failed append
// clears it (abandon_transition()).
//
// Epochs: InitProducerId bumps the epoch (a new producer id once it is exhausted); under transactions v2
// (KIP-890 part 2) every EndTxn bumps it too, and an exhausted epoch takes the next producer id at the end of
// the transaction. Fencing (InitProducerId while a transaction is open, or its timeout) aborts the open
// transaction under a higher epoch, so the old producer's writes and markers are refused.
//
// Pure value type; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "mala/common/result.h"

namespace mala::coordinator {

// Kafka's TransactionState: the int8 TransactionStatus in __transaction_state.
enum class transaction_state : int8_t {
  empty = 0,
  ongoing = 1,
  prepare_commit = 2,
  prepare_abort = 3,
  complete_commit = 4,
  complete_abort = 5,
  dead = 6,
  prepare_epoch_fence = 7,  // in memory only: a fence waiting for its abort
};

// The name DescribeTransactions and ListTransactions carry ("Empty", "Ongoing", "PrepareCommit", ...).
std::string_view transaction_state_name(transaction_state state);
std::optional<transaction_state> transaction_state_from_name(std::string_view name);
std::optional<transaction_state> transaction_state_from_status(int8_t status);
// Whether a transactional id in this state may expire (transactional.id.expiration.ms).
bool transaction_state_may_expire(transaction_state state);

// RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH; Short.MAX_VALUE - 1, the last epoch handed out.
inline constexpr int64_t no_producer_id = -1;
inline constexpr int16_t no_producer_epoch = -1;
inline constexpr int16_t exhausted_producer_epoch = 32766;

struct txn_partition {
  std::string topic;
  int32_t partition = 0;
  friend auto operator<=>(const txn_partition&, const txn_partition&) = default;
};

// The state after a transition (Kafka's TxnTransitMetadata).
struct transaction_transition {
  int64_t producer_id = no_producer_id;
  int64_t prev_producer_id = no_producer_id;
  int64_t next_producer_id = no_producer_id;
  int16_t producer_epoch = no_producer_epoch;
  int16_t last_producer_epoch = no_producer_epoch;
  int32_t timeout_ms = 0;
  transaction_state state = transaction_state::empty;
  std::set<txn_partition> partitions;
  int64_t start_timestamp_ms = -1;
  int64_t last_update_timestamp_ms = -1;
  int16_t client_transaction_version = 0;
};

class transaction_metadata {
 public:
  transaction_metadata(std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
                       int32_t timeout_ms, int64_t now_ms);
  // As read back from __transaction_state (the last producer epoch is not stored: -1).
  transaction_metadata(std::string transactional_id, const transaction_transition& stored);

  const std::string& transactional_id() const { return _id; }
  int64_t producer_id() const { return _v.producer_id; }
  int64_t prev_producer_id() const { return _v.prev_producer_id; }
  int64_t next_producer_id() const { return _v.next_producer_id; }
  int16_t producer_epoch() const { return _v.producer_epoch; }
  int16_t last_producer_epoch() const { return _v.last_producer_epoch; }
  int32_t timeout_ms() const { return _v.timeout_ms; }
  transaction_state state() const { return _v.state; }
  const std::set<txn_partition>& partitions() const { return _v.partitions; }
  int64_t start_timestamp_ms() const { return _v.start_timestamp_ms; }
  int64_t last_update_timestamp_ms() const { return _v.last_update_timestamp_ms; }
  int16_t client_transaction_version() const { return _v.client_transaction_version; }
  std::optional<transaction_state> pending_state() const { return _pending; }
  bool has_failed_epoch_fence() const { return _failed_epoch_fence; }
  void set_failed_epoch_fence(bool failed) { _failed_epoch_fence = failed; }
  const transaction_transition& current() const { return _v; }

  bool is_producer_epoch_exhausted() const { return _v.producer_epoch >= exhausted_producer_epoch; }

  // InitProducerId on Empty / CompleteCommit / CompleteAbort: the next epoch (or, when `expected_epoch` is
  // a retry of the last bump, the same one). PRODUCER_FENCED when the expected epoch is neither.
  // `new_producer_id` is used when the epoch is exhausted (Kafka's prepareProducerIdRotation).
  result<transaction_transition> prepare_increment_epoch(int32_t timeout_ms,
                                                         std::optional<int16_t> expected_epoch,
                                                         int64_t new_producer_id, int64_t now_ms);
  // InitProducerId for a producer id that rotated (exhausted epoch): a new id at epoch 0.
  transaction_transition prepare_producer_id_rotation(int64_t new_producer_id, int32_t timeout_ms,
                                                      bool recorded_last_epoch, int64_t now_ms);
  // Fences the producer of an Ongoing transaction: pending PrepareEpochFence, and the epoch the abort that
  // follows is written under: one above the current (unless an earlier fence failed to write, or
  // `bump_epoch` is false: under transactions v2 the abort's own bump fences).
  int16_t prepare_fence_producer_epoch(bool bump_epoch);
  // Transactions v1: the fence's abort takes the fenced epoch now (Kafka sets it before the PrepareAbort
  // record is written, and keeps it if that write fails: has_failed_epoch_fence then stops a second bump).
  void adopt_fenced_epoch(int16_t fenced_epoch);
  // Transactions v2: the fence's pending state gives way to the abort.
  void clear_epoch_fence() { _pending.reset(); }
  // Adds partitions (from Empty / Complete*: a new transaction starts now).
  transaction_transition prepare_add_partitions(const std::set<txn_partition>& added, int64_t now_ms,
                                                int16_t client_transaction_version);
  // PrepareCommit / PrepareAbort. Under transactions v2 the epoch goes up and `next_producer_id` (allocated
  // by the caller when the epoch is exhausted, else -1) is where the producer continues.
  transaction_transition prepare_abort_or_commit(transaction_state target, int16_t client_transaction_version,
                                                 int64_t next_producer_id, int64_t now_ms);
  // CompleteCommit / CompleteAbort after the markers (from PrepareCommit / PrepareAbort).
  transaction_transition prepare_complete(int64_t now_ms);
  // Dead: the id expired (a tombstone is written).
  transaction_transition prepare_dead();

  // The partition's marker is written (the transaction stays in Prepare* until all are).
  void remove_partition(const txn_partition& p) { _v.partitions.erase(p); }

  // The transition's state was written: adopt it. INVALID_TXN_STATE (nothing changed) when it does not fit
  // what is pending (Kafka throws IllegalStateException there).
  status complete_transition(const transaction_transition& t);
  // The append failed: forget the pending transition.
  void abandon_transition() { _pending.reset(); }

 private:
  transaction_transition transit(transaction_state target) const;
  void set_pending(transaction_state target) { _pending = target; }

  std::string _id;
  transaction_transition _v;
  std::optional<transaction_state> _pending;
  bool _failed_epoch_fence = false;
};

}  // namespace mala::coordinator
