#include "log_maintenance.h"

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>

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
  c.delete_retention_ms = config.get_long("log.cleaner.delete.retention.ms").value_or(c.delete_retention_ms);
  c.min_cleanable_dirty_ratio =
      config.get_double("log.cleaner.min.cleanable.ratio").value_or(c.min_cleanable_dirty_ratio);
  c.min_compaction_lag_ms = config.get_long("log.cleaner.min.compaction.lag.ms").value_or(0);
  c.max_compaction_lag_ms =
      config.get_long("log.cleaner.max.compaction.lag.ms").value_or(c.max_compaction_lag_ms);
  const auto policy = config.get_list("log.cleanup.policy").value_or(std::vector<std::string>{"delete"});
  const bool compact = std::find(policy.begin(), policy.end(), "compact") != policy.end();
  const bool del = std::find(policy.begin(), policy.end(), "delete") != policy.end();
  c.cleanup = compact ? (del ? storage::cleanup_policy::compact_and_delete : storage::cleanup_policy::compact)
                      : storage::cleanup_policy::delete_segments;
  return c;
}

namespace {

using storage::topic_partition;

// What one shard runs: retention and the flush policy of the logs it owns.
struct shard_timers {
  explicit shard_timers(asio::io_context& ctx) : context(ctx), retention(ctx), flush(ctx) {}
  asio::io_context& context;
  asio::steady_timer retention;
  asio::steady_timer flush;
};

}  // namespace

struct log_maintenance::impl {
  impl(net::shard_pool& pool, storage::log_manager& l, const node_config& config,
       replication::replica_placement p, std::vector<replication::replica_manager*> r)
      : shards(pool),
        logs(l),
        placement(p),
        replicas(std::move(r)),
        checkpoint_timer(pool.context(0)),
        start_checkpoint_timer(pool.context(0)),
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
        flush_check(std::chrono::seconds(1)) {
    for (size_t s = 0; s < shards.size(); ++s)
      timers.push_back(std::make_unique<shard_timers>(shards.context(s)));
  }

  net::shard_pool& shards;
  storage::log_manager& logs;
  replication::replica_placement placement;
  std::vector<replication::replica_manager*> replicas;  // by shard
  std::vector<std::unique_ptr<shard_timers>> timers;    // by shard
  asio::steady_timer checkpoint_timer;                  // shard 0
  asio::steady_timer start_checkpoint_timer;            // shard 0
  std::chrono::milliseconds retention_interval;
  std::chrono::milliseconds checkpoint_interval;
  std::chrono::milliseconds start_checkpoint_interval;
  std::chrono::milliseconds flush_check;
  metrics::shared_histogram* flush_times = nullptr;
  asio::thread_pool blocking{1};
  std::atomic<bool> stopped{false};
  std::shared_ptr<spdlog::logger> log = subsystem_logger("storage");

  replication::replica_manager* replicas_on(size_t shard) const {
    return shard < replicas.size() ? replicas[shard] : nullptr;
  }

  // On `shard`: the high watermark of a replica it hosts.
  std::optional<int64_t> high_watermark_on(size_t shard, const topic_partition& tp) const {
    auto* r = replicas_on(shard);
    if (!r) return std::nullopt;
    if (const auto* p = r->get(tp)) return p->high_watermark();
    return std::nullopt;
  }

  void schedule_retention(size_t shard) {
    auto& timer = timers[shard]->retention;
    timer.expires_after(retention_interval);
    timer.async_wait([this, shard](const std::error_code& ec) {
      if (ec || stopped) return;
      logs.run_retention(
          wall_clock_ms(), [this, shard](const topic_partition& tp) { return high_watermark_on(shard, tp); },
          [this, shard](const topic_partition& tp) { return placement.shard_of(tp) == shard; });
      schedule_retention(shard);
    });
  }

  // On shard 0: the high watermarks are collected from every shard, then the checkpoints are written on the
  // blocking thread; the next round is scheduled once they are.
  asio::awaitable<void> write_checkpoints() {
    auto high_watermarks = std::make_shared<std::map<topic_partition, int64_t>>();
    for (size_t shard = 0; shard < shards.size(); ++shard) {
      auto collected = co_await shards.invoke_on(shard, [this, shard] {
        std::map<topic_partition, int64_t> out;
        if (auto* r = replicas_on(shard)) {
          for (const auto& tp : r->partitions()) {
            if (const auto* p = r->get(tp)) out[tp] = p->high_watermark();
          }
        }
        return out;
      });
      high_watermarks->merge(collected);
    }
    if (stopped) co_return;
    asio::post(blocking, [this, high_watermarks] {
      if (auto st = logs.checkpoint_recovery_points(); !st.ok())
        log->error("recovery point checkpoint: {}", st.message);
      auto lookup = [&](const topic_partition& tp) -> std::optional<int64_t> {
        auto it = high_watermarks->find(tp);
        if (it == high_watermarks->end()) return std::nullopt;
        return it->second;
      };
      if (auto st = logs.checkpoint_high_watermarks(lookup); !st.ok()) {
        log->error("high watermark checkpoint: {}", st.message);
      }
      asio::post(shards.context(0), [this] { schedule_checkpoints(); });
    });
  }

