#include "partition_log_impl.h"

#include <algorithm>

#include "mala/common/logging.h"

namespace mala::storage {

namespace {
namespace fs = std::filesystem;
}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Truncation, retention, deletion.

status partition_log::truncate_to(int64_t offset) {
  auto& m = *_impl;
  if (m.offline()) return m.failure;
  return m.fail_on_io_error(m.truncate_to(offset));
}

status partition_log::impl::truncate_to(int64_t offset) {
  auto& m = *this;
  if (offset < 0)
    return status::error(error_code::unknown_server_error, describe(m.tp) + ": negative truncation offset");
  if (offset >= m.log_end_offset) {
    // A leader may have assigned an epoch without appending anything under it (Kafka's truncateTo does this
    // too).
    if (auto st = m.epochs.truncate_from_end(m.log_end_offset); !st.ok())
      return storage_error(m.tp, st.message);
    return status::success();
  }
  if (m.segments.begin()->first > offset) return truncate_fully_and_start_at(offset);
  // The log ends where the last kept batch does (the batch holding `offset` goes whole).
  auto cut_at_active_end = [&m] {
    m.flush_token = impl::new_flush_token();
    m.log_end_offset = m.active().next_offset();
    m.log_start_offset = std::min(m.log_start_offset.load(), m.log_end_offset);
    m.recovery_point = std::min(m.recovery_point.load(), m.log_end_offset);
    m.flush_pending_offset = std::min(m.flush_pending_offset, m.log_end_offset);
    if (auto st = m.epochs.truncate_from_end(m.log_end_offset); !st.ok())
      return storage_error(m.tp, st.message);
    m.new_jitter();
    return status::success();
  };
  // A cut inside the active segment (a follower's divergent tail, the usual truncation): the batches go now,
  // the file cuts on the file worker. Every state a crash can leave before it ran is a prefix of the log as
  // it was (the next append runs the cut first), which the follower truncates again.
  if (m.worker && m.segments.rbegin()->first <= offset) {
    auto later = m.active().truncate_to_later(offset);
    if (!later)
      return storage_error(m.tp, "cannot truncate segment " + offset_file_stem(m.active().base_offset()) +
                                     ": " + later.error().message);
    if (*later) {
      m.post_logging_failure(std::move(*later), "cut the log at its truncation");
      return cut_at_active_end();
    }
  }

  const int64_t now = m.clock();
  status first_error;
  while (m.segments.rbegin()->first > offset) {
    auto node = m.segments.extract(std::prev(m.segments.end()));
    if (auto st = m.schedule_delete(std::move(node.mapped()), now); !st.ok() && first_error.ok())
      first_error = st;
  }
  auto& last = m.active();
  auto cut = last.truncate_to(offset);
  if (!cut)
    return storage_error(
        m.tp, "cannot truncate segment " + offset_file_stem(last.base_offset()) + ": " + cut.error().message);
  // The segment that becomes active again takes appends: its indexes were trimmed when it rolled.
  if (auto st = last.offsets().resize(m.config.segment_index_bytes); !st.ok())
    return storage_error(m.tp, st.message);
  if (auto st = last.times().resize(m.config.segment_index_bytes); !st.ok())
    return storage_error(m.tp, st.message);
  if (auto st = cut_at_active_end(); !st.ok()) return st;
  return first_error;
}

bool partition_log::truncation_pending() const {
  const auto& m = *_impl;
  return !m.segments.empty() && m.active().cut_pending();
}

status partition_log::truncate_fully_and_start_at(int64_t offset) {
  auto& m = *_impl;
  if (m.offline()) return m.failure;
  return m.fail_on_io_error(m.truncate_fully_and_start_at(offset));
}

status partition_log::impl::truncate_fully_and_start_at(int64_t offset) {
  auto& m = *this;
  const int64_t now = m.clock();
  status first_error;
  while (!m.segments.empty()) {
    auto node = m.segments.extract(m.segments.begin());
    if (auto st = m.schedule_delete(std::move(node.mapped()), now); !st.ok() && first_error.ok())
      first_error = st;
  }
  // The new empty segment: the standby the worker made if one is ready (prepare_standby()), else made here.
  if (auto standby = m.adopt_standby_at(offset)) {
    m.segments.emplace(offset, std::move(standby));
  } else {
    auto segment = m.create_segment(offset);
    if (!segment) return segment.error();
    m.segments.emplace(offset, std::move(*segment));
  }
  m.flush_token = new_flush_token();
  m.log_start_offset = offset;
  m.log_end_offset = offset;
  m.recovery_point = offset;
  m.flush_pending_offset = offset;
  m.dir_sync_pending = true;
  m.new_jitter();
  if (auto st = m.epochs.clear(); !st.ok()) return storage_error(m.tp, st.message);
  return first_error;
}

void partition_log::prepare_standby() {
  auto& m = *_impl;
  if (!m.worker || m.standby || m.offline() || m.closed) return;
  m.ask_for_standby();
}

status partition_log::increment_log_start_offset(int64_t offset, int64_t high_watermark) {
  auto& m = *_impl;
  if (m.offline()) return m.failure;
  if (offset > high_watermark || offset > m.log_end_offset) {
    return status::error(error_code::offset_out_of_range,
                         describe(m.tp) + ": cannot raise the log start offset to " + std::to_string(offset) +
                             " beyond the high watermark " + std::to_string(high_watermark));
  }
  if (offset <= m.log_start_offset) return status::success();
  m.log_start_offset = offset;
  if (auto st = m.epochs.truncate_from_start(offset); !st.ok()) return storage_error(m.tp, st.message);
  return status::success();
}

result<int32_t> partition_log::apply_retention(int64_t now_ms, int64_t high_watermark) {
  auto& m = *_impl;
  // The log manager takes the dir offline for a failed retention itself (it is iterating its logs here).
  if (m.offline()) return m.failure;
  m.ask_for_standby_if_roll_by_age_near(now_ms);
  m.discard_standby_if_idle();
  int32_t removed = 0;
  auto run = [&](const std::vector<int64_t>& bases, const char* reason) -> status {
    auto n = m.delete_segments(bases, now_ms, reason);
    if (!n) return n.error();
    removed += *n;
    return status::success();
  };

  // Segments wholly below the log start offset (DeleteRecords, or a start raised by an earlier deletion).
  auto below_start = m.deletable(high_watermark, [&](const log_segment&, const log_segment& next) {
    return next.base_offset() <= m.log_start_offset;
  });
  if (auto st = run(below_start, "log start offset"); !st.ok()) return st;

  if (m.config.cleanup != cleanup_policy::compact) {
    // retention.bytes: drop oldest segments while the log stays at or above the limit without them.
    if (m.config.retention_bytes >= 0) {
      int64_t excess = m.size_bytes() - m.config.retention_bytes;
      if (excess >= 0) {
        auto by_size = m.deletable(high_watermark, [&](const log_segment& segment, const log_segment&) {
          if (excess - segment.size() < 0) return false;
          excess -= segment.size();
          return true;
        });
        if (auto st = run(by_size, "retention.bytes"); !st.ok()) return st;
      }
    }
    // retention.ms: measured from a segment's largest timestamp.
    if (m.config.retention_ms >= 0) {
      auto by_time = m.deletable(high_watermark, [&](const log_segment& segment, const log_segment&) {
        return now_ms - largest_timestamp(segment) > m.config.retention_ms;
      });
      if (auto st = run(by_time, "retention.ms"); !st.ok()) return st;
    }
  }
  return removed;
}

std::optional<cleaning_snapshot> partition_log::snapshot_for_cleaning(
    std::optional<int64_t> checkpoint, int64_t last_stable_offset, int64_t now_ms,
    std::vector<int64_t> producer_last_offsets) {
  auto& m = *_impl;
  if (m.offline() || m.closed || m.config.cleanup == cleanup_policy::delete_segments) return std::nullopt;
  if (m.segments.size() < 2) return std::nullopt;
  std::vector<segment_summary> all;
  all.reserve(m.segments.size());
  for (const auto& [base, segment] : m.segments) {
    segment_summary s;
    s.base_offset = base;
    s.size_bytes = segment->size();
    s.offset_index_bytes = int64_t{segment->offset_index_entries()} * offset_index_entry_size;
    s.time_index_bytes = int64_t{segment->time_index_entries()} * time_index_entry_size;
    s.largest_timestamp = largest_timestamp(*segment);
    s.first_batch_timestamp = segment->first_batch_timestamp();
    all.push_back(s);
  }
  const compaction_settings settings{m.config.min_cleanable_dirty_ratio, m.config.min_compaction_lag_ms,
                                     m.config.max_compaction_lag_ms};
  cleanable_range range = plan_cleanable_range(all, m.log_start_offset, m.log_end_offset, checkpoint,
                                               last_stable_offset, now_ms, settings);
  if (!range.eligible(settings) || range.first_dirty_offset >= range.first_uncleanable_offset)
    return std::nullopt;
  cleaning_snapshot snapshot;
  snapshot.tp = m.tp;
  snapshot.dir = m.dir;
  snapshot.config = m.config;
  snapshot.log_start_offset = m.log_start_offset;
  snapshot.range = range;
  snapshot.producer_last_offsets = std::move(producer_last_offsets);
  auto it = m.floor_segment(m.log_start_offset);
  if (it == m.segments.end()) it = m.segments.begin();
  size_t index = static_cast<size_t>(std::distance(m.segments.cbegin(), it));
  // No file is opened or read here (this runs on the shard; only a segment without any timestamp is
  // stat()ed for its age above): a closed descriptor, the .txnindex files not loaded and any work still
  // pending on the files are left to the cleaner thread (prepare_snapshot_files).
  const auto from_start = it;
  for (; std::next(it) != m.segments.end() && it->first < range.first_uncleanable_offset; ++it, ++index) {
    snapshot.segments.push_back(
        {it->first, it->second->size(), it->second->file_if_open(), it->second->log_path()});
    snapshot.summaries.push_back(all[index]);
  }
  if (snapshot.segments.empty()) return std::nullopt;
  std::vector<aborted_txn> known;
  for (auto t = from_start; t != m.segments.end(); ++t) {
    for (auto& work : t->second->pending_file_work()) snapshot.pending_file_work.push_back(std::move(work));
    auto source = t->second->txn_source();
    // Loaded entries that show no later segment matters end the walk here already.
    const bool complete = source.entries && collect_aborted_txns(*source.entries, m.log_start_offset,
                                                                 range.first_uncleanable_offset, known);
    snapshot.txn_indexes.push_back(std::move(source));
    if (complete) break;
  }
  return snapshot;
}

status partition_log::replace_with_cleaned(cleaned_log& cleaned) {
  auto& m = *_impl;
  if (m.offline()) return m.failure;
  // The log may have changed while the round ran off the shard: every replaced segment must still be here
  // with the size the round read, and nothing may lie between them.
  for (const auto& g : cleaned.groups) {
    // A round over the files of a log that moved to another log dir since (AlterReplicaLogDirs): its
    // segments are not this log's, whatever their offsets.
    if (g.segment && std::filesystem::path(g.segment->log_path()).parent_path().lexically_normal() !=
                         std::filesystem::path(m.dir).lexically_normal()) {
      return status::error(error_code::unknown_server_error,
                           describe(m.tp) + ": the log moved during cleaning; the round is discarded");
    }
    auto it = m.segments.find(g.replaced_bases.front());
    for (size_t i = 0; i < g.replaced_bases.size(); ++i, ++it) {
      if (it == m.segments.end() || it->first != g.replaced_bases[i] ||
          it->second->size() != g.replaced_sizes[i] || std::next(it) == m.segments.end()) {
        return status::error(error_code::unknown_server_error,
                             describe(m.tp) + ": the log changed during cleaning; the round is discarded");
      }
    }
  }
  const int64_t now = m.clock ? m.clock() : system_clock_ms();
  for (auto& g : cleaned.groups) {
    auto& segment = g.segment;
    if (m.worker) {
      // In memory at once; the renames in Kafka's order on the caller's thread or the worker.
      std::vector<std::unique_ptr<log_segment>> old;
      std::vector<log_segment*> replaced;
      for (int64_t base : g.replaced_bases) {
        old.push_back(std::move(m.segments.extract(base).mapped()));
        replaced.push_back(old.back().get());
      }
      auto renames = segment->swap_in_later(replaced);
      m.worker->post([renames] { renames->run(); });
      cleaned.swap_renames.push_back(std::move(renames));
      for (auto& o : old) m.pending_deletes.push_back({now + m.config.file_delete_delay_ms, std::move(o)});
    } else {
      // A failed rename leaves the files as they are for the next load's recovery to complete or roll back
      // (a group's .swap files may already stand for replaced segments gone to .deleted): none is handed
      // back for the caller to delete.
      auto failed = [&](const status& st) {
        cleaned.groups.clear();
        return m.fail(st);
      };
      if (auto st = segment->change_suffix(cleaned_suffix, swap_suffix); !st.ok()) return failed(st);
      for (int64_t base : g.replaced_bases) {
        auto node = m.segments.extract(base);
        if (auto st = m.schedule_delete(std::move(node.mapped()), now); !st.ok()) return failed(st);
      }
      if (auto st = segment->change_suffix(swap_suffix, ""); !st.ok()) return failed(st);
    }
    segment->update_config(m.config);
    m.segments.emplace(segment->base_offset(), std::move(segment));
  }
  m.dir_sync_pending = true;
  cleaned.groups.clear();
  return status::success();
}

void partition_log::delete_expired_files(int64_t now_ms) {
  auto& m = *_impl;
  std::erase_if(m.pending_deletes, [&](impl::pending_delete& p) {
    if (p.due_ms > now_ms) return false;
    if (m.worker) {
      m.post_logging_failure(p.segment->delete_files_later(), "delete segment files");
      return true;
    }
    if (auto st = p.segment->delete_files(); !st.ok()) {
      subsystem_logger("storage")->warn("{}: cannot delete segment files: {}", describe(m.tp), st.message);
    }
    return true;
  });
}

}  // namespace mala::storage
