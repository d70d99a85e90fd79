// All partition logs of a node across its log.dirs: loads them at start-up (recovering the ones a crash left
// unclean), creates and deletes partitions, writes the dir-level checkpoints (recovery points, log start
// offsets), runs retention and file deletion when asked, and writes the clean-shutdown marker on a clean
// stop. A log dir that fails (disk full, permissions, corrupt files it cannot recover) goes offline with its
// partitions instead of taking the process down.
//
// A failed write, sync or truncation inside a partition_log takes its dir offline at once (the log's failure
// listener calls back into the manager), as Kafka's LogDirFailureChannel does; the process keeps serving the
// other dirs.
//
// Threads: any thread may call the manager (the shards create, remove and look up the logs they own; the
// checkpoints are written from a blocking thread); it locks for itself, and no data-path call takes that
// lock (a replica holds its log). Each partition_log it hands out is used only by the partition's owning
// shard (see partition_log.h), except log_start_offset() and recovery_point(), which the checkpoints read.
// A log's I/O failure takes its dir offline from that shard; the dir's other logs are stopped on their own
// shards (log_manager_options::run_on_owner). Loading uses a small pool of threads
// (num.recovery.threads.per.data.dir per dir).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/result.h"
#include "mala/common/uuid.h"
#include "mala/storage/log_config.h"
#include "mala/storage/partition_log.h"

namespace mala::storage {

struct log_dir_status {
  std::filesystem::path path;
  bool online = true;
  std::string error;  // why it went offline
  int32_t partitions = 0;
};

struct log_manager_options {
  std::vector<std::filesystem::path> dirs;
  log_config defaults;  // broker-level defaults (topic overrides come with create()/update_config())
  int32_t recovery_threads_per_dir = 1;  // num.recovery.threads.per.data.dir
  std::function<int64_t()> clock_ms;     // injectable for tests
  // Per-topic config for partitions found on disk at start-up; defaults when unset.
  std::function<log_config(const std::string& topic)> topic_config;
};

// The KRaft metadata topic. Its partition dir (__cluster_metadata-0) may sit in a log dir, but it is the
// controller's metadata log: the log manager never loads or serves it.
inline constexpr std::string_view metadata_topic_dir_name = "__cluster_metadata";

class log_manager {
 public:
  static result<std::unique_ptr<log_manager>> open(log_manager_options options);
  ~log_manager();

  partition_log* get(const topic_partition& tp) const;
  std::vector<topic_partition> partitions() const;
  // The log dir holding each partition, as its index in log_manager_options::dirs, for the partitions of
  // online dirs. Any thread.
  std::map<topic_partition, size_t> log_dir_index_of_partitions() const;
  // Creates the partition's log in the online dir holding the fewest partitions (or returns the existing
  // one).
  result<partition_log*> create(const topic_partition& tp, const uuid& topic_id, const log_config& config);
  // Closes the log, renames its directory to <topic>-<partition>.<uuid>-delete and removes it in the
  // background (its future log too, if it has one).
  status remove(const topic_partition& tp);

  // KIP-113 (AlterReplicaLogDirs): moving a partition's log to another of the node's log dirs, as Kafka's
  // LogManager does it with a "future" log that the owning shard fills with the current log's batches.
  // The index of `dir` among the log dirs (compared normalized), nullopt when it is not one of them.
  std::optional<size_t> dir_index(const std::filesystem::path& dir) const;
  // The index of the dir holding the partition's log / its future log.
  std::optional<size_t> dir_index_of(const topic_partition& tp) const;
  std::optional<size_t> future_dir_index_of(const topic_partition& tp) const;
  bool dir_online(size_t index) const;
  // Where create() puts the partition's log when it comes (Kafka's maybeUpdatePreferredLogDir: a move asked
  // for before the replica exists); used once.
  void set_preferred_dir(const topic_partition& tp, size_t index);
  // An empty log in <dir>/<topic>-<partition>.<uuid>-future with the current log's topic id, or the future
  // log already there (also one loaded at start-up: a move a stop interrupted, which the replica resumes); a
  // future log in another dir is removed first. Only for a partition with a log of its own in another online
  // dir. KAFKA_STORAGE_ERROR when it cannot be created (the dir goes offline).
  result<partition_log*> create_future(const topic_partition& tp, size_t index, const log_config& config);
  partition_log* get_future(const topic_partition& tp) const;
  // Closes the future log and deletes it in the background (the move is cancelled).
  status remove_future(const topic_partition& tp);
  // KIP-113's swap (Kafka's replaceCurrentWithFutureLog) in two steps, so that the owning shard syncs
  // nothing. First, once the future log has caught up, begin_move_in(): the file worker closes it with its
  // data synced, marks it complete (a synced mala-swap-ready file), renames its dir <topic>-<partition>
  // beside the partition's log in the other dir, syncs that dir and opens the log there again. Meanwhile
  // get_future() is null, describe_future() gives what it held, and the partition appends on to its log.
  // finish_move_in() is null while the worker is at it, then the future log at its new path (the copy goes
  // on from its end), or the failure (the future log is gone; an I/O error takes its dir offline). A stop
  // meanwhile leaves two <topic>-<partition> dirs, the marked one a copy the next load resumes.
  status begin_move_in(const topic_partition& tp);
  result<partition_log*> finish_move_in(const topic_partition& tp);
  struct future_description {
    std::filesystem::path dir;
    int64_t size_bytes = 0;
    int64_t log_end_offset = 0;
  };
  std::optional<future_description> describe_future(const topic_partition& tp) const;
  // Then, once the moved-in future log has caught up again, in the same step as that last copy, the commit:
  // one rename on the calling shard, the partition's log dir to <topic>-<partition>.<uuid>-delete (removed
  // in the background). The future log is the partition's log from then on and is returned; the replaced
  // one is closed by the worker (a pointer to it stays valid but must not be used), which then syncs the old
  // dir, removes the marker and syncs the new dir. A stop before those syncs leaves the marked log alone, or
  // both logs with the marked one a copy: the next load takes the one the renames that reached the disk
  // say. A failed rename takes the old dir offline.
  result<partition_log*> promote_future(const topic_partition& tp);

