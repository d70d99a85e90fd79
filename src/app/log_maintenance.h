// Periodic work on the node's logs, scheduled on shard 0 (which owns every partition log until replication
// assigns partitions to shards): retention every log.retention.check.interval.ms, recovery-point and
// log-start-offset and high-watermark (replication-offset) checkpoints, and the flush policy (flush.messages
// / flush.ms), whose fsyncs run on a blocking thread, never on a shard. The storage library itself has no
// threads or timers; this is where the binary wires them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include <asio/io_context.hpp>
#include <asio/thread_pool.hpp>

#include "mala/common/config.h"
#include "mala/storage/log_manager.h"

namespace mala::app {

// Broker-level log defaults (log.segment.bytes, log.retention.*, ...) as a storage::log_config.
storage::log_config log_defaults_from(const node_config& config);

class log_maintenance {
 public:
  // The high watermark of a partition replica this node hosts (nullopt: not hosted); called on shard 0. It
  // bounds retention (nothing at or above the high watermark is deleted) and is checkpointed with the other
  // offsets.
  using high_watermark_lookup = std::function<std::optional<int64_t>(const storage::topic_partition&)>;

  log_maintenance(asio::io_context& shard0, storage::log_manager& logs, const node_config& config,
                  high_watermark_lookup high_watermark);
  ~log_maintenance();
  void start();
  // Cancels the timers and waits for in-flight fsyncs; call on shard 0 before log_manager::shutdown().
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> _impl;
};

}  // namespace mala::app
