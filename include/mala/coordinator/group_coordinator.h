// The group coordinator (Kafka 4.x's GroupCoordinatorService + GroupMetadataManager + OffsetMetadataManager
// for the classic protocol): consumer groups of this node's __consumer_offsets partitions, their rebalances
// (JoinGroup / SyncGroup / Heartbeat / LeaveGroup), their committed offsets (OffsetCommit / OffsetFetch /
// OffsetDelete) and their administration (ListGroups / DescribeGroups / DeleteGroups).
//
// State: every group belongs to one partition of __consumer_offsets (group_placement.h); this node
// coordinates the groups of the partitions it leads. A partition is not_owned, loading (its log is replayed
// into memory: requests get COORDINATOR_LOAD_IN_PROGRESS) or active. Groups are kept by id with their
// partition; committed offsets by group, topic and partition. Groups of the KIP-848 consumer protocol
// (ConsumerGroupHeartbeat) sit beside the classic ones in the same id space, kept by consumer_group_manager
// (src/coordinator) with their own records (key versions 3-8, consumer_group.h); they share the offsets.
//
// Persistence: every change that must survive a restart is a record (group_records.h) appended through the
// record_writer, which answers once the record is committed (acks=-1: the partition's high watermark passed
// it). Offset commits and tombstones change the in-memory state when their append completes, so reads see
// committed data only; group metadata is written at the end of a rebalance (the leader's SyncGroup: the group
// becomes Stable once the record is committed) and when a group becomes Empty. On load the records are
// replayed in log order: the last GroupMetadataValue of a group is its state (Stable with its members, or
// Empty), offsets are the last commit of each partition, tombstones remove.
//
// Transactions (TxnOffsetCommit): a transactional batch's offsets are pending per producer id, invisible to
// OffsetFetch (RequireStable answers UNSTABLE_OFFSET_COMMIT for them) and to the retention check, until a
// transaction marker of that producer in the same partition's log commits them (they become the committed
// offsets, as if written at their own record offset) or aborts them (dropped). Markers are written here
// (complete_transaction), so they are ordered with the coordinator's own writes, and replayed at load.
//
// Time: the coordinator keeps deadlines (member sessions, join and sync phases, the initial rebalance delay,
// the offsets retention check) and does nothing on its own: the owner calls run_expired_timers() when
// next_deadline() has passed, and is told through the deadline listener when a new deadline comes earlier
// than the ones it knows. The clock is the injected wall clock (ms), as Kafka's timers use
// Time.milliseconds().
//
// Answers: JoinGroup and SyncGroup park until the rebalance reaches them; their callbacks (and those of the
// writes) may run before the call returns or later, always on the coordinator's thread. A callback only
// delivers its answer; it must not call back into the coordinator.
//
// Parts (src/coordinator): this class is the facade over classic_group_manager (classic groups),
// consumer_group_manager (KIP-848 consumer groups) and offset_manager (committed offsets), which share one
// coordinator_runtime (the owned partitions, the appends, the timers).
//
// Threads: one thread, the home shard's (like the replicas whose logs hold the records). Nothing is locked.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/error_code.h"
#include "mala/common/result.h"
#include "mala/coordinator/classic_group.h"
#include "mala/coordinator/consumer_group.h"
#include "mala/coordinator/group_records.h"
#include "mala/protocol/messages/consumer_group_describe_response.h"
#include "mala/protocol/messages/consumer_group_heartbeat_request.h"
#include "mala/protocol/messages/consumer_group_heartbeat_response.h"
#include "mala/protocol/messages/delete_groups_response.h"
#include "mala/protocol/messages/describe_groups_response.h"
#include "mala/protocol/messages/heartbeat_request.h"
#include "mala/protocol/messages/heartbeat_response.h"
#include "mala/protocol/messages/join_group_request.h"
#include "mala/protocol/messages/leave_group_request.h"
#include "mala/protocol/messages/leave_group_response.h"
#include "mala/protocol/messages/list_groups_request.h"
#include "mala/protocol/messages/list_groups_response.h"
#include "mala/protocol/messages/offset_commit_request.h"
#include "mala/protocol/messages/offset_commit_response.h"
#include "mala/protocol/messages/offset_delete_request.h"
#include "mala/protocol/messages/offset_delete_response.h"
#include "mala/protocol/messages/offset_fetch_request.h"
#include "mala/protocol/messages/offset_fetch_response.h"
#include "mala/protocol/messages/sync_group_request.h"
#include "mala/protocol/messages/txn_offset_commit_request.h"
#include "mala/protocol/messages/txn_offset_commit_response.h"

