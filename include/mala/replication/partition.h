// One replica of one partition on this node (Kafka's kafka.cluster.Partition): its role (leader or follower),
// the leader and partition epochs, the replica set and ISR from the metadata log, the high watermark and last
// stable offset, what the leader knows of each follower, and the waiters of delayed produce and fetch
// requests. It sits between the broker's handlers and the partition's storage::partition_log: Produce appends
// through it, Fetch and ListOffsets read through it (bounded by the high watermark for consumers), and
// follower fetches move the high watermark. The rules themselves are pure functions in replica_rules.h; this
// class applies them to a log.
//
// Followers: make_follower records the new leader and state; the follower fetcher (follower_fetcher.h) finds
// the divergence point and feeds truncate_to / append_as_follower / update_high_watermark_from_leader /
// update_log_start_offset_from_leader. ISR changes: the leader proposes them (propose_isr_change), the
// alter_partition_manager sends them to the controller with AlterPartition and hands the answer back
// (isr_change_answered).
//
// Idempotent producers (storage::producer_state_manager): the state is loaded when the partition is created
// (latest <offset>.snapshot in the partition directory, then a replay of the log after it). A leader append
// checks every batch against it first: an older producer epoch is INVALID_PRODUCER_EPOCH, a sequence gap
// OUT_OF_ORDER_SEQUENCE_NUMBER, and a retry of one of a producer's last 5 batches is answered with the
// original offsets without writing anything. Leader and follower appends update it; a snapshot is written
// when the log rolls a segment (at the new segment's base offset, as Kafka does) and when the replica is
// closed cleanly (replica_manager::remove_partition without deleting the log, which the node does at
// shutdown). Truncation reloads it. Idle producers expire after producer.id.expiration.ms, checked on leader
// appends every producer.id.expiration.check.interval.ms.
//
// Transactions: the producer state tracks open transactions and the ones whose marker is not yet below the
// high watermark; the last stable offset is the first offset of the earliest of them, else the high watermark
// (read_committed reads and ListOffsets stop there). The transaction coordinator writes markers through
// append_txn_marker (leader only, acks=all). Every append and replay that completes an aborted transaction
// adds its entry to the .txnindex of the segment holding the marker; read_committed reads return the aborted
// transactions overlapping what they read.
//
// Threads: touched only on the partition's owning shard (no locks). The storage::partition_log it wraps is
// owned by the storage::log_manager and outlives it (replica_manager removes the partition before the log).
// Waiter callbacks run synchronously on that shard from inside the call that satisfied them (append,
// update_follower_fetch_state, propose_isr_change, make_leader, make_follower, delete_records, stop), after
// the partition's state is updated.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "mala/common/result.h"
#include "mala/common/uuid.h"
#include "mala/replication/replica_rules.h"
#include "mala/replication/waiter_list.h"
#include "mala/storage/log_segment.h"
#include "mala/storage/partition_log.h"
#include "mala/storage/producer_state.h"
#include "mala/storage/txn_marker.h"

