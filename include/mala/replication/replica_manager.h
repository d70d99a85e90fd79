// The partition replicas this node hosts (Kafka's ReplicaManager, its partition map part): creates and
// updates them from the leadership the metadata log assigns (become leader / follower), creating missing logs
// through the storage::log_manager, and removes them (stopping their waiters, deleting the log when asked).
// The broker's Produce, Fetch, ListOffsets and DeleteRecords handlers find a partition here and call it.
//
// Threads: one manager per shard, holding the partitions replica_placement::shard_of puts on that shard;
// the manager and its partitions are used only on that shard's thread (checked: a call from another shard
// aborts), or on a thread that is no shard at all (start-up and shutdown, unit tests). Nothing here is
// shared between shards; storage::log_manager, which creates and removes the logs, locks for itself.
#pragma once

#include <atomic>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "mala/common/result.h"
#include "mala/common/uuid.h"
#include "mala/replication/partition.h"
#include "mala/storage/log_config.h"
#include "mala/storage/log_manager.h"
#include "mala/storage/producer_state.h"

namespace mala::replication {

struct replica_manager_options {
  int32_t local_replica_id = 0;              // node.id
  int64_t replica_lag_time_max_ms = 30'000;  // replica.lag.time.max.ms
  std::function<int64_t()> clock_ms;         // wall clock (tests inject one)
  // The high watermark to start a partition with when it is first created on this node after a restart
  // (replication-offset-checkpoint); nullopt: its log start offset.
  std::function<std::optional<int64_t>(const storage::topic_partition&)> checkpointed_high_watermark;
  storage::producer_state_config producer_state;  // producer.id.expiration.ms
  int64_t producer_id_expiration_check_interval_ms =
      storage::default_producer_id_expiration_check_interval_ms;  // producer.id.expiration.check.interval.ms
  int shard = 0;  // the shard whose partitions this manager holds
};

// One partition as the metadata image describes it, from this node's point of view.
struct partition_leadership {
  std::string topic;
  int32_t partition = 0;
  uuid topic_id;
  partition_state state;  // state.leader == local id: become leader, else follower
  storage::log_config log_config;
};

// One log dir as DescribeLogDirs reports it (Kafka's ReplicaManager.describeLogDirs): its absolute path,
// whether it is online, and the size in bytes of every partition log in it, by topic and partition (every
// log of the dir, whether a replica of it is hosted or not).
struct log_dir_description {
  std::string path;
  bool online = true;
  std::map<std::string, std::map<int32_t, int64_t>> log_sizes;
  // KIP-113: the future logs in the dir (replicas moving into it), by topic and partition: size, and how
  // far behind the partition's log they are (DescribeLogDirs' IsFutureKey and OffsetLag).
  struct future_log {
    int64_t size = 0;
    int64_t offset_lag = 0;
  };
  std::map<std::string, std::map<int32_t, future_log>> future_logs;
};

// The log dirs as several shards described them: one entry per dir, the partitions of all of them.
std::vector<log_dir_description> merge_log_dirs(std::vector<std::vector<log_dir_description>> per_shard);

class replica_manager {
 public:
  // The hash of a partition's key, for this manager's index and the replica fetchers' lists.
  struct topic_partition_hash {
    size_t operator()(const storage::topic_partition& tp) const noexcept;
  };

  replica_manager(storage::log_manager& logs, replica_manager_options options);
  replica_manager(const replica_manager&) = delete;
  replica_manager& operator=(const replica_manager&) = delete;
  ~replica_manager();

  // Creates the partition (and its log when missing; its producer state is loaded from the snapshots and the
  // log) or updates it, then makes it leader or follower. Errors: KAFKA_STORAGE_ERROR (no online log dir,
  // I/O, producer state that cannot be loaded), INCONSISTENT_TOPIC_ID (a replica of another topic of the same
  // name is still hosted: it must be removed first). A stale partition epoch is ignored
  // (state_change::stale).
  result<state_change> apply_leadership(const partition_leadership& leadership);
  // Stops the replica (its waiters fire with NOT_LEADER_OR_FOLLOWER) and forgets it; with delete_log its log
  // is removed through the log manager (topic deleted or replica moved away), otherwise the log stays on
  // disk, closed cleanly (a producer snapshot at its end: the node does this for every replica at shutdown).
  status remove_partition(const storage::topic_partition& tp, bool delete_log = true);
  // The log dir of these partitions went offline (wire it to storage::log_manager::set_offline_listener):
  // their replicas stop, parked produces and fetches fire with KAFKA_STORAGE_ERROR, and apply_leadership
  // answers KAFKA_STORAGE_ERROR for them from then on (Kafka's handleLogDirFailure keeps them as offline
  // partitions until the node restarts). They stay listed: the handlers learn of the offline dir through
  // broker_services::local_replica_offline.
  void mark_offline(const std::vector<storage::topic_partition>& partitions);