namespace mala::coordinator {

struct group_coordinator_config {
  int32_t offsets_topic_num_partitions = 50;   // offsets.topic.num.partitions
  int32_t initial_rebalance_delay_ms = 3000;   // group.initial.rebalance.delay.ms
  int32_t min_session_timeout_ms = 6000;       // group.min.session.timeout.ms
  int32_t max_session_timeout_ms = 1'800'000;  // group.max.session.timeout.ms
  int32_t max_group_size = INT32_MAX;          // group.max.size
  // How long a new member's JoinGroup may stay parked (Kafka's internal classic new member join timeout).
  int32_t new_member_join_timeout_ms = 300'000;
  int64_t offsets_retention_ms = 7LL * 24 * 60 * 60 * 1000;  // offsets.retention.minutes (7 days)
  int64_t offsets_retention_check_interval_ms = 600'000;     // offsets.retention.check.interval.ms
  int32_t offset_metadata_max_bytes = 4096;                  // offset.metadata.max.bytes
  // KIP-848 consumer groups.
  int32_t consumer_heartbeat_interval_ms = 5000;                    // group.consumer.heartbeat.interval.ms
  int32_t consumer_session_timeout_ms = 45000;                      // group.consumer.session.timeout.ms
  int32_t consumer_max_size = INT32_MAX;                            // group.consumer.max.size
  std::vector<std::string> consumer_assignors{"uniform", "range"};  // group.consumer.assignors
  std::string consumer_migration_policy = "bidirectional";          // group.consumer.migration.policy
};

// The producer of a transactional write (TxnOffsetCommit): its batch carries the producer's id and epoch with
// the transactional attribute, so that the partition's producer state fences a zombie
// (INVALID_PRODUCER_EPOCH) and the partition's last stable offset covers the transaction.
// `verification_guard`, when the write was verified (KIP-890): the guard the request handler took on the
// partition before the transaction coordinator vouched for it (0 when the producer's transaction was open
// there); the append opens a transaction only with the guard still stored (else INVALID_TXN_STATE), so a
// commit that races the transaction's end cannot start one the coordinator does not know.
struct transactional_producer {
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  std::optional<uint64_t> verification_guard;
};

// The end of a producer's transaction on a __consumer_offsets partition (WriteTxnMarkers): one control batch
// (storage/txn_marker.h). The coordinator epoch and transaction version are the marker's, for the
// partition's marker checks (a stale coordinator epoch, and under transaction version 2 an epoch that must
// be above the producer's current one).
struct txn_marker_write {
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  bool commit = false;
  int32_t coordinator_epoch = -1;
  int8_t transaction_version = 0;
};

// Appends coordinator records to a partition of __consumer_offsets. `done` runs exactly once, never from
// inside the call itself, on the coordinator's thread: NONE and the log offset of the batch's first record
// (the others follow one by one) once the batch is committed, otherwise the append's error
// (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR,
// INVALID_PRODUCER_EPOCH,
// ...) and -1.
class record_writer {
 public:
  using append_callback = std::function<void(error_code, int64_t first_offset)>;
  virtual ~record_writer() = default;
  // A batch of records; transactional when `producer` is set.
  virtual void append(int32_t partition, std::vector<coordinator_record> records,
                      std::optional<transactional_producer> producer, append_callback done) = 0;
  // A transaction marker.
  virtual void append_marker(int32_t partition, const txn_marker_write& marker, append_callback done) = 0;
};

// Who sent a request: JoinGroup records the client id and host of new members; behaviour differs by version.
struct request_origin {
  std::string client_id;
  std::string client_host;  // as Kafka prints InetAddress: "/127.0.0.1"
  int16_t api_version = 0;
};

enum class partition_status : uint8_t { not_owned, loading, active };

// A committed offset (Kafka's OffsetAndMetadata).
struct committed_offset {
  int64_t offset = -1;
  std::optional<int32_t> leader_epoch;
  std::string metadata;
  int64_t commit_timestamp_ms = 0;
  std::optional<int64_t> expire_timestamp_ms;  // OffsetCommit v2-v4 retention time
  int64_t record_offset = -1;                  // where the commit is in __consumer_offsets
};

// Kafka's CoordinatorOperationExceptionHelper: how an append error reaches clients
// (UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE;
// NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR -> NOT_COORDINATOR; MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE ->
// UNKNOWN_SERVER_ERROR).
error_code append_error_to_client_error(error_code append_error);

class consumer_group_manager;

class group_coordinator {
 public:
  using offset_commit_callback = std::function<void(protocol::offset_commit_response)>;
  using offset_fetch_callback =
      std::function<void(protocol::offset_fetch_response::offset_fetch_response_group)>;
  using offset_delete_callback = std::function<void(protocol::offset_delete_response)>;
  using txn_offset_commit_callback = std::function<void(protocol::txn_offset_commit_response)>;
  using delete_groups_callback =
      std::function<void(std::vector<protocol::delete_groups_response::deletable_group_result>)>;