namespace mala::replication {

// The storage types and constants this interface speaks in, named here so that its users (the broker) reach
// storage only through replication.
using storage::append_origin;
using storage::cleanup_policy;
using storage::decode_txn_marker_batch;
using storage::earliest_local_timestamp;
using storage::earliest_timestamp;
using storage::encode_txn_marker_batch;
using storage::file_slice;
using storage::latest_timestamp;
using storage::log_config;
using storage::max_timestamp_query;
using storage::produced_batch;
using storage::record_validation_failure;
using storage::topic_partition;
using storage::txn_marker;
using storage::txn_marker_type;
using storage::validate_produced_records;

// The partition's replication state as the metadata log (PartitionRecord / PartitionChangeRecord) describes
// it.
struct partition_state {
  int32_t leader = -1;
  int32_t leader_epoch = 0;
  int32_t partition_epoch = 0;
  std::vector<int32_t> replicas;
  std::vector<int32_t> isr;
  int32_t min_insync_replicas = 1;   // min.insync.replicas of the topic
  int8_t leader_recovery_state = 0;  // 1: RECOVERING after an unclean election (KIP-704)
  // Replication throttles (replication_quota.h): the topic's leader.replication.throttled.replicas /
  // follower.replication.throttled.replicas name this node's replica (or are "*").
  bool leader_throttled = false;
  bool follower_throttled = false;
};

// An ISR change the leader asks the controller for (one partition of an AlterPartition request).
struct isr_change_proposal {
  int32_t leader_epoch = 0;
  int32_t partition_epoch = 0;
  std::vector<int32_t> new_isr;
  int8_t leader_recovery_state = 0;  // always RECOVERED: the leader's log is its own, it recovered at load
};

// The controller's answer for one partition: none with the state it wrote, or the error.
struct isr_change_answer {
  error_code error = error_code::none;
  int32_t leader_epoch = 0;
  int32_t partition_epoch = 0;
  std::vector<int32_t> isr;
  int8_t leader_recovery_state = 0;
};

struct partition_options {
  int32_t local_replica_id = 0;              // node.id
  int64_t replica_lag_time_max_ms = 30'000;  // replica.lag.time.max.ms
  std::function<int64_t()> clock_ms;         // wall clock (tests inject one); steady enough for lag checks
  // The high watermark found in replication-offset-checkpoint at start-up (clamped into the log's range); the
  // log start offset when absent.
  std::optional<int64_t> initial_high_watermark;
  storage::producer_state_config producer_state;  // producer.id.expiration.ms
  int64_t producer_id_expiration_check_interval_ms =
      storage::default_producer_id_expiration_check_interval_ms;  // producer.id.expiration.check.interval.ms
};

// Whether make_leader / make_follower applied the state.
enum class state_change : uint8_t {
  applied,
  stale,  // the partition epoch is older than the one already applied (Kafka skips it the same way)
};

struct append_outcome {
  // first/last offset, log append time, ... For a duplicate: the original batch's offsets, and its timestamp
  // as log_append_time (what Kafka answers), with nothing written.
  storage::append_result appended;
  bool duplicate = false;
  int64_t log_start_offset = 0;
  int64_t high_watermark = 0;  // after the append
  // acks=-1: the high watermark the request waits for (last offset + 1), and whether it is already reached (a
  // single in-sync replica, or followers already caught up): then `error` is its answer. acks=0/1: done at
  // once.
  int64_t required_offset = -1;
  bool done = true;
  error_code error = error_code::none;
};

// A Produce append (partition::append of a produced_batch): the outcome, or the error; for INVALID_RECORD and
// INVALID_TIMESTAMP also Kafka's message and the records at fault (KIP-467 RecordErrors), listed from the
// batch as the producer sent it (a failed append stamps nothing).
struct produce_outcome {
  result<append_outcome> appended;
  std::optional<record_validation_failure> record_errors;
};

struct read_request {
  int64_t fetch_offset = 0;
  int32_t max_bytes = 0;
  int32_t replica_id =
      consumer_replica_id;  // >= 0: a follower broker fetching (reads up to the log end offset)
  isolation_level isolation = isolation_level::read_uncommitted;
  bool min_one_batch = true;  // at least one whole batch even if larger than max_bytes (KIP-74)
  std::optional<int32_t> current_leader_epoch;  // Fetch v9+ (KIP-320); nullopt or -1: not checked
  std::optional<int32_t> last_fetched_epoch;    // Fetch v12+ from followers (KIP-595): divergence check
  // A local reader that replays the whole log (the group coordinator loading __consumer_offsets, as Kafka's
  // loads up to the log end): reads past the high watermark. Never set from the wire.
  bool up_to_log_end = false;
};

struct read_outcome {
  std::optional<storage::file_slice> data;  // whole batches; nullopt: nothing to return yet
  // The offsets as they were before the read (Kafka's LogReadInfo); sent in every Fetch partition response.
  int64_t high_watermark = 0;
  int64_t last_stable_offset = 0;
  int64_t log_start_offset = 0;
  int64_t log_end_offset = 0;
  // Set when the follower's last fetched epoch does not match our log (Fetch's DivergingEpoch): it must
  // truncate to `end_offset` of `epoch` and fetch again. Nothing is read then.
  struct diverging_epoch {
    int32_t epoch = -1;
    int64_t end_offset = -1;
  };
  std::optional<diverging_epoch> diverging;
  // read_committed reads: the aborted transactions overlapping the range read (Fetch's AbortedTransactions;
  // empty when none). nullopt for other reads.
  std::optional<std::vector<storage::aborted_txn>> aborted_transactions;
};

// DescribeProducers (KIP-664): one producer with state on this replica.
struct producer_description {
  int64_t producer_id = -1;
  int32_t producer_epoch = -1;
  int32_t last_sequence = -1;
  int64_t last_timestamp = -1;
  int32_t coordinator_epoch = -1;
  int64_t current_txn_start_offset = -1;  // -1 without an open transaction
};

// ListOffsets answer: no offset when none qualifies (Kafka answers offset -1, timestamp -1).
struct list_offset_outcome {
  std::optional<storage::offset_for_timestamp> found;
};

struct follower_fetch {
  int32_t replica_id = -1;
  int64_t fetch_offset = 0;       // the follower's log end offset
  int64_t log_start_offset = -1;  // the follower's log start offset (Fetch's log_start_offset field)
  int64_t leader_end_offset = 0;  // read_outcome::log_end_offset of the read that served this fetch
  int64_t fetch_time_ms = 0;
};

struct delete_records_outcome {
  int64_t requested_offset = 0;
  // partition::low_watermark() after the deletion. DeleteRecords answers once it reaches requested_offset
  // (the followers take the new log start from their next fetch answer and report it in the fetch after).
  int64_t low_watermark = 0;
};

class partition {
 public:
  partition(storage::partition_log* log, uuid topic_id, partition_options options);
  partition(const partition&) = delete;
  partition& operator=(const partition&) = delete;
  ~partition();

