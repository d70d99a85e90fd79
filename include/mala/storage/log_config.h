// Per-partition log settings: Kafka's topic-level configs (segment.bytes, retention.ms, ...) resolved against
// the broker defaults (log.segment.bytes, log.retention.hours, ...). A plain value type; each partition_log
// keeps its own copy and takes a new one through update_config() (topic configs change without a restart).
#pragma once

#include <cstdint>
#include <limits>

namespace mala::storage {

enum class cleanup_policy : uint8_t { delete_segments, compact, compact_and_delete };

struct log_config {
  int32_t segment_bytes = 1 << 30;                 // segment.bytes
  int64_t segment_ms = 7LL * 24 * 3600 * 1000;     // segment.ms
  int64_t segment_jitter_ms = 0;                   // segment.jitter.ms
  int32_t segment_index_bytes = 10 * 1024 * 1024;  // segment.index.bytes
  int32_t index_interval_bytes = 4096;             // index.interval.bytes
  int32_t max_message_bytes = 1024 * 1024 + 12;    // max.message.bytes (a whole batch, as Kafka counts it)
  bool log_append_time = false;                    // message.timestamp.type=LogAppendTime
  // How far a CreateTime record timestamp may lie before / after the broker's clock (Kafka 4.x defaults: no
  // bound in the past, one hour in the future since KIP-1030), message.timestamp.before.max.ms and
  // message.timestamp.after.max.ms; beyond either, Produce answers INVALID_TIMESTAMP.
  int64_t message_timestamp_before_max_ms = std::numeric_limits<int64_t>::max();  // ...before.max.ms
  int64_t message_timestamp_after_max_ms = 3'600'000;                             // ...after.max.ms
  int64_t retention_ms = 7LL * 24 * 3600 * 1000;                        // retention.ms; -1 = unlimited
  int64_t retention_bytes = -1;                                         // retention.bytes; -1 = unlimited
  int64_t file_delete_delay_ms = 60'000;                                // file.delete.delay.ms
  int64_t flush_messages = std::numeric_limits<int64_t>::max();         // flush.messages
  int64_t flush_ms = std::numeric_limits<int64_t>::max();               // flush.ms
  cleanup_policy cleanup = cleanup_policy::delete_segments;             // cleanup.policy
  int64_t delete_retention_ms = 24LL * 3600 * 1000;                     // delete.retention.ms
  double min_cleanable_dirty_ratio = 0.5;                               // min.cleanable.dirty.ratio
  int64_t min_compaction_lag_ms = 0;                                    // min.compaction.lag.ms
  int64_t max_compaction_lag_ms = std::numeric_limits<int64_t>::max();  // max.compaction.lag.ms
};

}  // namespace mala::storage
