#include "mala/replication/partition.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "mala/common/logging.h"

namespace mala::replication {
namespace {

std::string describe(const storage::topic_partition& tp) {
  return tp.topic + "-" + std::to_string(tp.partition);
}

constexpr int8_t storage_leader_recovering = 1;  // LeaderRecoveryState.RECOVERING

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::string ids_string(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

void fire(std::vector<waiter_callback> callbacks, error_code code) {
  for (auto& cb : callbacks) {
    if (cb) cb(code);
  }
}

}  // namespace

partition::partition(storage::partition_log* log, uuid topic_id, partition_options options)
    : _log(log), _topic_id(topic_id), _options(std::move(options)) {
  // Kafka starts a partition at leader epoch -1 and partition epoch 0 (nothing applied yet); -1 for both lets
  // the first state of any epoch through.
  _state.leader_epoch = -1;
  _state.partition_epoch = -1;
  int64_t start = _log->log_start_offset();
  int64_t end = _log->log_end_offset();
  _high_watermark = std::clamp(_options.initial_high_watermark.value_or(start), start, end);

  // Kafka's loadProducerState: the newest readable snapshot, then the batches after it.
  auto producers = storage::producer_state_manager::open(_log->dir(), _options.producer_state);
  if (!producers) {
    _load_status =
        status::error(error_code::kafka_storage_error,
                      describe(topic_partition()) + ": producer state: " + producers.error().message);
  } else {
    std::shared_ptr<storage::producer_state_manager> loaded = std::move(*producers);
    if (auto st = loaded->reload(*_log, now_ms()); !st.ok()) {
      _load_status = status::error(error_code::kafka_storage_error,
                                   describe(topic_partition()) + ": producer state: " + st.message);
    } else {
      // Loaded in place; from now on its snapshot files are written and deleted off the shard.
      loaded->set_file_worker(_log->worker());
      _producers = std::move(loaded);
    }
  }
  if (!_load_status.ok()) subsystem_logger("replication")->error("{}", _load_status.message);
  high_watermark_changed();
  _last_producer_expiry_check_ms = now_ms();
  listen_to_rolls();
}

// Kafka snapshots the producer state at every segment roll (UnifiedLog.roll), so that a restart replays at
// most the active segment. Not fsynced here, on the shard: the log syncs it with the flush the roll makes due
// (KAFKA-15046's asynchronous producer snapshot flush; a snapshot lost in a crash is rebuilt from the log).
void partition::listen_to_rolls() {
  _log->set_roll_listener([weak = std::weak_ptr<storage::producer_state_manager>(_producers),
                           tp = topic_partition()](int64_t base) -> std::optional<std::filesystem::path> {
    auto producers = weak.lock();
    if (!producers) return std::nullopt;
    auto written = producers->take_snapshot(base, storage::file_sync::later);
    if (!written.ok()) {
      subsystem_logger("replication")
          ->warn("{}: cannot write the producer snapshot at offset {}: {}", describe(tp), base,
                 written.error().message);
      return std::nullopt;
    }
    return *written;
  });
}

status partition::replace_log(storage::partition_log* log) {
  _log->set_roll_listener({});
  _log = log;
  listen_to_rolls();
  if (!_producers) return status::success();
  if (auto st = _producers->move_to(_log->dir()); !st.ok()) return st;
  auto written = _producers->take_snapshot(_log->log_end_offset(), storage::file_sync::later);
  if (!written.ok()) return written.error();
  return status::success();
}

// The log outlives the partition; its roll listener holds the producer state weakly and goes quiet.
partition::~partition() = default;

const storage::topic_partition& partition::topic_partition() const {
  return _log->partition();
}

int64_t partition::now_ms() const {
  if (_options.clock_ms) return _options.clock_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int32_t partition::min_insync_replicas() const {
  return effective_min_isr(_state.min_insync_replicas, _state.replicas.size());
}

bool partition::under_min_isr() const {
  return _is_leader && static_cast<int64_t>(_state.isr.size()) < min_insync_replicas();
}

bool partition::under_replicated() const {
  return _is_leader && _state.isr.size() < _state.replicas.size();
}

int64_t partition::last_stable_offset() const {
  const auto first_unstable = _producers ? _producers->first_unstable_offset() : std::nullopt;
  if (!first_unstable || *first_unstable >= _high_watermark) return _high_watermark;
  // Kafka raises the first unstable offset to the log start offset (maybeIncrementFirstUnstableOffset).
  return std::max(*first_unstable, _log->log_start_offset());
}

int64_t partition::log_start_offset() const {
  return _log->log_start_offset();
}
int64_t partition::log_end_offset() const {
  return _log->log_end_offset();
}

int64_t partition::low_watermark() const {
  return replication::low_watermark(_log->log_start_offset(), _followers);
}

follower_state* partition::follower(int32_t replica_id) {
  for (auto& f : _followers) {
    if (f.replica_id == replica_id) return &f;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------------------------
// Role changes.

result<state_change> partition::make_leader(const partition_state& state) {
  // The partition epoch may already be ahead (an AlterPartition response can carry it before the metadata log
  // does); an older one is a stale update.
  if (_has_state && state.partition_epoch < _state.partition_epoch) return state_change::stale;

  int64_t now = now_ms();
  bool new_leader = !_is_leader;
  bool new_epoch = !_has_state || state.leader_epoch > _state.leader_epoch;
  int64_t end = _log->log_end_offset();
  if (new_epoch) {
    // Every batch this leader writes carries its epoch; followers find their divergence point through this
    // entry (OffsetForLeaderEpoch / Fetch DivergingEpoch).
    if (auto st = _log->epochs().assign(state.leader_epoch, end); !st.ok()) {
      // The epoch checkpoint is one of the log's files: its dir goes offline like on a failed append.
      return _log->handle_io_error(
          status::error(error_code::kafka_storage_error, describe(topic_partition()) + ": " + st.message));
    }
    _leader_epoch_start_offset = end;
  }

  std::vector<follower_state> followers;
  for (int32_t id : state.replicas) {
    if (id == _options.local_replica_id) continue;
    follower_state before;
    if (auto* existing = follower(id)) before = *existing;
    before.replica_id = id;
    if (new_epoch || new_leader) {
      followers.push_back(reset_on_leader_change(before, id, new_leader, contains(state.isr, id), now, end));
    } else {
      followers.push_back(before);
    }
  }
  _followers = std::move(followers);
  if (_has_state && state.partition_epoch > _state.partition_epoch) {
    // The metadata moved on: whatever change was in flight is answered by it (Kafka drops the pending state).
    _isr_change_in_flight = false;
  }
  if (new_leader || new_epoch) _isr_change_in_flight = false;
  _isr_change_waits_for_metadata = false;
  _state = state;
  _is_leader = true;
  _has_state = true;

  subsystem_logger("replication")
      ->info(
          "{}: leader at epoch {} (partition epoch {}), replicas {}, isr {}, min isr {}, log end {}, hw {}",
          describe(topic_partition()), state.leader_epoch, state.partition_epoch, ids_string(state.replicas),
          ids_string(state.isr), min_insync_replicas(), end, _high_watermark);
  // The ISR may be just this replica now.
  maybe_increment_high_watermark(now);
  complete_waiters();
  return state_change::applied;
}

result<state_change> partition::make_follower(const partition_state& state) {
  if (_has_state && state.partition_epoch < _state.partition_epoch) return state_change::stale;
  _state = state;
  _is_leader = false;
  _has_state = true;
  _followers.clear();
  _leader_epoch_start_offset.reset();
  _isr_change_in_flight = false;
  subsystem_logger("replication")
      ->info("{}: follower of {} at epoch {} (partition epoch {}), log end {}, hw {}",
             describe(topic_partition()), state.leader, state.leader_epoch, state.partition_epoch,
             _log->log_end_offset(), _high_watermark);
  // Delayed produces can no longer complete here; delayed fetches must re-read and find they are not served.
  fail_all_waiters(error_code::not_leader_or_follower);
  return state_change::applied;
}

void partition::stop(error_code error) {
  _is_leader = false;
  _followers.clear();
  fail_all_waiters(error);
}

// ---------------------------------------------------------------------------------------------------------------
// High watermark and waiters.

bool partition::maybe_increment_high_watermark(int64_t now) {
  if (!_is_leader) return false;
  high_watermark_inputs in;
  in.high_watermark = _high_watermark;
  in.leader_log_end_offset = _log->log_end_offset();
  in.isr = _state.isr;
  in.min_insync_replicas = min_insync_replicas();
  in.followers = _followers;
  in.now_ms = now;
  in.replica_lag_time_max_ms = _options.replica_lag_time_max_ms;
  int64_t next = next_high_watermark(in);
  if (next <= _high_watermark) return false;
  set_high_watermark(next);
  return true;
}

void partition::high_watermark_changed() {
  if (_producers) _producers->on_high_watermark_updated(_high_watermark);
}

status partition::index_aborted_txns(const std::vector<storage::completed_txn>& completed) {
  for (const auto& txn : completed) {
    if (!txn.aborted) continue;
    // Kafka's UnifiedLog.append: the abort goes into the index after the data is in the log.
    auto st = _log->append_aborted_txn({.producer_id = txn.producer_id,
                                        .first_offset = txn.first_offset,
                                        .last_offset = txn.last_offset,
                                        .last_stable_offset = txn.last_stable_offset});
    if (!st.ok()) {
      subsystem_logger("replication")
          ->error("{}: cannot index the aborted transaction of producer {} ({}..{}): {}",
                  describe(topic_partition()), txn.producer_id, txn.first_offset, txn.last_offset,
                  st.message);
      return st;
    }
  }
  return status::success();
}

void partition::set_high_watermark(int64_t offset) {
  _high_watermark = offset;
  high_watermark_changed();
  // The epoch's start is reached: "latest" is safe to answer again.
  if (_leader_epoch_start_offset && *_leader_epoch_start_offset <= _high_watermark)
    _leader_epoch_start_offset.reset();
}

void partition::complete_waiters() {
  if (!_is_leader) {
    fail_all_waiters(error_code::not_leader_or_follower);
    return;
  }
  // Offsets count from the high watermark: a produce whose required offset is <= HW is complete.
  auto reached = _hw_waiters.take_up_to(_high_watermark);
  if (reached.empty()) return;
  auto answer = check_enough_replicas_reach_offset(_high_watermark, _high_watermark, _state.isr.size(),
                                                   min_insync_replicas());
  fire(std::move(reached), answer.error);
}

void partition::fail_all_waiters(error_code error) {
  auto produce = _hw_waiters.take_all();
  auto fetch = _data_waiters.take_all();
  fire(std::move(produce), error);
  fire(std::move(fetch), error);
}

waiter_handle partition::add_high_watermark_waiter(int64_t offset, waiter_callback callback) {
  if (!_is_leader) {
    callback(error_code::not_leader_or_follower);
    return {};
  }
  auto check =
      check_enough_replicas_reach_offset(_high_watermark, offset, _state.isr.size(), min_insync_replicas());
  if (check.done) {
    callback(check.error);
    return {};
  }
  uint64_t id = _next_waiter_id++;
  _hw_waiters.add(id, offset, std::move(callback));
  return {id};
}

waiter_handle partition::add_data_waiter(waiter_callback callback) {
  uint64_t id = _next_waiter_id++;
  _data_waiters.add(id, 0, std::move(callback));
  return {id};
}

bool partition::cancel_waiter(waiter_handle handle) {
  if (!handle.valid()) return false;
  return _hw_waiters.cancel(handle.id) || _data_waiters.cancel(handle.id);
}

// ---------------------------------------------------------------------------------------------------------------
// Produce.

result<append_outcome> partition::append(std::span<uint8_t> records, int16_t acks,
                                         storage::append_origin origin,
                                         std::optional<uint64_t> verification_guard) {
  return append_as_leader(records, nullptr, acks, origin, verification_guard);
}

produce_outcome partition::append(produced_batch& batch, int16_t acks) {
  produce_outcome out{append_as_leader(batch.bytes, &batch, acks, storage::append_origin::client),
                      std::nullopt};
  if (!out.appended) {
    const error_code code = out.appended.error().code;
    if (code == error_code::invalid_timestamp || code == error_code::invalid_record) {
      out.record_errors = storage::validate_record_contents(batch.bytes, _log->config(), now_ms());
    }
  }
  return out;
}

result<uint64_t> partition::create_verification_guard(int64_t producer_id, int32_t base_sequence,
                                                      int16_t epoch, bool epoch_bump) {
  if (_log->is_offline()) return _log->offline_error();
  if (!_is_leader) {
    return status::error(
        error_code::not_leader_or_follower,
        describe(topic_partition()) + ": not the leader on " + std::to_string(_options.local_replica_id));
  }
  if (!_producers) return _load_status;
  if (const auto* entry = _producers->find(producer_id); entry && epoch < entry->producer_epoch) {
    return status::error(error_code::invalid_producer_epoch,
                         "Epoch of producer " + std::to_string(producer_id) + " is " + std::to_string(epoch) +
                             ", which is smaller than the last seen epoch " +
                             std::to_string(entry->producer_epoch));
  }
  if (epoch_bump && _producers->has_older_ongoing_txn(producer_id, epoch)) {
    return status::error(error_code::concurrent_transactions,
                         describe(topic_partition()) + ": the previous transaction of producer " +
                             std::to_string(producer_id) + " is still completing");
  }
  return _producers->create_verification_guard(producer_id, base_sequence, epoch, now_ms());
}

result<append_outcome> partition::append_as_leader(std::span<uint8_t> records, produced_batch* batch,
                                                   int16_t acks, storage::append_origin origin,
                                                   std::optional<uint64_t> verification_guard) {
  // An offline replica answers KAFKA_STORAGE_ERROR before anything else, even a duplicate (Kafka's
  // getPartitionOrException comes first).
  if (_log->is_offline()) return _log->offline_error();
  if (!_is_leader) {
    return status::error(
        error_code::not_leader_or_follower,
        describe(topic_partition()) + ": not the leader on " + std::to_string(_options.local_replica_id));
  }
  if (auto code = check_acks_before_append(acks, _state.isr.size(), min_insync_replicas());
      code != error_code::none) {
    return status::error(code, describe(topic_partition()) + ": acks=" + std::to_string(acks) + " with isr " +
                                   ids_string(_state.isr) + " and min.insync.replicas " +
                                   std::to_string(min_insync_replicas()));
  }
  if (!_producers) return _load_status;
  const int64_t now = now_ms();
  maybe_expire_producers(now);
  const bool log_never_written = _log->log_end_offset() == 0;
  // Bytes after a produced batch that make no other batch: the record set is refused here as malformed
  // (CORRUPT_MESSAGE), whatever the producer state would say of the batch.
  const bool whole_batch = batch && batch->bytes.size() == static_cast<size_t>(batch->header.size_in_bytes());
  std::optional<storage::txn_verification> verification;
  if (batch && batch->verification_guard)
    verification = storage::txn_verification{*batch->verification_guard};
  else if (!batch && verification_guard)
    verification = storage::txn_verification{*verification_guard};
  auto checked = whole_batch
                     ? _producers->check(std::span<const protocol::record_batch_header>(&batch->header, 1),
                                         log_never_written, origin, verification ? &*verification : nullptr)
                     : _producers->check_records(records, log_never_written, origin,
                                                 verification ? &*verification : nullptr);
  if (!checked) {
    return status::error(checked.error().code, describe(topic_partition()) + ": " + checked.error().message);
  }
  if (checked->is_duplicate()) {
    // A retry of a batch already in the log (Kafka's UnifiedLog.append with a duplicate): its original
    // offsets and timestamp, nothing written, nobody woken. acks=-1 still waits for those offsets to be
    // committed.
    const auto& dup = *checked->duplicate;
    append_outcome out;
    out.duplicate = true;
    out.appended.first_offset = dup.first_offset;
    out.appended.last_offset = dup.last_offset;
    out.appended.log_append_time = dup.timestamp;
    out.log_start_offset = _log->log_start_offset();
    out.high_watermark = _high_watermark;
    if (acks == -1) {
      out.required_offset = dup.last_offset + 1;
      auto check = check_enough_replicas_reach_offset(_high_watermark, out.required_offset, _state.isr.size(),
                                                      min_insync_replicas());
      out.done = check.done;
      out.error = check.error;
    }
    return out;
  }

  auto appended = batch ? _log->append_as_leader(*batch, _state.leader_epoch)
                        : _log->append_as_leader(records, _state.leader_epoch);
  if (!appended) return appended.error();
  // The batches now carry their offsets (stamped in place); a produced batch's header was stamped with them
  // (a client batch is never a control batch, which update() leaves to on_append).
  if (batch) {
    _producers->update(batch->header, batch->header.base_offset);
  } else {
    (void)index_aborted_txns(_producers->on_append(records));
  }
  return finish_leader_append(*appended, acks, now);
}

result<append_outcome> partition::append_txn_marker(const storage::txn_marker_request& marker) {
  const auto& tp = topic_partition();
  if (_log->is_offline()) return _log->offline_error();
  if (!_is_leader) {
    return status::error(error_code::not_leader_or_follower,
                         describe(tp) + ": not the leader on " + std::to_string(_options.local_replica_id));
  }
  constexpr int16_t acks_all = -1;
  if (auto code = check_acks_before_append(acks_all, _state.isr.size(), min_insync_replicas());
      code != error_code::none) {
    return status::error(code, describe(tp) + ": transaction marker with isr " + ids_string(_state.isr) +
                                   " and min.insync.replicas " + std::to_string(min_insync_replicas()));
  }
  if (!_producers) return _load_status;
  if (auto st = _producers->check_marker(marker); !st.ok()) {
    return status::error(st.code, describe(tp) + ": " + st.message);
  }
  const int64_t now = now_ms();
  auto bytes = storage::encode_txn_marker_batch(
      {.producer_id = marker.producer_id,
       .producer_epoch = marker.producer_epoch,
       .type = marker.commit ? storage::txn_marker_type::commit : storage::txn_marker_type::abort,
       .coordinator_epoch = marker.coordinator_epoch,
       .timestamp = now});
  auto appended = _log->append_as_leader(bytes, _state.leader_epoch);
  if (!appended) return appended.error();
  if (auto st = index_aborted_txns(_producers->on_append(bytes)); !st.ok()) return st;
  return finish_leader_append(*appended, acks_all, now);
}

append_outcome partition::finish_leader_append(const storage::append_result& appended, int16_t acks,
                                               int64_t now) {
  append_outcome out;
  out.appended = appended;
  maybe_increment_high_watermark(now);
  out.log_start_offset = _log->log_start_offset();
  out.high_watermark = _high_watermark;
  if (acks == -1) {
    out.required_offset = appended.last_offset + 1;
    auto check = check_enough_replicas_reach_offset(_high_watermark, out.required_offset, _state.isr.size(),
                                                    min_insync_replicas());
    out.done = check.done;
    out.error = check.error;
  }
  // Followers (and, when the HW moved, consumers) parked on this partition have something new.
  auto fetches = _data_waiters.take_all();
  complete_waiters();
  fire(std::move(fetches), error_code::none);
  return out;
}

result<storage::append_result> partition::append_as_follower(std::span<const uint8_t> records) {
  if (_is_leader || !_has_state) {
    return status::error(
        error_code::not_leader_or_follower,
        describe(topic_partition()) + ": not a follower on " + std::to_string(_options.local_replica_id));
  }
  auto appended = _log->append_as_follower(records);
  if (appended && _producers) {
    if (auto st = index_aborted_txns(_producers->on_append(records)); !st.ok()) return st;
  }
  return appended;
}

status partition::truncate_to(int64_t offset) {
  if (auto st = _log->truncate_to(offset); !st.ok()) return st;
  _high_watermark = std::clamp(_high_watermark, _log->log_start_offset(), _log->log_end_offset());
  // Kafka's truncateTo -> rebuildProducerState: snapshots above the new end go, the rest is replayed (open
  // transactions and the aborted-transaction entries after the snapshot with it).
  if (!_producers) return status::success();
  auto st = _producers->reload(*_log, now_ms());
  high_watermark_changed();
  return st;
}

status partition::truncate_fully_and_start_at(int64_t offset) {
  if (auto st = _log->truncate_fully_and_start_at(offset); !st.ok()) return st;
  _high_watermark = _log->log_end_offset();
  if (_producers) return _producers->truncate_fully_and_start_at(offset);
  return status::success();
}

status partition::close() {
  // An offline log's dir is failing: no file of it is written again (the next start rebuilds the state).
  if (!_producers || _log->is_offline()) return status::success();
  // Not fsynced here: the log manager's shutdown syncs the whole file system once (the snapshot's CRC
  // refuses a torn copy should that not happen).
  auto written = _producers->take_snapshot(_log->log_end_offset(), storage::file_sync::later);
  return written.ok() ? status::success() : written.error();
}

void partition::maybe_expire_producers(int64_t now) {
  // Kafka runs removeExpiredProducers from a scheduler every producer.id.expiration.check.interval.ms; here
  // the leader's appends (the only path that checks sequences) do it at that interval.
  if (now - _last_producer_expiry_check_ms < _options.producer_id_expiration_check_interval_ms) return;
  _last_producer_expiry_check_ms = now;
  if (size_t removed = _producers->remove_expired_producers(now); removed > 0) {
    subsystem_logger("replication")
        ->debug("{}: {} idle producer(s) expired", describe(topic_partition()), removed);
  }
}

void partition::update_high_watermark_from_leader(int64_t leader_high_watermark) {
  if (_is_leader) return;
  // A follower's high watermark is the leader's, but never past what it has itself (Kafka's
  // updateHighWatermark).
  _high_watermark = std::clamp(leader_high_watermark, _log->log_start_offset(), _log->log_end_offset());
  high_watermark_changed();
}

// ---------------------------------------------------------------------------------------------------------------
// Fetch and offsets.

int64_t partition::bound_offset(fetch_bound bound) const {
  switch (bound) {
    case fetch_bound::log_end:
      return _log->log_end_offset();
    case fetch_bound::high_watermark:
      return _high_watermark;
    case fetch_bound::last_stable_offset:
      return last_stable_offset();
  }
  return _high_watermark;
}

result<read_outcome> partition::read(const read_request& request) const {
  const auto& tp = topic_partition();
  if (_log->is_offline()) return _log->offline_error();
  if (auto code = check_current_leader_epoch(request.current_leader_epoch, _state.leader_epoch);
      code != error_code::none) {
    return status::error(code, describe(tp) + ": request leader epoch " +
                                   std::to_string(*request.current_leader_epoch) + ", ours " +
                                   std::to_string(_state.leader_epoch));
  }
  if (!_is_leader) {
    return status::error(error_code::not_leader_or_follower,
                         describe(tp) + ": not the leader on " + std::to_string(_options.local_replica_id));
  }
  if (request.replica_id >= 0 &&
      std::none_of(_followers.begin(), _followers.end(),
                   [&](const follower_state& f) { return f.replica_id == request.replica_id; })) {
    return status::error(
        error_code::not_leader_or_follower,
        describe(tp) + ": replica " + std::to_string(request.replica_id) + " is not a follower");
  }

  read_outcome out;
  out.high_watermark = _high_watermark;
  out.last_stable_offset = last_stable_offset();
  out.log_start_offset = _log->log_start_offset();
  out.log_end_offset = _log->log_end_offset();

  if (request.last_fetched_epoch && *request.last_fetched_epoch >= 0) {
    // Kafka's readRecords: compare the follower's last fetched epoch with our epoch cache (KIP-595).
    auto end = _log->epochs().end_offset_for_epoch(*request.last_fetched_epoch, out.log_end_offset);
    if (end.end_offset == undefined_epoch_offset || end.epoch == no_leader_epoch) {
      return status::error(error_code::offset_out_of_range, describe(tp) +
                                                                ": no end offset for last fetched epoch " +
                                                                std::to_string(*request.last_fetched_epoch));
    }
    if (request.fetch_offset < out.log_start_offset) {
      return status::error(error_code::offset_out_of_range,
                           describe(tp) + ": fetch offset " + std::to_string(request.fetch_offset) +
                               " is below the log start offset " + std::to_string(out.log_start_offset));
    }
    if (end.epoch < *request.last_fetched_epoch || end.end_offset < request.fetch_offset) {
      out.diverging = read_outcome::diverging_epoch{end.epoch, end.end_offset};
      return out;
    }
  }

  int64_t max_offset = request.up_to_log_end
                           ? _log->log_end_offset()
                           : bound_offset(fetch_bound_for(request.replica_id, request.isolation));
  auto data = _log->read(request.fetch_offset, request.max_bytes, max_offset, request.min_one_batch);
  if (!data) return data.error();
  out.data = std::move(data->data);
  if (request.replica_id < 0 && request.isolation == isolation_level::read_committed &&
      !request.up_to_log_end) {
    // Kafka bounds the search by the offset after the bytes read; the read bound (the LSO) gives a superset,
    // which is harmless: consumers apply an entry only to the batches they receive.
    out.aborted_transactions.emplace();
    if (out.data) {
      auto aborted = _log->collect_aborted_transactions(request.fetch_offset, max_offset);
      if (!aborted) return aborted.error();
      out.aborted_transactions = std::move(*aborted);
    }
  }
  return out;
}

result<list_offset_outcome> partition::list_offset(int64_t timestamp,
                                                   std::optional<isolation_level> isolation,
                                                   std::optional<int32_t> current_leader_epoch) const {
  const auto& tp = topic_partition();
  if (_log->is_offline()) return _log->offline_error();
  if (auto code = check_current_leader_epoch(current_leader_epoch, _state.leader_epoch);
      code != error_code::none) {
    return status::error(code, describe(tp) + ": request leader epoch " +
                                   std::to_string(*current_leader_epoch) + ", ours " +
                                   std::to_string(_state.leader_epoch));
  }
  if (!_is_leader) {
    return status::error(error_code::not_leader_or_follower,
                         describe(tp) + ": not the leader on " + std::to_string(_options.local_replica_id));
  }
  int64_t last_fetchable =
      !isolation ? _log->log_end_offset() : bound_offset(fetch_bound_for(consumer_replica_id, *isolation));
  // A new leader whose high watermark has not caught up with its epoch start would answer an offset lower
  // than the previous leader may have given (Kafka's OFFSET_NOT_AVAILABLE, KIP-320/392).
  bool lagging =
      isolation.has_value() && _leader_epoch_start_offset && *_leader_epoch_start_offset > _high_watermark;
  auto not_available = [&] {
    return status::error(error_code::offset_not_available,
                         describe(tp) + ": high watermark " + std::to_string(_high_watermark) +
                             " is behind the start of leader epoch " + std::to_string(_state.leader_epoch));
  };

  list_offset_outcome out;
  if (timestamp == storage::latest_timestamp) {
    if (lagging) return not_available();
    out.found = storage::offset_for_timestamp{-1, last_fetchable, _state.leader_epoch};
    return out;
  }
  if (timestamp == storage::earliest_timestamp || timestamp == storage::earliest_local_timestamp) {
    out.found = _log->find_offset_by_timestamp(timestamp, _log->log_end_offset());
    return out;
  }
  // Looked up to the log end, then bounded here: a hit past the bound is what OFFSET_NOT_AVAILABLE is about.
  if (auto found = _log->find_offset_by_timestamp(timestamp, _log->log_end_offset())) {
    if (found->offset < last_fetchable) {
      out.found = *found;
    } else if (lagging) {
      return not_available();
    }
  }
  return out;
}

result<std::vector<producer_description>> partition::describe_producers() const {
  if (_log->is_offline()) return _log->offline_error();
  // Any replica answers, as Kafka's ReplicaManager.activeProducerState (find-hanging asks each broker about
  // the partitions it hosts): followers keep the producer state through their appends too.
  if (!_producers) return _load_status;
  std::vector<producer_description> out;
  out.reserve(_producers->producer_count());
  for (const auto& [id, entry] : _producers->producers()) {
    out.push_back({.producer_id = id,
                   .producer_epoch = entry.producer_epoch,
                   .last_sequence = entry.last_sequence(),
                   .last_timestamp = entry.last_timestamp,
                   .coordinator_epoch = entry.coordinator_epoch,
                   .current_txn_start_offset = entry.current_txn_first_offset.value_or(-1)});
  }
  std::sort(out.begin(), out.end(), [](const producer_description& a, const producer_description& b) {
    return a.producer_id < b.producer_id;
  });
  return out;
}

status partition::update_follower_fetch_state(const follower_fetch& fetch) {
  const auto& tp = topic_partition();
  auto* f = _is_leader ? follower(fetch.replica_id) : nullptr;
  if (!f) {
    return status::error(
        error_code::not_leader_or_follower,
        describe(tp) + ": cannot record the fetch of replica " + std::to_string(fetch.replica_id));
  }
  int64_t previous_end = f->log_end_offset;
  int64_t previous_low = low_watermark();
  *f = after_follower_fetch(*f, fetch.fetch_offset, fetch.log_start_offset, fetch.fetch_time_ms,
                            fetch.leader_end_offset);
  // ISR expansion (a caught-up follower reaching the HW) goes through AlterPartition; it comes with the
  // fetchers.
  bool moved = previous_end != f->log_end_offset && maybe_increment_high_watermark(fetch.fetch_time_ms);
  bool low_moved = low_watermark() > previous_low;
  if (moved || low_moved) {
    auto fetches = _data_waiters.take_all();
    complete_waiters();
    fire(std::move(fetches), error_code::none);
  }
  return status::success();
}

// ---------------------------------------------------------------------------------------------------------------
// ISR changes.

std::optional<isr_change_proposal> partition::propose_isr_change(
    int64_t now, const std::function<bool(int32_t)>& eligible) {
  if (!_is_leader) return std::nullopt;
  // Which followers may count for the high watermark outside the ISR (Kafka's isReplicaIsrEligible) and for
  // the low watermark (a fenced follower no longer holds a DeleteRecords back), and the high watermark
  // itself: a follower's caught-up time runs out without any event.
  const int64_t previous_low = low_watermark();
  for (follower_state& f : _followers) f.isr_eligible = !eligible || eligible(f.replica_id);
  const bool low_moved = low_watermark() > previous_low;
  if (maybe_increment_high_watermark(now) || low_moved) {
    auto fetches = _data_waiters.take_all();
    complete_waiters();
    fire(std::move(fetches), error_code::none);
  }
  if (_isr_change_in_flight || _isr_change_waits_for_metadata) return std::nullopt;
  const int64_t leader_end = _log->log_end_offset();
  std::vector<int32_t> new_isr;
  for (int32_t id : _state.isr) {
    if (id == _options.local_replica_id) {
      new_isr.push_back(id);
      continue;
    }
    const follower_state* f = follower(id);
    // Kafka's getOutOfSyncReplicas: not caught up within replica.lag.time.max.ms.
    if (f && is_caught_up(*f, leader_end, now, _options.replica_lag_time_max_ms)) new_isr.push_back(id);
  }
  const bool recovering = _state.leader_recovery_state == storage_leader_recovering;
  if (!recovering) {
    // Kafka's isFollowerInSync: at the high watermark and within this leader epoch.
    for (const follower_state& f : _followers) {
      // Only replicas outside the committed ISR join: one just found out of sync is not taken back.
      if (contains(_state.isr, f.replica_id) || f.log_end_offset < 0) continue;
      if (f.log_end_offset < _high_watermark) continue;
      if (_leader_epoch_start_offset && f.log_end_offset < *_leader_epoch_start_offset) continue;
      if (!f.isr_eligible) continue;
      new_isr.push_back(f.replica_id);
    }
  }
  if (!contains(new_isr, _options.local_replica_id))
    new_isr.insert(new_isr.begin(), _options.local_replica_id);
  std::vector<int32_t> sorted_new = new_isr, sorted_old = _state.isr;
  std::sort(sorted_new.begin(), sorted_new.end());
  std::sort(sorted_old.begin(), sorted_old.end());
  if (sorted_new == sorted_old && !recovering) return std::nullopt;
  if (recovering) new_isr = sorted_old.empty() ? std::vector<int32_t>{_options.local_replica_id} : _state.isr;
  _isr_change_in_flight = true;
  subsystem_logger("replication")
      ->info("{}: asking the controller to change the ISR from {} to {}{} (partition epoch {})",
             describe(topic_partition()), ids_string(_state.isr), ids_string(new_isr),
             recovering ? " and mark the leader recovered" : "", _state.partition_epoch);
  return isr_change_proposal{_state.leader_epoch, _state.partition_epoch, std::move(new_isr),
                             /*leader_recovery_state=*/0};
}

void partition::isr_change_answered(const isr_change_answer& answer, int64_t now) {
  if (!_isr_change_in_flight) return;
  _isr_change_in_flight = false;
  if (answer.error != error_code::none) {
    if (answer.error == error_code::fenced_leader_epoch ||
        answer.error == error_code::invalid_update_version ||
        answer.error == error_code::new_leader_elected) {
      _isr_change_waits_for_metadata = true;
    }
    subsystem_logger("replication")
        ->info("{}: ISR change refused: {}", describe(topic_partition()), error_name(answer.error));
    return;
  }
  if (!_is_leader || answer.leader_epoch != _state.leader_epoch ||
      answer.partition_epoch <= _state.partition_epoch) {
    return;  // the metadata got here first (or leadership moved)
  }
  _state.isr = answer.isr;
  _state.partition_epoch = answer.partition_epoch;
  _state.leader_recovery_state = answer.leader_recovery_state;
  subsystem_logger("replication")
      ->info("{}: ISR is now {} (partition epoch {})", describe(topic_partition()), ids_string(_state.isr),
             _state.partition_epoch);
  maybe_increment_high_watermark(now);
  auto fetches = _data_waiters.take_all();
  complete_waiters();
  fire(std::move(fetches), error_code::none);
}

result<delete_records_outcome> partition::delete_records(int64_t offset) {
  const auto& tp = topic_partition();
  if (!_is_leader) {
    return status::error(error_code::not_leader_or_follower,
                         describe(tp) + ": not the leader on " + std::to_string(_options.local_replica_id));
  }
  if (_log->config().cleanup == storage::cleanup_policy::compact) {
    return status::error(error_code::policy_violation,
                         describe(tp) + ": records cannot be deleted with cleanup.policy=compact");
  }
  // DeleteRecordsRequest.HIGH_WATERMARK (-1): delete everything committed.
  int64_t target = offset == -1 ? _high_watermark : offset;
  if (target < 0) {
    return status::error(error_code::offset_out_of_range,
                         describe(tp) + ": invalid DeleteRecords offset " + std::to_string(offset));
  }
  int64_t before = _log->log_start_offset();
  if (auto st = increment_log_start_offset(target); !st.ok()) return st;
  if (_log->log_start_offset() != before) {
    // Fetches parked below the new start must find out they are out of range; followers parked on a long
    // poll answer with the new start, which they take.
    fire(_data_waiters.take_all(), error_code::none);
  }
  return delete_records_outcome{target, low_watermark()};
}

status partition::update_log_start_offset_from_leader(int64_t leader_log_start_offset) {
  if (_is_leader || !_has_state) return status::success();
  // The leader's start never passes its high watermark, nor ours once we took its high watermark (bounded by
  // our log end, which a successful fetch puts at or above the leader's start). Kafka raises
  // OFFSET_OUT_OF_RANGE past the high watermark; bounding it only delays the rest to a later fetch.
  const int64_t target = std::min(leader_log_start_offset, _high_watermark);
  const int64_t before = _log->log_start_offset();
  if (target <= before) return status::success();
  if (auto st = increment_log_start_offset(target); !st.ok()) return st;
  subsystem_logger("replication")
      ->info("{}: log start offset {} -> {}, as leader {} has it", describe(topic_partition()), before,
             _log->log_start_offset(), _state.leader);
  return status::success();
}

status partition::increment_log_start_offset(int64_t offset) {
  if (auto st = _log->increment_log_start_offset(offset, _high_watermark); !st.ok()) {
    // The log start is in memory (the log manager checkpoints it); what fails on disk is the epoch
    // checkpoint, one of the log's files: its dir goes offline as on a failed append.
    if (st.code == error_code::kafka_storage_error) return _log->handle_io_error(st);
    return st;
  }
  if (_producers) _producers->on_log_start_offset_incremented(_log->log_start_offset());
  return status::success();
}

}  // namespace mala::replication