  group_coordinator(group_coordinator_config config, record_writer& writer,
                    std::function<int64_t()> clock_ms);
  ~group_coordinator();
  group_coordinator(const group_coordinator&) = delete;
  group_coordinator& operator=(const group_coordinator&) = delete;

  const group_coordinator_config& config() const { return _config; }
  // The partition count of the existing __consumer_offsets, which group placement follows (Kafka reads it
  // from the metadata at start-up, offsets.topic.num.partitions only sizes a topic still to be created).
  void set_partition_count(int32_t partitions) { _config.offsets_topic_num_partitions = partitions; }
  int32_t partition_for(std::string_view group_id) const;
  partition_status status_of(int32_t partition) const;
  std::vector<int32_t> owned_partitions() const;

  // --- Partitions (Kafka's CoordinatorRuntime load / unload)
  // The partition is led here: forget what was known of it and start replaying its log (status loading).
  void begin_loading(int32_t partition);
  // One record of the partition's log, in offset order, with the producer id of its batch when the batch is
  // transactional (-1 otherwise): a transactional offset commit stays pending until its producer's marker.
  // Undecodable records are skipped (error returned for the log line); records of other partitions are
  // refused.
  status replay(int32_t partition, int64_t offset, std::span<const uint8_t> key,
                std::optional<std::span<const uint8_t>> value, int64_t producer_id = -1);
  // A transaction marker (control batch) of the partition's log, in offset order with the records: the
  // producer's pending offsets become committed (COMMIT) or are dropped (ABORT).
  status replay_marker(int32_t partition, int64_t producer_id, bool commit);
  // The replay reached the end of the log: the partition serves (status active) and the loaded members'
  // sessions start now (GroupMetadataManager.onLoaded).
  void complete_loading(int32_t partition);
  // Leadership of the partition moved (or its topic is gone): parked JoinGroup / SyncGroup get
  // NOT_COORDINATOR, the partition's groups and offsets are forgotten.
  void unload(int32_t partition);

  // --- Classic protocol
  void join_group(const request_origin& origin, protocol::join_group_request request, join_callback done);
  void sync_group(const request_origin& origin, protocol::sync_group_request request, sync_callback done);
  protocol::heartbeat_response heartbeat(const request_origin& origin,
                                         const protocol::heartbeat_request& request);
  // `request` in the v3+ shape (members listed; LeaveGroupRequest.normalizedData for v0-v2); the answer too.
  protocol::leave_group_response leave_group(const request_origin& origin,
                                             const protocol::leave_group_request& request);

  // --- KIP-848 consumer protocol
  // The topics of the metadata image (subscriptions resolve against them; assignments carry their ids).
  void set_topics(topic_catalog catalog);
  void consumer_group_heartbeat(const request_origin& origin,
                                protocol::consumer_group_heartbeat_request request,
                                std::function<void(protocol::consumer_group_heartbeat_response)> done);
  std::vector<protocol::consumer_group_describe_response::described_group> consumer_group_describe(
      const std::vector<std::string>& group_ids, bool include_authorized_operations) const;

