// The log cleaner's threads (Kafka's LogCleaner and LogCleanerManager): log.cleaner.threads threads, off the
// request shards, each with its share of log.cleaner.dedupe.buffer.size as its key map. A thread asks every
// shard for a snapshot of each compacted log it owns that is dirty enough (storage::partition_log::
// snapshot_for_cleaning, bounded by the replica's high watermark, with its idempotent producers' last
// batches), cleans the dirtiest one (storage::clean_log), has the owning shard swap the new segments in (one
// task per group of segments, as Kafka swaps each group on its own, so that the shard serves requests between
// a group's renames and the next's), and
// records where the log's dirty part now starts in the log dir's cleaner-offset-checkpoint. With nothing to
// clean it sleeps log.cleaner.backoff.ms. A log whose clean failed on a corrupt batch is left alone until the
// next start (a log line says why); the log keeps serving. log.cleaner.io.max.bytes.per.second throttles the
// bytes read and written by all threads together.
#pragma once

#include <memory>
#include <vector>

#include "mala/common/config.h"
#include "mala/net/shard_pool.h"
#include "mala/replication/replica_manager.h"
#include "mala/storage/log_manager.h"

namespace mala::app {

class log_cleaning {
 public:
  log_cleaning(net::shard_pool& shards, storage::log_manager& logs, const node_config& config,
               std::vector<replication::replica_manager*> replicas_by_shard);
  ~log_cleaning();
  // Starts the threads (log.cleaner.enable).
  void start();
  // Stops the threads (a round in progress is abandoned: its .cleaned files are deleted) and waits for them;
  // before log_manager::shutdown().
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> _impl;
};

}  // namespace mala::app