  const storage::topic_partition& topic_partition() const;
  const uuid& topic_id() const { return _topic_id; }
  storage::partition_log& log() { return *_log; }
  const storage::partition_log& log() const { return *_log; }
  // KIP-113: the log moved to another log dir (storage::log_manager::promote_future) and `log`, holding the
  // same batches, replaces it. The replica's state and its producer state in memory go on; the producer
  // state's snapshots are in the new dir from now on, starting with one at the log end offset.
  status replace_log(storage::partition_log* log);
  // Whether the producer state could be loaded when the partition was created (KAFKA_STORAGE_ERROR if not:
  // the replica must not serve, and appends fail).
  const status& load_status() const { return _load_status; }
  // nullptr when it could not be loaded.
  const storage::producer_state_manager* producer_state() const { return _producers.get(); }

  // Become (or stay) leader with this state. A new leader epoch starts in the log's epoch cache at the log
  // end offset; follower states are reset (Kafka's makeLeader); the high watermark may move at once (ISR of
  // one).
  result<state_change> make_leader(const partition_state& state);
  // Become (or stay) a follower of state.leader. Pending acks=all produces fail with NOT_LEADER_OR_FOLLOWER
  // and parked fetches wake up (they will find they are no longer served here).
  result<state_change> make_follower(const partition_state& state);
  // The replica stops serving: every waiter fires with `error` (NOT_LEADER_OR_FOLLOWER on removal;
  // KAFKA_STORAGE_ERROR when its log dir went offline, what Kafka's delayed operations answer for an offline
  // partition).
  void stop(error_code error = error_code::not_leader_or_follower);

  bool is_leader() const { return _is_leader; }
  int32_t leader_id() const { return _state.leader; }
  int32_t leader_epoch() const { return _state.leader_epoch; }
  int32_t partition_epoch() const { return _state.partition_epoch; }
  const std::vector<int32_t>& replicas() const { return _state.replicas; }
  const std::vector<int32_t>& isr() const { return _state.isr; }
  // min.insync.replicas capped at the replication factor (Kafka's effectiveMinIsr).
  int32_t min_insync_replicas() const;
  bool under_min_isr() const;     // UnderMinIsr metric, kafka-topics --under-min-isr-partitions
  bool under_replicated() const;  // UnderReplicated: |ISR| < |replicas|
  // Replication throttles for this node's replica of the partition (partition_state).
  bool leader_throttled() const { return _state.leader_throttled; }
  bool follower_throttled() const { return _state.follower_throttled; }
  int64_t high_watermark() const { return _high_watermark; }
  // Kafka's UnifiedLog.lastStableOffset: the first offset of the earliest open (or ended but unreplicated)
  // transaction when below the high watermark, else the high watermark.
  int64_t last_stable_offset() const;
  int64_t log_start_offset() const;
  int64_t log_end_offset() const;
  const std::vector<follower_state>& followers() const { return _followers; }
  // Leader: the smallest log start offset over this replica and the followers on live brokers (see
  // replication::low_watermark in replica_rules.h); what DeleteRecords waits for.
  int64_t low_watermark() const;

