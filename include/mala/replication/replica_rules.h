// The rules of partition replication as pure functions on plain data: how the leader's high watermark moves,
// when an acks=all produce may be appended and when it is complete, how a follower's fetch updates what the
// leader knows about it, which offset bounds a fetch, and the leader epoch fencing of fetches and offset
// lookups. Each one matches a piece of Apache Kafka's Partition / Replica / DelayedProduce logic (named
// beside it) so that replication::partition only wires these rules to a storage::partition_log and its
// waiters, and the rules can be tested exhaustively without a log.
//
// Threads: stateless functions, callable from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "mala/common/error_code.h"

namespace mala::replication {

// Fetch / ListOffsets isolation level (wire values of Kafka's IsolationLevel).
enum class isolation_level : int8_t { read_uncommitted = 0, read_committed = 1 };

// Replica ids a Fetch or ListOffsets request can carry besides a broker id (Kafka's FetchRequest constants).
inline constexpr int32_t consumer_replica_id = -1;
inline constexpr int32_t debugging_replica_id = -2;

// Leader epoch sentinels as on the wire (RecordBatch.NO_PARTITION_LEADER_EPOCH, OffsetsForLeaderEpoch's
// UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET).
inline constexpr int32_t no_leader_epoch = -1;
inline constexpr int64_t undefined_epoch_offset = -1;

// What the leader knows about one follower, from the follower's fetches (Kafka's ReplicaState).
struct follower_state {
  int32_t replica_id = -1;
  int64_t log_end_offset = -1;    // the follower's fetch offset; -1 until its first fetch under this leader
  int64_t log_start_offset = -1;  // as the follower reported it; -1 unknown
  int64_t last_caught_up_time_ms = 0;
  int64_t last_fetch_time_ms = 0;
  int64_t last_fetch_leader_log_end_offset = -1;  // the leader's log end offset when that fetch was read
  // Whether the broker may join the ISR (Kafka's isReplicaIsrEligible: not fenced, not shutting down,
  // matching broker epoch), refreshed from the metadata by partition::propose_isr_change. Also whether the
  // follower counts for the low watermark (see low_watermark).
  bool isr_eligible = true;
  friend bool operator==(const follower_state&, const follower_state&) = default;
};

// Kafka's effectiveMinIsr: min.insync.replicas capped at the replication factor, so that a topic whose
// min.insync.replicas exceeds its replica count is not unwritable with acks=all (Kafka 3.7+).
int32_t effective_min_isr(int32_t min_insync_replicas, size_t replication_factor);

// Kafka's ReplicaState.isCaughtUp: the follower has the leader's log end offset, or had the leader's log end
// offset (of some earlier fetch) within replica.lag.time.max.ms.
bool is_caught_up(const follower_state& follower, int64_t leader_log_end_offset, int64_t now_ms,
                  int64_t replica_lag_time_max_ms);

// Kafka's Replica.updateFetchStateOrThrow: the state after a follower fetched at `fetch_offset` (which is its
// log end offset) at `fetch_time_ms`, the read having seen the leader's log end offset `leader_end_offset`.
// The follower is caught up at this fetch if it asked for the leader's end; it was caught up at its previous
// fetch if it now asks for at least what the leader had then.
follower_state after_follower_fetch(const follower_state& before, int64_t fetch_offset,
                                    int64_t follower_log_start_offset, int64_t fetch_time_ms,
                                    int64_t leader_end_offset);

// Kafka's resetReplicaState, when this broker becomes leader (new_leader) or takes a new leader epoch while
// already leader: an in-sync follower counts as caught up now, an out-of-sync one not at all, so it cannot
// hold the high watermark back. A new leader forgets everything it knew from an earlier term.
follower_state reset_on_leader_change(const follower_state& before, int32_t replica_id, bool new_leader,
                                      bool in_isr, int64_t now_ms, int64_t leader_end_offset);

struct high_watermark_inputs {
  int64_t high_watermark = 0;  // current
  int64_t leader_log_end_offset = 0;
  std::span<const int32_t> isr;     // includes the leader
  int32_t min_insync_replicas = 1;  // already effective (see effective_min_isr)
  std::span<const follower_state> followers;
  int64_t now_ms = 0;
  int64_t replica_lag_time_max_ms = 30'000;  // replica.lag.time.max.ms
};

// Kafka's maybeIncrementLeaderHW: the new high watermark, never lower than the current one. It is the
// smallest log end offset among the leader and the followers in the ISR, also counting a follower outside the
// ISR that is caught up and eligible (it is about to join, and the HW must not pass what it has). It does not
// move at all while |ISR| < min.insync.replicas (strict min ISR, KIP-966): a record is committed only when
// enough replicas have it.
int64_t next_high_watermark(const high_watermark_inputs& in);

// The check Kafka's appendRecordsToLeader makes before writing: acks must be -1, 0 or 1
// (INVALID_REQUIRED_ACKS) and acks=-1 needs |ISR| >= min ISR (NOT_ENOUGH_REPLICAS, the log untouched).
error_code check_acks_before_append(int16_t acks, size_t isr_size, int32_t min_insync_replicas);

// Kafka's Partition.checkEnoughReplicasReachOffset, which completes DelayedProduce: an acks=-1 produce whose
// last offset is required_offset - 1 is done once the high watermark reaches required_offset; the answer is
// then NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR has meanwhile shrunk below min ISR, NONE otherwise. Not
// done before (the request waits, then times out with REQUEST_TIMED_OUT).
struct ack_completion {
  bool done = false;
  error_code error = error_code::none;
  friend bool operator==(const ack_completion&, const ack_completion&) = default;
};
ack_completion check_enough_replicas_reach_offset(int64_t high_watermark, int64_t required_offset,
                                                  size_t isr_size, int32_t min_insync_replicas);

// Kafka's checkCurrentLeaderEpoch (Fetch, ListOffsets, OffsetForLeaderEpoch): a request naming an older
// leader epoch than ours is FENCED_LEADER_EPOCH (the client has stale metadata), a newer one
// UNKNOWN_LEADER_EPOCH (we do). No epoch (-1 / absent, older request versions) is not checked.
error_code check_current_leader_epoch(std::optional<int32_t> request_epoch, int32_t local_epoch);

// Which offset bounds a read (Kafka's FetchIsolation.of): a replica (id >= 0) reads to the log end offset, a
// consumer to the high watermark, a read_committed consumer to the last stable offset.
enum class fetch_bound : uint8_t { log_end, high_watermark, last_stable_offset };
fetch_bound fetch_bound_for(int32_t replica_id, isolation_level isolation);

// Kafka's Partition.lowWatermarkIfLeader: the smallest log start offset among the leader and the followers on
// live brokers (Kafka's metadataCache.hasAliveBroker; here isr_eligible, which also leaves out a broker in
// controlled shutdown). DeleteRecords answers once it reaches the requested offset. A live follower that has
// not reported its log start under this leader yet (-1) holds it at -1, as in Kafka: the deletion waits for
// its next fetch. A dead follower stops counting once the controller fences it, so it cannot hold
// DeleteRecords back until it returns (it takes the leader's log start from its first fetch answer then).
int64_t low_watermark(int64_t leader_log_start_offset, std::span<const follower_state> followers);

}  // namespace mala::replication