  status checkpoint_recovery_points();
  status checkpoint_log_start_offsets();
  // Writes replication-offset-checkpoint in every online dir: the high watermark of each partition for which
  // `high_watermark` has one (the replicas this node hosts). Read back at the next start-up through
  // checkpointed_high_watermark(), so a restarted replica does not expose less than it had committed.
  status checkpoint_high_watermarks(
      const std::function<std::optional<int64_t>(const topic_partition&)>& high_watermark);
  // The high watermark replication-offset-checkpoint held for the partition at start-up.
  std::optional<int64_t> checkpointed_high_watermark(const topic_partition& tp) const;
  // Runs apply_retention and delete_expired_files on every online log for which owned(tp) holds (all when
  // unset: the caller owns them); high_watermark(tp) bounds deletions (nullopt: the log end offset).
  void run_retention(int64_t now_ms,
                     const std::function<std::optional<int64_t>(const topic_partition&)>& high_watermark,
                     const std::function<bool(const topic_partition&)>& owned = {});
  // Flushes and closes every log, writes the checkpoints and, per dir, the clean-shutdown marker. The marker
  // holds the broker epoch, as Kafka 3.7+ writes it (KIP-966: the next registration reports it as the
  // previous epoch of a clean shutdown); -1 when unknown.
  status shutdown(int64_t broker_epoch = -1);

  std::vector<log_dir_status> dirs() const;
  // Takes a dir offline (an I/O error on one of its files): its partitions stop being served, their logs are
  // released without touching their files, and the dir gets no clean-shutdown marker (the next start
  // recovers it). A partition of an offline dir is not created again elsewhere (KAFKA_STORAGE_ERROR).
  void mark_offline(const std::filesystem::path& dir, const std::string& error);
  // Whether this partition's log was in a dir that went offline (its replica on this node is offline). Any
  // thread.
  bool is_offline(const topic_partition& tp) const;
  // Called (one listener, on the thread that took the dir offline, after its logs stopped) with the dir and
  // the partitions it held; the node stops their replicas (Kafka's ReplicaManager.handleLogDirFailure).
  void set_offline_listener(
      std::function<void(const std::filesystem::path& dir, const std::vector<topic_partition>& partitions)>
          listener);
  // Runs fn on the thread that owns the partition's log (now, or later on that thread): how a failed dir
  // stops logs that other shards are using. Unset: in place (one thread owns every log). Set it before the
  // shards run.
  void set_run_on_owner(std::function<void(const topic_partition& tp, std::function<void()> fn)> run);
  // Load statistics, for the start-up log line and benchmarks.
  struct load_report {
    int32_t partitions = 0;
    int32_t recovered = 0;  // partitions scanned because the dir was not cleanly shut down
    int64_t truncated_bytes = 0;
    int64_t elapsed_ms = 0;
    // The broker epoch all the clean-shutdown markers held (KIP-966); -1 if a dir is offline, had no marker
    // or a marker without an epoch, or the dirs disagree.
    int64_t previous_broker_epoch = -1;
  };
  const load_report& loaded() const;
  // The file worker every log gets (file_worker.h): rolls' standby segments, renames, index trims, removed
  // segments, producer snapshots. Tests wait for its jobs.
  const std::shared_ptr<file_worker>& worker() const;

 private:
  log_manager() = default;
  struct impl;
  std::unique_ptr<impl> _impl;
};

}  // namespace mala::storage
