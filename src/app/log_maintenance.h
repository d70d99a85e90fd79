// Periodic work on the node's logs. Every shard runs retention (every log.retention.check.interval.ms) and
// the flush policy (flush.messages / flush.ms) of the logs it owns (replica_placement), on its own timers;
// the fsyncs run on a blocking thread, never on a shard. The recovery-point, log-start-offset and
// high-watermark (replication-offset) checkpoints are written on that blocking thread too, the high
// watermarks first collected from every shard. The storage library itself has no threads or timers; this is
// where the binary wires them.
#pragma once

#include <memory>
#include <vector>

#include "mala/common/config.h"
#include "mala/common/metrics.h"
#include "mala/net/shard_pool.h"
#include "mala/replication/replica_manager.h"
#include "mala/replication/replica_placement.h"
#include "mala/storage/log_manager.h"

namespace mala::app {

// Broker-level log defaults (log.segment.bytes, log.retention.*, ...) as a storage::log_config.
storage::log_config log_defaults_from(const node_config& config);

class log_maintenance {
 public:
  // replicas_by_shard: each shard's replica manager (a hosted replica's high watermark bounds retention:
  // nothing at or above it is deleted; and it is checkpointed with the other offsets).
  log_maintenance(net::shard_pool& shards, storage::log_manager& logs, const node_config& config,
                  replication::replica_placement placement,
                  std::vector<replication::replica_manager*> replicas_by_shard);
  ~log_maintenance();
  // Where each flush's fsyncs are timed (Kafka's LogFlushRateAndTimeMs); before start().
  void time_flushes_into(metrics::shared_histogram& flush_times);
  // Before the shards run, or on shard 0.
  void start();
  // Stops the timers (each on its shard) and waits for in-flight fsyncs and checkpoints; call on shard 0
  // before log_manager::shutdown().
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> _impl;
};

}  // namespace mala::app
