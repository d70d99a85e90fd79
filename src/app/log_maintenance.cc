#include "log_maintenance.h"

#include <chrono>

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "mala/common/logging.h"

namespace mala::app {

namespace {
int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

storage::log_config log_defaults_from(const node_config& config) {
  storage::log_config c;
  c.segment_bytes = config.log_segment_bytes();
  c.segment_ms = config.log_roll_ms();
  c.segment_index_bytes = config.log_index_size_max_bytes();
  c.index_interval_bytes = config.log_index_interval_bytes();
  c.max_message_bytes = config.message_max_bytes();
  c.log_append_time =
      config.get_string("log.message.timestamp.type") == std::optional<std::string>("LogAppendTime");
  c.retention_ms = config.log_retention_ms();
  c.retention_bytes = config.log_retention_bytes();
  c.file_delete_delay_ms = config.get_long("log.segment.delete.delay.ms").value_or(60'000);
  c.flush_messages = config.log_flush_interval_messages();
  c.flush_ms = config.log_flush_interval_ms();
  const auto policy = config.get_list("log.cleanup.policy").value_or(std::vector<std::string>{"delete"});
  const bool compact = std::find(policy.begin(), policy.end(), "compact") != policy.end();
  const bool del = std::find(policy.begin(), policy.end(), "delete") != policy.end();
  c.cleanup = compact ? (del ? storage::cleanup_policy::compact_and_delete : storage::cleanup_policy::compact)
                      : storage::cleanup_policy::delete_segments;
  return c;
}

struct log_maintenance::impl {
  impl(asio::io_context& ctx, storage::log_manager& l, const node_config& config,
       log_maintenance::high_watermark_lookup hw)
      : shard0(ctx),
        logs(l),
        high_watermark(std::move(hw)),
        retention_timer(ctx),
        checkpoint_timer(ctx),
        start_checkpoint_timer(ctx),
        flush_timer(ctx),
        retention_interval(
            std::chrono::milliseconds(config.get_long("log.retention.check.interval.ms").value_or(300'000))),
        checkpoint_interval(std::chrono::milliseconds(std::max<int64_t>(
            1000, config.get_int("log.flush.offset.checkpoint.interval.ms").value_or(60'000)))),
        start_checkpoint_interval(std::chrono::milliseconds(std::max<int64_t>(
            1000, config.get_int("log.flush.start.offset.checkpoint.interval.ms").value_or(60'000)))),
        // Kafka checks flush.ms every log.flush.scheduler.interval.ms (Long.MAX by default: relying on
        // replication) and flush.messages on every append; a one-second check keeps both honest. It runs
        // whatever the broker defaults say: any topic may set flush.messages / flush.ms, at creation or later
        // (an idle log costs a lookup and a few comparisons).
        flush_check(std::chrono::seconds(1)) {}

  asio::io_context& shard0;
  storage::log_manager& logs;
  log_maintenance::high_watermark_lookup high_watermark;
  asio::steady_timer retention_timer;
  asio::steady_timer checkpoint_timer;
  asio::steady_timer start_checkpoint_timer;
  asio::steady_timer flush_timer;
  std::chrono::milliseconds retention_interval;
  std::chrono::milliseconds checkpoint_interval;
  std::chrono::milliseconds start_checkpoint_interval;
  std::chrono::milliseconds flush_check;
  asio::thread_pool blocking{1};
  bool stopped = false;
  std::shared_ptr<spdlog::logger> log = subsystem_logger("storage");

  void schedule_retention() {
    retention_timer.expires_after(retention_interval);
    retention_timer.async_wait([this](const std::error_code& ec) {
      if (ec || stopped) return;
      logs.run_retention(wall_clock_ms(), high_watermark);
      schedule_retention();
    });
  }

  void schedule_checkpoints() {
    checkpoint_timer.expires_after(checkpoint_interval);
    checkpoint_timer.async_wait([this](const std::error_code& ec) {
      if (ec || stopped) return;
      if (auto st = logs.checkpoint_recovery_points(); !st.ok())
        log->error("recovery point checkpoint: {}", st.message);
      if (auto st = logs.checkpoint_high_watermarks(high_watermark); !st.ok()) {
        log->error("high watermark checkpoint: {}", st.message);
      }
      schedule_checkpoints();
    });
  }

  // Log start offsets (DeleteRecords, retention, a follower taking its leader's) on their own interval, as
  // Kafka's log.flush.start.offset.checkpoint.interval.ms.
  void schedule_start_offset_checkpoints() {
    start_checkpoint_timer.expires_after(start_checkpoint_interval);
    start_checkpoint_timer.async_wait([this](const std::error_code& ec) {
      if (ec || stopped) return;
      if (auto st = logs.checkpoint_log_start_offsets(); !st.ok()) {
        log->error("log start offset checkpoint: {}", st.message);
      }
      schedule_start_offset_checkpoints();
    });
  }

  void schedule_flush() {
    flush_timer.expires_after(flush_check);
    flush_timer.async_wait([this](const std::error_code& ec) {
      if (ec || stopped) return;
      const int64_t now = wall_clock_ms();
      for (const auto& tp : logs.partitions()) {
        storage::partition_log* plog = logs.get(tp);
        if (!plog) continue;
        auto files = plog->flush_work(now);
        if (files.empty()) continue;
        const int64_t upto = plog->log_end_offset();
        asio::post(blocking, [this, tp, files = std::move(files), upto] {
          for (const auto& f : files) {
            if (auto st = f->sync(); !st.ok()) {
              log->error("fsync of {} failed: {}", f->path().string(), st.message);
              return;
            }
          }
          asio::post(shard0, [this, tp, upto] {
            if (auto* l = logs.get(tp)) l->mark_flushed(upto);
          });
        });
      }
      schedule_flush();
    });
  }
};

log_maintenance::log_maintenance(asio::io_context& shard0, storage::log_manager& logs,
                                 const node_config& config, high_watermark_lookup high_watermark)
    : _impl(std::make_unique<impl>(shard0, logs, config, std::move(high_watermark))) {}

log_maintenance::~log_maintenance() {
  stop();
}

void log_maintenance::start() {
  _impl->schedule_retention();
  _impl->schedule_checkpoints();
  _impl->schedule_start_offset_checkpoints();
  _impl->schedule_flush();
}

void log_maintenance::stop() {
  if (_impl->stopped) return;
  _impl->stopped = true;
  _impl->retention_timer.cancel();
  _impl->checkpoint_timer.cancel();
  _impl->start_checkpoint_timer.cancel();
  _impl->flush_timer.cancel();
  _impl->blocking.join();
}

}  // namespace mala::app
