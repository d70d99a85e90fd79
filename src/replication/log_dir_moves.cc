// KIP-113: moving a replica's log to another log dir of the node (AlterReplicaLogDirs), as Kafka's
// ReplicaManager.alterReplicaLogDirs and ReplicaAlterLogDirsThread do it. The log manager makes an empty
// "future" log in the target dir; the owning shard copies the partition's batches into it a slice at a time
// (the replica keeps serving from its log meanwhile), follows the log's truncations and log start offset.
// Once the future log has caught up, the log manager's file worker moves it in beside the log (synced,
// marked, renamed <topic>-<partition>, opened there again) while the replica appends on; once it has caught
// up again, the swap commits: no append can come between the last copy and the commit, both run in one step
// of the shard, and the commit is one rename there.
#include <algorithm>
#include <chrono>
#include <functional>
#include <system_error>
#include <thread>

#include "mala/common/logging.h"
#include "mala/protocol/record_batch.h"
#include "mala/replication/replica_manager.h"
#include "mala/storage/leader_epoch_cache.h"

namespace mala::replication {

namespace {

std::string describe(const storage::topic_partition& tp) {
  return tp.topic + "-" + std::to_string(tp.partition);
}

// One read of the partition's log copied into the future log: at most this much.
constexpr int32_t copy_read_bytes = 1 << 20;

}  // namespace

error_code replica_manager::alter_log_dir(const storage::topic_partition& tp,
                                          const std::filesystem::path& dir) {
  check_shard();
  const auto index = _logs.dir_index(dir);
  if (!index) return error_code::log_dir_not_found;
  const size_t dir_index = *index;
  if (!_logs.dir_online(dir_index)) return error_code::kafka_storage_error;
  partition* p = get(tp);
  if (!p) {
    // Kafka's maybeUpdatePreferredLogDir: the replica is created in that dir when it comes.
    _logs.set_preferred_dir(tp, dir_index);
    return error_code::replica_not_available;
  }
  if (_logs.is_offline(tp) || p->log().is_offline()) return error_code::kafka_storage_error;
  const auto current = _logs.dir_index_of(tp);
  if (!current) return error_code::kafka_storage_error;
  if (*current == dir_index) {
    cancel_move(tp);
    return error_code::none;
  }
  if (_moves.contains(tp) && _logs.future_dir_index_of(tp) == dir_index) return error_code::none;
  cancel_move(tp);
  auto future = _logs.create_future(tp, dir_index, p->log().config());
  if (!future) return future.error().code;
  auto producers = storage::producer_state_manager::open((*future)->dir(), _options.producer_state);
  if (!producers) {
    (void)_logs.remove_future(tp);
    return error_code::kafka_storage_error;
  }
  const int64_t start = p->log().log_start_offset();
  if (auto st = (*future)->truncate_fully_and_start_at(start); !st.ok()) {
    (void)_logs.remove_future(tp);
    return st.code;
  }
  (void)(*producers)->truncate_fully_and_start_at(start);
  _moves[tp] = log_move{std::move(*producers)};
  subsystem_logger("replication")
      ->info("{}: moving the log to another log dir, from offset {} ({} bytes)", describe(tp), start,
             p->log().size_bytes());
  return error_code::none;
}

void replica_manager::cancel_move(const storage::topic_partition& tp) {
  if (_moves.erase(tp) == 0) return;
  if (auto st = _logs.remove_future(tp); !st.ok()) {
    subsystem_logger("replication")->warn("{}: cannot remove the future log: {}", describe(tp), st.message);
  }
}

void replica_manager::resume_move(const storage::topic_partition& tp) {
  storage::partition_log* future = _logs.get_future(tp);
  if (!future || _moves.contains(tp)) return;
  const auto now = _options.clock_ms ? _options.clock_ms()
                                     : std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count();
  // Its producer state (and .txnindex) rebuilt from what it holds; the copy goes on from its end.
  auto producers = storage::producer_state_manager::open(future->dir(), _options.producer_state);
  if (producers) {
    if (auto st = (*producers)->reload(*future, now); st.ok()) {
      subsystem_logger("replication")
          ->info("{}: resuming the move to another log dir from offset {}", describe(tp),
                 future->log_end_offset());
      _moves[tp] = log_move{std::move(*producers)};
      return;
    }
  }
  subsystem_logger("replication")
      ->warn("{}: the interrupted move cannot go on: its future log goes", describe(tp));
  (void)_logs.remove_future(tp);
}

result<bool> replica_manager::future_synced(log_move& move, storage::partition_log& future, int64_t needed,
                                            int64_t now) {
  if (move.synced || future.recovery_point() >= needed) return true;
  if (!move.syncing) {
    auto work = future.sync_all_work(now);
    if (!work) return work.error();
    move.syncing = std::make_shared<log_move::sync_round>();
    move.syncing->end_offset = work->end_offset;
    std::function<void()> sync = [round = move.syncing, files = std::move(work->files)] {
      for (const auto& f : files) {
        if (!f->sync().ok()) {
          round->ok = false;
          break;
        }
      }
      round->done.store(true, std::memory_order_release);
    };
    try {
      std::thread(sync).detach();
    } catch (const std::system_error&) {
      _logs.worker()->post(std::move(sync));  // no thread to be had: the file worker does it
    }
    return false;
  }
  if (!move.syncing->done.load(std::memory_order_acquire)) return false;
  auto round = std::move(move.syncing);
  if (!round->ok) return status::error(error_code::kafka_storage_error, "cannot sync the future log");
  future.mark_flushed(round->end_offset);
  move.synced = true;
  return true;
}

int64_t replica_manager::copy_to_future_logs(int64_t max_bytes) {
  check_shard();
  int64_t budget = max_bytes;
  for (auto it = _moves.begin(); it != _moves.end();) {
    const auto tp = it->first;
    if (copy_to_future_log(tp, it->second, budget)) {
      it = _moves.erase(it);
    } else {
      ++it;
    }
  }
  return max_bytes - budget;
}

bool replica_manager::copy_to_future_log(const storage::topic_partition& tp, log_move& move,
                                         int64_t& budget) {
  auto log = subsystem_logger("replication");
  partition* p = get(tp);
  auto give_up = [&](const std::string& why) {
    log->warn("{}: the move to another log dir stops: {}", describe(tp), why);
    (void)_logs.remove_future(tp);
    return true;
  };
  if (!p) return give_up("the replica is gone");
  if (move.at == log_move::stage::moving_in) {
    auto moved_in = _logs.finish_move_in(tp);
    if (!moved_in) return give_up(moved_in.error().message);
    if (!*moved_in) return false;  // the worker is still at it
    if (auto st = move.producers->move_to((*moved_in)->dir()); !st.ok()) return give_up(st.message);
    move.at = log_move::stage::moved_in;
    log->info("{}: the future log moved in beside the log, as {}; the copy takes what came meanwhile",
              describe(tp), (*moved_in)->dir().string());
  }
  storage::partition_log* future = _logs.get_future(tp);
  if (!future) return give_up("the future log is gone (its log dir failed?)");
  storage::partition_log& current = p->log();
  if (current.is_offline() || future->is_offline()) return give_up("a log is offline");
  const auto now = _options.clock_ms ? _options.clock_ms()
                                     : std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count();

  // The log was truncated under the copy (a new leader): the future log goes back to where they agree, as a
  // follower does with its leader's epochs.
  int64_t agreed = std::min(future->log_end_offset(), current.log_end_offset());
  if (auto epoch = future->epochs().latest_epoch()) {
    const auto end = current.epochs().end_offset_for_epoch(*epoch, current.log_end_offset());
    if (end.epoch != *epoch || end.end_offset < 0) {
      agreed = std::min(agreed, std::max<int64_t>(end.end_offset, future->log_start_offset()));
    } else {
      agreed = std::min(agreed, end.end_offset);
    }
  }
  if (agreed < future->log_end_offset()) {
    log->info("{}: the log was truncated during its move: the future log goes back to offset {}",
              describe(tp), agreed);
    if (auto st = future->truncate_to(agreed); !st.ok()) return give_up(st.message);
    if (auto st = move.producers->reload(*future, now); !st.ok()) return give_up(st.message);
    // A sync under way covered what was cut: the offsets written again are not synced by it.
    move.syncing.reset();
    move.synced = false;
  }
  // Its log start offset follows the log's (retention, DeleteRecords).
  const int64_t start = current.log_start_offset();
  if (start > future->log_end_offset()) {
    if (auto st = future->truncate_fully_and_start_at(start); !st.ok()) return give_up(st.message);
    (void)move.producers->truncate_fully_and_start_at(start);
  } else if (start > future->log_start_offset()) {
    if (auto st = future->increment_log_start_offset(start, future->log_end_offset()); !st.ok())
      return give_up(st.message);
    move.producers->on_log_start_offset_incremented(start);
  }

  while (budget > 0 && future->log_end_offset() < current.log_end_offset()) {
    const int64_t from = future->log_end_offset();
    const auto want = static_cast<int32_t>(std::min<int64_t>(copy_read_bytes, budget));
    auto read = current.read(from, want, current.log_end_offset(), true);
    if (!read) return give_up(read.error().message);
    if (!read->data || read->data->size == 0) break;
    auto bytes = read->data->file->read(read->data->position, read->data->size);
    if (!bytes) return give_up(bytes.error().message);
    const auto header = protocol::parse_batch_header(*bytes);
    if (!header) return give_up("unreadable batch at offset " + std::to_string(from));
    const int64_t base = header->base_offset;
    if (base < from) {
      // The future log starts inside this batch (a log start offset inside a batch): it takes the whole
      // batch, as a follower does, and raises its start again after.
      if (future->log_end_offset() != future->log_start_offset()) {
        return give_up("batch at " + std::to_string(base) + " overlaps the copy at " + std::to_string(from));
      }
      if (auto st = future->truncate_fully_and_start_at(base); !st.ok()) return give_up(st.message);
      (void)move.producers->truncate_fully_and_start_at(base);
    }
    auto appended = future->append_as_follower(*bytes);
    if (!appended) return give_up(appended.error().message);
    for (const auto& txn : move.producers->on_append(*bytes)) {
      if (!txn.aborted) continue;
      auto st = future->append_aborted_txn({.producer_id = txn.producer_id,
                                            .first_offset = txn.first_offset,
                                            .last_offset = txn.last_offset,
                                            .last_stable_offset = txn.last_stable_offset});
      if (!st.ok()) return give_up(st.message);
    }
    if (base < from && start > future->log_start_offset()) {
      if (auto st = future->increment_log_start_offset(start, future->log_end_offset()); !st.ok())
        return give_up(st.message);
    }
    budget -= static_cast<int64_t>(bytes->size());
  }
  if (future->log_end_offset() != current.log_end_offset()) return false;

  // Caught up. First its data is synced off the shard (the copy goes on meanwhile), so that the move-in's
  // close has little left to sync; then the file worker moves the future log in beside the log (its syncs
  // and renames off the shard) while the replica serves on, and the copy catches up with what came meanwhile.
  if (move.at == log_move::stage::copying) {
    auto synced = future_synced(move, *future, future->log_end_offset(), now);
    if (!synced) return give_up(synced.error().message);
    if (!*synced) return false;
    if (auto st = _logs.begin_move_in(tp); !st.ok()) return give_up(st.message);
    move.at = log_move::stage::moving_in;
    move.synced = false;
    return false;
  }
  // Then the swap's commit, in this same step (no append comes between). What the log had synced must be
  // synced in the future log first: once the commit's rename is on disk, a power loss keeps only the future
  // log. One round (appends synced meanwhile are synced by the worker right after the commit).
  if (!move.synced && future->recovery_point() < current.recovery_point()) {
    auto synced = future_synced(move, *future, current.recovery_point(), now);
    if (!synced) return give_up(synced.error().message);
    if (!*synced) return false;
  }
  const int64_t end = current.log_end_offset();
  auto replaced = _logs.promote_future(tp);
  if (!replaced) {
    log->error("{}: the future log could not replace the log: {}", describe(tp), replaced.error().message);
    p->stop(error_code::kafka_storage_error);
    return true;
  }
  if (auto st = p->replace_log(*replaced); !st.ok()) {
    log->warn("{}: the producer state after the move: {}", describe(tp), st.message);
  }
  log->info("{}: log moved to {} ({} offsets up to {})", describe(tp),
            (*replaced)->dir().parent_path().string(), end - (*replaced)->log_start_offset(), end);
  return true;
}

}  // namespace mala::replication