  // --- Offsets. The topics and partitions must exist in the metadata (the broker answers the others).
  void commit_offsets(const request_origin& origin, protocol::offset_commit_request request,
                      offset_commit_callback done);
  // One group of OffsetFetch (v8+ shape; topics nullopt = every committed partition). With require_stable the
  // answer waits for the partition's appends in flight.
  void fetch_offsets(const protocol::offset_fetch_request::offset_fetch_request_group& request,
                     bool require_stable, offset_fetch_callback done);
  void delete_offsets(protocol::offset_delete_request request, offset_delete_callback done);

  // --- Transactions
  // TxnOffsetCommit (Kafka's commitTransactionalOffset): INVALID_GROUP_ID, NOT_COORDINATOR /
  // COORDINATOR_LOAD_IN_PROGRESS, then the group's checks (an unknown group: a simple group with generation
  // -1, ILLEGAL_GENERATION otherwise; UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID when member
  // fields are given), every partition answering the error; OFFSET_METADATA_TOO_LARGE per partition. The
  // offsets are appended as the producer's transactional batch (acks=-1) and kept pending: OffsetFetch and
  // the group do not see them until the producer's COMMIT marker is written here (complete_transaction).
  // `verification_guard`: see transactional_producer.
  void commit_transactional_offsets(const request_origin& origin, protocol::txn_offset_commit_request request,
                                    txn_offset_commit_callback done,
                                    std::optional<uint64_t> verification_guard = std::nullopt);
  // WriteTxnMarkers for __consumer_offsets partition `partition` (Kafka's GroupCoordinatorService
  // .completeTransaction): appends the marker (acks=-1) and, once committed, applies it: the producer's
  // pending offsets on this partition become the groups' committed offsets (each unless a later plain commit
  // of the same partition was written after it) or, on abort, are dropped. `done` runs once, on the
  // coordinator's thread (before the call returns for the first two errors): NONE; NOT_COORDINATOR
  // (partition not owned) or
  // COORDINATOR_LOAD_IN_PROGRESS, which the WriteTxnMarkers handler answers as NOT_LEADER_OR_FOLLOWER;
  // otherwise the append's error as it is (NOT_LEADER_OR_FOLLOWER, also when the partition was lost or
  // reloaded meanwhile, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, INVALID_PRODUCER_EPOCH, ...). Nothing is
  // applied on error; the transaction coordinator retries, and a marker written twice completes nothing the
  // second time.
  void complete_transaction(int32_t partition, const txn_marker_write& marker,
                            std::function<void(error_code)> done);

  // --- Administration
  protocol::list_groups_response list_groups(const protocol::list_groups_request& request) const;
  std::vector<protocol::describe_groups_response::described_group> describe_groups(
      const std::vector<std::string>& group_ids) const;
  void delete_groups(std::vector<std::string> group_ids, delete_groups_callback done);

  // --- Time
  std::optional<int64_t> next_deadline() const;
  // Runs every timer whose deadline is at or before the clock's now.
  void run_expired_timers();
  // Called with a deadline earlier than every one pending before (the owner re-arms its timer).
  void set_deadline_listener(std::function<void(int64_t deadline_ms)> listener);
  // The offsets retention check (GroupCoordinatorShard.cleanupGroupMetadata), also run by its timer: expired
  // offsets get tombstones, and groups left empty without offsets are deleted.
  void cleanup_group_metadata();

  // --- Inspection (tests, metrics)
  const classic_group* find_group(const std::string& group_id) const;
  const consumer_group* find_consumer_group(const std::string& group_id) const;
  const committed_offset* find_offset(const std::string& group_id, const std::string& topic,
                                      int32_t partition) const;
  // A producer's pending (uncommitted) transactional offset, or null.
  const committed_offset* find_pending_offset(int64_t producer_id, const std::string& group_id,
                                              const std::string& topic, int32_t partition) const;
  size_t group_count() const;
  // Every committed offset, by group, topic and partition (the metrics endpoint's consumer group lag).
  void for_each_committed_offset(
      const std::function<void(const std::string& group, const std::string& topic, int32_t partition,
                               const committed_offset& offset)>& fn) const;

 private:
  struct impl;
  std::unique_ptr<impl> _impl;
  group_coordinator_config _config;
};

}  // namespace mala::coordinator