  void schedule_checkpoints() {
    if (stopped) return;
    checkpoint_timer.expires_after(checkpoint_interval);
    checkpoint_timer.async_wait([this](const std::error_code& ec) {
      if (ec || stopped) return;
      asio::co_spawn(shards.context(0), write_checkpoints(), asio::detached);
    });
  }

  // Log start offsets (DeleteRecords, retention, a follower taking its leader's) on their own interval, as
  // Kafka's log.flush.start.offset.checkpoint.interval.ms.
  void schedule_start_offset_checkpoints() {
    if (stopped) return;
    start_checkpoint_timer.expires_after(start_checkpoint_interval);
    start_checkpoint_timer.async_wait([this](const std::error_code& ec) {
      if (ec || stopped) return;
      asio::post(blocking, [this] {
        if (auto st = logs.checkpoint_log_start_offsets(); !st.ok()) {
          log->error("log start offset checkpoint: {}", st.message);
        }
        asio::post(shards.context(0), [this] { schedule_start_offset_checkpoints(); });
      });
    });
  }

  void schedule_flush(size_t shard) {
    auto& timer = timers[shard]->flush;
    timer.expires_after(flush_check);
    timer.async_wait([this, shard](const std::error_code& ec) {
      if (ec || stopped) return;
      const int64_t now = wall_clock_ms();
      auto* r = replicas_on(shard);
      for (const auto& tp : r ? r->partitions() : std::vector<topic_partition>{}) {
        auto* p = r->get(tp);
        if (!p) continue;
        storage::partition_log& plog = p->log();
        auto files = plog.flush_work(now);
        if (files.empty()) continue;
        const int64_t upto = plog.log_end_offset();
        // The answer goes to this log only: a KIP-113 swap may have given the replica another one meanwhile.
        // Its recovery point moves only if no truncation came in between (the sync may have missed what was
        // written again at the cut offsets).
        const storage::partition_log* flushed = &plog;
        const uint64_t token = plog.flush_token();
        asio::post(blocking, [this, shard, tp, files = std::move(files), upto, flushed, token] {
          const auto started = std::chrono::steady_clock::now();
          for (const auto& f : files) {
            if (auto st = f->sync(); !st.ok()) {
              log->error("fsync of {} failed: {}", f->path(), st.message);
              asio::post(timers[shard]->context, [this, shard, tp, st, flushed] {
                auto* owner = replicas_on(shard);
                auto* p = owner ? owner->get(tp) : nullptr;
                if (p && &p->log() == flushed) p->log().mark_failed(st);
              });
              return;
            }
          }
          if (flush_times) {
            flush_times->record(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                          std::chrono::steady_clock::now() - started)
                                                          .count()));
          }
          asio::post(timers[shard]->context, [this, shard, tp, upto, flushed, token] {
            auto* owner = replicas_on(shard);
            auto* p = owner ? owner->get(tp) : nullptr;
            if (p && &p->log() == flushed) p->log().mark_flushed_if_current(upto, token);
          });
        });
      }
      schedule_flush(shard);
    });
  }
};

void log_maintenance::time_flushes_into(metrics::shared_histogram& flush_times) {
  _impl->flush_times = &flush_times;
}

log_maintenance::log_maintenance(net::shard_pool& shards, storage::log_manager& logs,
                                 const node_config& config, replication::replica_placement placement,
                                 std::vector<replication::replica_manager*> replicas_by_shard)
    : _impl(std::make_unique<impl>(shards, logs, config, placement, std::move(replicas_by_shard))) {}

log_maintenance::~log_maintenance() {
  stop();
}

void log_maintenance::start() {
  for (size_t shard = 0; shard < _impl->timers.size(); ++shard) {
    // A timer is armed on its own shard (asio timers are not thread-safe).
    asio::post(_impl->timers[shard]->context, [this, shard] {
      _impl->schedule_retention(shard);
      _impl->schedule_flush(shard);
    });
  }
  asio::post(_impl->shards.context(0), [this] {
    _impl->schedule_checkpoints();
    _impl->schedule_start_offset_checkpoints();
  });
}

void log_maintenance::stop() {
  if (_impl->stopped.exchange(true)) return;
  // Each shard's timers are cancelled there; a timer that fires meanwhile sees `stopped`.
  for (auto& t : _impl->timers) {
    asio::post(t->context, [timers = t.get()] {
      timers->retention.cancel();
      timers->flush.cancel();
    });
  }
  asio::post(_impl->shards.context(0), [impl = _impl.get()] {
    impl->checkpoint_timer.cancel();
    impl->start_checkpoint_timer.cancel();
  });
  _impl->blocking.join();
}

}  // namespace mala::app