  // Produce on the leader (Kafka's appendRecordsToLeader): NOT_LEADER_OR_FOLLOWER on a follower,
  // INVALID_REQUIRED_ACKS, NOT_ENOUGH_REPLICAS for acks=-1 while |ISR| < min ISR (nothing written), then the
  // idempotent-producer checks (INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE, or a
  // duplicate answered from the producer state), then the storage errors (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE,
  // RECORD_LIST_TOO_LARGE, INVALID_RECORD, INVALID_TIMESTAMP, KAFKA_STORAGE_ERROR) as they come. Kafka checks
  // the producer state after validating the records; here it comes first, which only changes which error a
  // batch that breaks both kinds of rule gets. If the outcome is not done, the caller parks the request with
  // add_high_watermark_waiter(required_offset). `records` may hold several batches (the coordinators'
  // writes); no client rules apply to them. With storage::append_origin::coordinator (the group
  // coordinator's writes) producer epochs are checked, not sequences, and nothing is a duplicate. A
  // `verification_guard` (a TxnOffsetCommit's write, guard from create_verification_guard) is checked as a
  // produced batch's is.
  result<append_outcome> append(std::span<uint8_t> records, int16_t acks,
                                storage::append_origin origin = storage::append_origin::client,
                                std::optional<uint64_t> verification_guard = std::nullopt);
  // Produce: the same for one batch from a client, checked and parsed once by validate_produced_records; its
  // header is used as it is from there to the log (producer-state checks, the log's validation and stamping,
  // the producer-state update).
  produce_outcome append(produced_batch& batch, int16_t acks);
  // KIP-890 part 1, before a transactional batch is verified with the coordinator: the producer's guard, 0
  // when it has an open transaction here (storage::producer_state_manager::create_verification_guard); the
  // leadership and offline errors of an append; INVALID_PRODUCER_EPOCH for an epoch below the producer's
  // (Kafka's early check). `epoch_bump` (transactions v2: Produce v12+, TxnOffsetCommit v5+): while the
  // producer's previous transaction is still open here, CONCURRENT_TRANSACTIONS, and no guard (Kafka's
  // KAFKA-18575): its marker would clear the guard after the coordinator has added the partition to the
  // next transaction, and the verified write would be refused.
  result<uint64_t> create_verification_guard(int64_t producer_id, int32_t base_sequence, int16_t epoch,
                                             bool epoch_bump);
  // The transaction coordinator's marker for this partition (WriteTxnMarkers; Kafka's appendRecordsToLeader
  // with origin COORDINATOR, acks=-1): NOT_LEADER_OR_FOLLOWER on a follower, KAFKA_STORAGE_ERROR offline,
  // NOT_ENOUGH_REPLICAS below min ISR, then the producer-state check of the marker (INVALID_PRODUCER_EPOCH,
  // TRANSACTION_COORDINATOR_FENCED; nothing written on an error). The marker batch is written with the time
  // now, completing the producer's open transaction here if any (an abort is indexed). Like a produce with
  // acks=-1: when the outcome is not done, wait with add_high_watermark_waiter(required_offset).
  result<append_outcome> append_txn_marker(const storage::txn_marker_request& marker);
  // Follower append of records fetched from the leader (offsets already assigned); updates the producer
  // state without checking it (Kafka's AppendOrigin.REPLICATION).
  result<storage::append_result> append_as_follower(std::span<const uint8_t> records);
  // Follower truncation (divergence after a leader change): drops the log from `offset` on, bounds the high
  // watermark by the new log end, and reloads the producer state from the snapshots and the log below it.
  status truncate_to(int64_t offset);
  // A follower far behind the leader's log start: empties the log, which restarts at `offset`, and forgets
  // every producer.
  status truncate_fully_and_start_at(int64_t offset);
  // Clean close of the replica (shutdown, or stop hosting it while keeping the log): a producer snapshot at
  // the log end offset, so that the next start replays nothing; written unsynced (the log manager's
  // shutdown syncs the file system once).
  status close();
  // Follower: the leader's high watermark from a fetch response, bounded by our own log end offset.
  void update_high_watermark_from_leader(int64_t leader_high_watermark);
  // Follower: the leader's log start offset from a fetch response (Kafka's ReplicaFetcherThread
  // processPartitionData -> maybeIncrementLogStartOffset(LeaderOffsetIncremented)): records the leader
  // deleted (DeleteRecords, retention) are deleted here too, so that they do not come back when this replica
  // leads. Raised only, and bounded by our high watermark (call update_high_watermark_from_leader first); the
  // segments below it go at the next retention pass and the log-start-offset checkpoint keeps it. A failure
  // to write the epoch checkpoint takes the log offline (KAFKA_STORAGE_ERROR). Nothing on a leader.
  status update_log_start_offset_from_leader(int64_t leader_log_start_offset);