  // A hash lookup: the data path and the replica fetchers call it for every partition of every request.
  partition* get(const storage::topic_partition& tp) const;
  std::vector<storage::topic_partition> partitions() const;
  // Changes whenever a partition is added or removed, so a pointer get() returned stays valid while it does
  // not (the replica fetchers keep their partition lists between requests).
  uint64_t generation() const { return _generation; }
  size_t size() const { return _partitions.size(); }
  // Counts for the UnderReplicatedPartitions / UnderMinIsrPartitionCount metrics (led partitions only).
  int32_t under_replicated_count() const;
  int32_t under_min_isr_count() const;
  // Kafka's ReplicaManager gauges over this manager's partitions, in one pass (the metrics endpoint).
  struct replica_gauges {
    int32_t partitions = 0;        // PartitionCount
    int32_t leaders = 0;           // LeaderCount
    int32_t under_replicated = 0;  // UnderReplicatedPartitions (led partitions)
    int32_t under_min_isr = 0;     // UnderMinIsrPartitionCount (led partitions)
    int32_t at_min_isr = 0;        // AtMinIsrPartitionCount (led partitions)
    int32_t offline = 0;           // OfflineReplicaCount (log dir offline)
  };
  replica_gauges gauges() const;
  // The log dirs of this node; only the partitions in `wanted` when given.
  // Only the logs this manager's shard owns are measured (`owned`, every log when unset); DescribeLogDirs
  // merges the shards' answers with merge_log_dirs.
  std::vector<log_dir_description> describe_log_dirs(
      const std::optional<std::set<topic_partition>>& wanted,
      const std::function<bool(const topic_partition&)>& owned = {}) const;
  int shard() const { return _options.shard; }

  // KIP-113 (AlterReplicaLogDirs, log_dir_moves.cc), on the owning shard: moves the partition's log to log
  // dir `dir` as Kafka's ReplicaManager.alterReplicaLogDirs does. NONE when the log is there already (a move
  // elsewhere is cancelled), or the move started or goes on; LOG_DIR_NOT_FOUND for a path that is not one
  // of log.dirs; REPLICA_NOT_AVAILABLE for a partition not hosted here (its log will be created in that dir
  // when it comes); KAFKA_STORAGE_ERROR for an offline dir or replica.
  error_code alter_log_dir(const storage::topic_partition& tp, const std::filesystem::path& dir);
  // Kafka's ReplicaAlterLogDirsThread: copies up to `max_bytes` of batches from each moving partition's log
  // to its future log (following the log's truncations and log start offset), and swaps in each future log
  // that caught up (storage::log_manager::promote_future, partition::replace_log). Returns the bytes copied
  // (moving() says whether moves remain).
  int64_t copy_to_future_logs(int64_t max_bytes);
  bool moving() const { return !_moves.empty(); }

 private:
  struct log_move {
    // The future log's producer state: its aborted transactions go to the future log's .txnindex.
    std::unique_ptr<storage::producer_state_manager> producers;
    // copying -> (caught up) its data synced off the shard, the copy going on -> (caught up again)
    // moving_in, the file worker moving it in beside the log -> moved_in, copying on -> (caught up again, and
    // synced as far as the log is) the swap's commit (storage::log_manager::begin_move_in, promote_future).
    enum class stage { copying, moving_in, moved_in } at = stage::copying;
    // A sync of the future log's data running off the shard (a thread of its own: a large log's first sync
    // must not hold up the file worker's other work), and whether one finished at this stage.
    struct sync_round {
      std::atomic<bool> done{false};
      bool ok = true;
      int64_t end_offset = 0;
    };
    std::shared_ptr<sync_round> syncing;
    bool synced = false;
  };
  // The future log synced up to at least `needed` (a sync round started off the shard when it is not): true
  // once it is; an error when a sync failed.
  result<bool> future_synced(log_move& move, storage::partition_log& future, int64_t needed, int64_t now);
  void cancel_move(const storage::topic_partition& tp);
  // A future log the log manager loaded at start-up (a move a stop interrupted) goes on once its replica is
  // created here (Kafka resumes it the same way).
  void resume_move(const storage::topic_partition& tp);
  // One partition's step of copy_to_future_logs; true when the move is over (swapped in or given up).
  bool copy_to_future_log(const storage::topic_partition& tp, log_move& move, int64_t& budget);

  // Aborts when called on a shard other than this manager's (a partition touched from the wrong thread).
  void check_shard() const;

  storage::log_manager& _logs;
  replica_manager_options _options;
  std::map<storage::topic_partition, std::unique_ptr<partition>> _partitions;             // ordered: listings
  std::unordered_map<storage::topic_partition, partition*, topic_partition_hash> _index;  // lookups
  uint64_t _generation = 0;
  std::map<storage::topic_partition, log_move> _moves;
};

}  // namespace mala::replication