  // Fetch (Kafka's fetchRecords / readRecords): leader epoch check first (FENCED_LEADER_EPOCH /
  // UNKNOWN_LEADER_EPOCH), then NOT_LEADER_OR_FOLLOWER unless leader, NOT_LEADER_OR_FOLLOWER for a replica id
  // that is not a follower of this partition, OFFSET_OUT_OF_RANGE outside [log start, log end]. A follower's
  // fetch does not update its state here: the caller passes the outcome to update_follower_fetch_state
  // (unless diverging).
  result<read_outcome> read(const read_request& request) const;

  // ListOffsets (Kafka's fetchOffsetForTimestamp): earliest / earliest-local give the log start offset,
  // latest the high watermark (read_uncommitted), last stable offset (read_committed) or log end offset
  // (isolation nullopt: a replica asking), a timestamp or max-timestamp (-3) the first matching offset below
  // that bound. While a new leader's high watermark is still below the start of its epoch, latest and bounded
  // lookups from clients answer OFFSET_NOT_AVAILABLE (they would otherwise see an offset go backwards).
  result<list_offset_outcome> list_offset(int64_t timestamp, std::optional<isolation_level> isolation,
                                          std::optional<int32_t> current_leader_epoch) const;

  // A follower's fetch was served: record its log end offset and caught-up time, move the high watermark,
  // wake waiters. NOT_LEADER_OR_FOLLOWER if not leader or not a follower of this partition.
  status update_follower_fetch_state(const follower_fetch& fetch);

  // ISR changes (Kafka's Partition.maybeShrinkIsr / maybeExpandIsr / prepareIsrShrink / prepareIsrExpand):
  // the change to send now, if any, with nothing else in flight. Out of the ISR: followers not caught up
  // within replica.lag.time.max.ms (is_caught_up). Into it: followers outside the ISR whose log end has
  // reached the high watermark and the start of this leader epoch, and that `eligible` accepts (registered,
  // unfenced, not shutting down). A leader in RECOVERING state also asks to be RECOVERED. While a change is
  // in flight the ISR the high watermark uses stays the committed one (a shrink is not assumed before the
  // controller wrote it). Each call also records `eligible` per follower (an ineligible follower outside the
  // ISR no longer holds the high watermark back, nor does any ineligible follower hold the low watermark
  // back) and recomputes the high watermark (a follower's caught-up time runs out without any event), firing
  // the waiters it satisfies (data waiters too when the low watermark rose: a parked DeleteRecords). Nothing
  // on a follower.
  std::optional<isr_change_proposal> propose_isr_change(int64_t now_ms,
                                                        const std::function<bool(int32_t)>& eligible);
  // The answer to the change in flight: on success the ISR, partition epoch and recovery state are taken
  // (unless the metadata already brought a newer partition epoch), the high watermark recomputed and waiters
  // fired; on an error the change is dropped (the next proposal retries; FENCED_LEADER_EPOCH,
  // INVALID_UPDATE_VERSION and NEW_LEADER_ELECTED wait for the next metadata instead).
  void isr_change_answered(const isr_change_answer& answer, int64_t now_ms);
  bool isr_change_in_flight() const { return _isr_change_in_flight; }
  int8_t leader_recovery_state() const { return _state.leader_recovery_state; }

  // DeleteRecords on the leader: raise the log start offset to `offset` (-1: to the high watermark).
  // OFFSET_OUT_OF_RANGE below 0 or beyond the high watermark, POLICY_VIOLATION on a compact-only topic,
  // NOT_LEADER_OR_FOLLOWER on a follower.
  result<delete_records_outcome> delete_records(int64_t offset);

  // Delayed produce: `callback` fires once the high watermark reaches `offset`, with NONE or
  // NOT_ENOUGH_REPLICAS_AFTER_APPEND (Kafka's checkEnoughReplicasReachOffset), or with NOT_LEADER_OR_FOLLOWER
  // when leadership is lost. Already reached (or not leader): fires before returning, with an invalid handle.
  waiter_handle add_high_watermark_waiter(int64_t offset, waiter_callback callback);
  // Delayed fetch: `callback` fires once (NONE) on the next append, high watermark or log start change, or
  // with NOT_LEADER_OR_FOLLOWER on a role change or stop. The fetch then re-reads and parks again if still
  // short of fetch.min.bytes.
  waiter_handle add_data_waiter(waiter_callback callback);
  // DescribeProducers: the producers with state here, by producer id (leader or follower, as Kafka;
  // KAFKA_STORAGE_ERROR when offline or the state did not load).
  result<std::vector<producer_description>> describe_producers() const;

  // A timed-out request withdraws its waiter; false if it already fired.
  bool cancel_waiter(waiter_handle handle);
  size_t waiter_count() const { return _hw_waiters.size() + _data_waiters.size(); }

 private:
  int64_t now_ms() const;
  // Both appends: `batch` set for a produced batch (its header parsed), else `records` split here.
  result<append_outcome> append_as_leader(std::span<uint8_t> records, produced_batch* batch, int16_t acks,
                                          storage::append_origin origin,
                                          std::optional<uint64_t> verification_guard = std::nullopt);
  // What every leader append does once the batches and the producer state are written: the high watermark,
  // the acks=-1 wait, and waking the parked fetches.
  append_outcome finish_leader_append(const storage::append_result& appended, int16_t acks, int64_t now_ms);
  int64_t bound_offset(fetch_bound bound) const;
  // Recompute the high watermark (leader); true if it moved.
  bool maybe_increment_high_watermark(int64_t now_ms);
  // Kafka snapshots the producer state at every segment roll: the log's roll listener.
  void listen_to_rolls();
  void set_high_watermark(int64_t offset);
  // The producer state hears of every high watermark move (unreplicated transactions end there).
  void high_watermark_changed();
  // After an append: index the aborted transactions it completed (an I/O error takes the log offline).
  status index_aborted_txns(const std::vector<storage::completed_txn>& completed);
  // Fire what the current state satisfies.
  void complete_waiters();
  void fail_all_waiters(error_code error);
  follower_state* follower(int32_t replica_id);
  void maybe_expire_producers(int64_t now_ms);
  // Raise the log start offset (DeleteRecords, or a follower taking the leader's) and tell the producer
  // state.
  status increment_log_start_offset(int64_t offset);

  storage::partition_log* _log;
  uuid _topic_id;
  partition_options _options;
  partition_state _state;
  bool _is_leader = false;
  bool _has_state = false;
  int64_t _high_watermark = 0;
  // The log end offset when this leader epoch began (Kafka's leaderEpochStartOffsetOpt): until the high
  // watermark reaches it, clients asking for "latest" get OFFSET_NOT_AVAILABLE.
  std::optional<int64_t> _leader_epoch_start_offset;
  std::vector<follower_state> _followers;  // replicas other than this one, leader only
  waiter_list _hw_waiters;
  waiter_list _data_waiters;
  uint64_t _next_waiter_id = 1;
  // Shared so that the log's roll listener holds it weakly: the log outlives this partition and must not call
  // into it once it is gone.
  std::shared_ptr<storage::producer_state_manager> _producers;
  status _load_status;
  int64_t _last_producer_expiry_check_ms = 0;
  bool _isr_change_in_flight = false;
  // Set by an answer that needs new metadata before another change (cleared by make_leader).
  bool _isr_change_waits_for_metadata = false;
};

}  // namespace mala::replication
