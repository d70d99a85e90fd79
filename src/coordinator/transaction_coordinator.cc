#include "mala/coordinator/transaction_coordinator.h"

#include <algorithm>
#include <regex>
#include <utility>

#include "mala/common/logging.h"
#include "mala/coordinator/group_coordinator.h"
#include "mala/coordinator/group_placement.h"
#include "mala/coordinator/transaction_records.h"

namespace mala::coordinator {

namespace {

constexpr const char* abort_timer_key = "txn-abort-timed-out";
constexpr const char* expire_timer_key = "txn-expire-ids";

std::string marker_timer_key(const std::string& transactional_id) {
  return "txn-markers/" + transactional_id;
}
std::string complete_timer_key(const std::string& transactional_id) {
  return "txn-complete/" + transactional_id;
}

// What the marker channel does with a leader's answer (TransactionMarkerRequestCompletionHandler).
enum class marker_outcome : uint8_t { written, retry, drop_transaction, drop_partition };

marker_outcome classify_marker_error(error_code e) {
  switch (e) {
    case error_code::none:
      return marker_outcome::written;
    case error_code::invalid_producer_epoch:
    case error_code::transaction_coordinator_fenced:
      return marker_outcome::drop_transaction;  // a newer epoch or coordinator owns it
    case error_code::unsupported_for_message_format:
    case error_code::unsupported_version:
      return marker_outcome::drop_partition;
    default:
      // NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS*, REQUEST_TIMED_OUT,
      // KAFKA_STORAGE_ERROR, a lost connection, and what Kafka treats as fatal: retried, never given up.
      return marker_outcome::retry;
  }
}

}  // namespace

transaction_coordinator::transaction_coordinator(transaction_coordinator_config config,
                                                 transaction_log_writer& writer, txn_marker_sender& markers,
                                                 producer_id_source producer_ids,
                                                 std::function<int64_t()> clock_ms)
    : _config(std::move(config)),
      _writer(writer),
      _markers(markers),
      _producer_ids(std::move(producer_ids)),
      _clock(std::move(clock_ms)),
      _log(subsystem_logger("txn-coordinator")) {
  schedule_periodic();
}

transaction_coordinator::~transaction_coordinator() {
  *_alive = false;
}

int32_t transaction_coordinator::partition_for(std::string_view transactional_id) const {
  return transaction_partition(transactional_id, std::max(1, _config.state_log_partitions));
}

// --- Partitions

void transaction_coordinator::begin_loading(int32_t partition, int32_t coordinator_epoch) {
  unload(partition);
  auto& entry = _partitions[partition];
  entry.loading = true;
  entry.coordinator_epoch = coordinator_epoch;
}

status transaction_coordinator::replay(int32_t partition, std::span<const uint8_t> key,
                                       std::optional<std::span<const uint8_t>> value) {
  auto it = _partitions.find(partition);
  if (it == _partitions.end() || !it->second.loading) {
    return status::error(error_code::not_coordinator, "partition is not loading here");
  }
  auto decoded = decode_transaction_log_record(key, value);
  if (!decoded) return decoded.error();
  auto& txns = it->second.transactions;
  if (!decoded->value || decoded->value->state == transaction_state::dead) {
    txns.erase(decoded->transactional_id);
    return status::success();
  }
  txns.insert_or_assign(decoded->transactional_id,
                        transaction_metadata(decoded->transactional_id, *decoded->value));
  return status::success();
}

void transaction_coordinator::complete_loading(int32_t partition) {
  auto it = _partitions.find(partition);
  if (it == _partitions.end() || !it->second.loading) return;
  it->second.loading = false;
  const int32_t epoch = it->second.coordinator_epoch;
  size_t unfinished = 0;
  for (auto& [id, txn] : it->second.transactions) {
    if (txn.state() == transaction_state::prepare_commit || txn.state() == transaction_state::prepare_abort) {
      ++unfinished;
      begin_markers(id, partition, epoch, txn);
    }
  }
  _log->info("__transaction_state-{} loaded at coordinator epoch {}: {} transactional ids, {} to complete",
             partition, epoch, it->second.transactions.size(), unfinished);
}

void transaction_coordinator::unload(int32_t partition) {
  for (auto it = _completions.begin(); it != _completions.end();) {
    if (it->second.partition == partition) {
      _timers.cancel(marker_timer_key(it->first));
      _timers.cancel(complete_timer_key(it->first));
      it = _completions.erase(it);
    } else {
      ++it;
    }
  }
  _partitions.erase(partition);
}

bool transaction_coordinator::is_owned(int32_t partition) const {
  return _partitions.contains(partition);
}

std::optional<int32_t> transaction_coordinator::coordinator_epoch(int32_t partition) const {
  auto it = _partitions.find(partition);
  if (it == _partitions.end()) return std::nullopt;
  return it->second.coordinator_epoch;
}

std::vector<int32_t> transaction_coordinator::owned_partitions() const {
  std::vector<int32_t> out;
  for (const auto& [p, _] : _partitions) out.push_back(p);
  return out;
}

const transaction_coordinator::partition_entry* transaction_coordinator::active_entry(
    int32_t partition) const {
  auto it = _partitions.find(partition);
  if (it == _partitions.end() || it->second.loading) return nullptr;
  return &it->second;
}

bool transaction_coordinator::still_owned(int32_t partition, int32_t coordinator_epoch) const {
  const auto* entry = active_entry(partition);
  return entry && entry->coordinator_epoch == coordinator_epoch;
}

transaction_metadata* transaction_coordinator::lookup(int32_t partition, int32_t coordinator_epoch,
                                                      const std::string& transactional_id) {
  auto it = _partitions.find(partition);
  if (it == _partitions.end() || it->second.loading || it->second.coordinator_epoch != coordinator_epoch) {
    return nullptr;
  }
  auto t = it->second.transactions.find(transactional_id);
  return t == it->second.transactions.end() ? nullptr : &t->second;
}

result<transaction_metadata*> transaction_coordinator::find(const std::string& transactional_id) {
  auto it = _partitions.find(partition_for(transactional_id));
  if (it == _partitions.end()) {
    return status::error(error_code::not_coordinator, "not the coordinator of " + transactional_id);
  }
  if (it->second.loading) return status::error(error_code::coordinator_load_in_progress, "loading");
  auto t = it->second.transactions.find(transactional_id);
  if (t == it->second.transactions.end()) return static_cast<transaction_metadata*>(nullptr);
  return &t->second;
}

// --- Writes

void transaction_coordinator::write_transition(const std::string& transactional_id, int32_t partition,
                                               int32_t coordinator_epoch, transaction_transition t,
                                               error_callback done) {
  auto record =
      t.state == transaction_state::dead
          ? transaction_log_tombstone(transactional_id)
          : transaction_log_record(transactional_id, t, transaction_log_value_version(_transaction_version));
  const int32_t timeout = t.timeout_ms > 0 ? t.timeout_ms : 30'000;
  _writer.append(partition, std::move(record), timeout,
                 [this, alive = _alive, transactional_id, partition, coordinator_epoch, t = std::move(t),
                  done = std::move(done)](error_code e) {
                   if (!*alive) return;
                   transaction_metadata* txn = lookup(partition, coordinator_epoch, transactional_id);
                   if (!txn) {
                     // Moved or reloaded meanwhile: the new owner knows what was written.
                     done(error_code::not_coordinator);
                     return;
                   }
                   if (e != error_code::none) {
                     const error_code client = append_error_to_client_error(e);
                     _log->warn("transaction {}: writing {} failed: {} (answered {})", transactional_id,
                                transaction_state_name(t.state), error_name(e), error_name(client));
                     txn->abandon_transition();
                     done(client);
                     return;
                   }
                   auto st = txn->complete_transition(t);
                   if (!st.ok()) {
                     _log->error("transaction {}: {}", transactional_id, st.message);
                     done(error_code::unknown_server_error);
                     return;
                   }
                   if (t.state == transaction_state::dead) {
                     if (auto it = _partitions.find(partition); it != _partitions.end()) {
                       it->second.transactions.erase(transactional_id);
                     }
                   }
                   done(error_code::none);
                 });
}

// --- InitProducerId

void transaction_coordinator::init_producer_id(const std::string& transactional_id, int32_t timeout_ms,
                                               std::optional<producer_id_and_epoch> expected,
                                               init_callback done) {
  auto fail = [&done](error_code e) { done({e, {}}); };
  if (transactional_id.empty()) return fail(error_code::invalid_request);
  if (timeout_ms <= 0 || timeout_ms > _config.max_timeout_ms)
    return fail(error_code::invalid_transaction_timeout);
  auto found = find(transactional_id);
  if (!found) return fail(found.error().code);
  const int32_t partition = partition_for(transactional_id);
  const int32_t coordinator_epoch = _partitions.at(partition).coordinator_epoch;
  transaction_metadata* txn = *found;
  if (!txn) {
    auto id = _producer_ids();
    if (!id) return fail(id.error().code);
    auto& txns = _partitions.at(partition).transactions;
    txn = &txns.insert_or_assign(transactional_id, transaction_metadata(transactional_id, *id,
                                                                        no_producer_epoch, timeout_ms, now()))
               .first->second;
  }
  if (txn->pending_state()) return fail(error_code::concurrent_transactions);
  if (expected) {
    const bool valid = txn->producer_epoch() == no_producer_epoch ||
                       expected->producer_id == txn->producer_id() ||
                       (expected->producer_id == txn->prev_producer_id() &&
                        expected->producer_epoch >= exhausted_producer_epoch);
    if (!valid) return fail(error_code::producer_fenced);
  }
  switch (txn->state()) {
    case transaction_state::prepare_commit:
    case transaction_state::prepare_abort:
      return fail(error_code::concurrent_transactions);
    case transaction_state::ongoing: {
      // Abort the open transaction under a higher epoch first; the client retries and gets the next one.
      const int16_t server_tv = _transaction_version;
      const int16_t fenced_epoch = txn->prepare_fence_producer_epoch(server_tv < 2);
      _log->info("transaction {}: InitProducerId while a transaction is open: aborting it (epoch {})",
                 transactional_id, fenced_epoch);
      end_transaction_internal(
          transactional_id, txn->producer_id(), fenced_epoch, false, false, server_tv,
          [done = std::move(done)](end_txn_result r) {
            done({r.error == error_code::none ? error_code::concurrent_transactions : r.error, {}});
          });
      clear_unstarted_fence(transactional_id);
      return;
    }
    case transaction_state::empty:
    case transaction_state::complete_commit:
    case transaction_state::complete_abort:
      break;
    default:
      _log->error("transaction {}: InitProducerId found state {}", transactional_id,
                  transaction_state_name(txn->state()));
      return fail(error_code::unknown_server_error);
  }
  int64_t new_producer_id = no_producer_id;
  if (txn->is_producer_epoch_exhausted()) {
    auto id = _producer_ids();
    if (!id) return fail(id.error().code);
    new_producer_id = *id;
  }
  auto t = txn->prepare_increment_epoch(
      timeout_ms, expected ? std::optional<int16_t>(expected->producer_epoch) : std::nullopt, new_producer_id,
      now());
  if (!t) return fail(t.error().code);
  const producer_id_and_epoch answer{t->producer_id, t->producer_epoch};
  write_transition(transactional_id, partition, coordinator_epoch, std::move(*t),
                   [done = std::move(done), answer](error_code e) {
                     if (e != error_code::none) return done({e, {}});
                     done({error_code::none, answer});
                   });
}

// --- AddPartitionsToTxn / AddOffsetsToTxn

void transaction_coordinator::add_partitions(const std::string& transactional_id, int64_t producer_id,
                                             int16_t producer_epoch, std::set<txn_partition> partitions,
                                             int16_t client_transaction_version, error_callback done) {
  if (transactional_id.empty()) return done(error_code::invalid_request);
  auto found = find(transactional_id);
  if (!found) return done(found.error().code);
  transaction_metadata* txn = *found;
  if (!txn || txn->producer_id() != producer_id) return done(error_code::invalid_producer_id_mapping);
  if (txn->producer_epoch() != producer_epoch) return done(error_code::producer_fenced);
  if (txn->pending_state()) return done(error_code::concurrent_transactions);
  if (txn->state() == transaction_state::prepare_commit || txn->state() == transaction_state::prepare_abort) {
    return done(error_code::concurrent_transactions);
  }
  if (txn->state() == transaction_state::ongoing &&
      std::includes(txn->partitions().begin(), txn->partitions().end(), partitions.begin(),
                    partitions.end())) {
    return done(error_code::none);
  }
  const int32_t partition = partition_for(transactional_id);
  auto t = txn->prepare_add_partitions(partitions, now(), client_transaction_version);
  write_transition(transactional_id, partition, _partitions.at(partition).coordinator_epoch, std::move(t),
                   std::move(done));
}

void transaction_coordinator::add_offsets(const std::string& transactional_id, int64_t producer_id,
                                          int16_t producer_epoch, const std::string& group_id,
                                          error_callback done) {
  const int32_t p = group_partition(group_id, std::max(1, _config.offsets_topic_partitions));
  add_partitions(transactional_id, producer_id, producer_epoch, {{std::string(offsets_topic_name), p}}, 0,
                 std::move(done));
}

std::vector<std::pair<txn_partition, error_code>> transaction_coordinator::verify_partitions(
    const std::string& transactional_id, int64_t producer_id, int16_t producer_epoch,
    const std::vector<txn_partition>& partitions) const {
  auto all = [&partitions](error_code e) {
    std::vector<std::pair<txn_partition, error_code>> out;
    for (const auto& p : partitions) out.emplace_back(p, e);
    return out;
  };
  auto it = _partitions.find(partition_for(transactional_id));
  if (it == _partitions.end()) return all(error_code::not_coordinator);
  if (it->second.loading) return all(error_code::coordinator_load_in_progress);
  auto t = it->second.transactions.find(transactional_id);
  if (t == it->second.transactions.end() || t->second.producer_id() != producer_id) {
    return all(error_code::invalid_producer_id_mapping);
  }
  const auto& txn = t->second;
  if (txn.producer_epoch() != producer_epoch) return all(error_code::producer_fenced);
  if (txn.state() == transaction_state::prepare_commit || txn.state() == transaction_state::prepare_abort) {
    return all(error_code::concurrent_transactions);
  }
  std::vector<std::pair<txn_partition, error_code>> out;
  for (const auto& p : partitions) {
    const bool in = txn.state() == transaction_state::ongoing && txn.partitions().contains(p);
    out.emplace_back(p, in ? error_code::none : error_code::transaction_abortable);
  }
  return out;
}

// --- EndTxn

void transaction_coordinator::end_transaction(const std::string& transactional_id, int64_t producer_id,
                                              int16_t producer_epoch, bool commit,
                                              int16_t client_transaction_version, end_callback done) {
  end_transaction_internal(transactional_id, producer_id, producer_epoch, commit, true,
                           client_transaction_version, std::move(done));
}

void transaction_coordinator::end_transaction_internal(const std::string& transactional_id,
                                                       int64_t producer_id, int16_t producer_epoch,
                                                       bool commit, bool from_client,
                                                       int16_t client_transaction_version,
                                                       end_callback done) {
  using enum transaction_state;
  auto fail = [&done](error_code e) { done({e, {}}); };
  if (transactional_id.empty()) return fail(error_code::invalid_request);
  auto found = find(transactional_id);
  if (!found) return fail(found.error().code);
  transaction_metadata* txn = *found;
  if (!txn) return fail(error_code::invalid_producer_id_mapping);
  const int32_t partition = partition_for(transactional_id);
  const int32_t coordinator_epoch = _partitions.at(partition).coordinator_epoch;
  const bool fencing = txn->pending_state() == prepare_epoch_fence;
  const bool v2 = client_transaction_version >= 2;
  const transaction_state state = txn->state();
  const int16_t stored = txn->producer_epoch();
  const bool retry_on_epoch_bump = v2 && stored == static_cast<int16_t>(producer_epoch + 1);
  const bool retry_on_overflow = v2 && txn->prev_producer_id() == producer_id &&
                                 producer_epoch == exhausted_producer_epoch && stored == 0;
  const bool current = producer_epoch == stored;
  bool valid_epoch;
  if (fencing && !from_client) {
    valid_epoch = true;
  } else if (v2) {
    switch (state) {
      case ongoing:
      case empty:
        valid_epoch = current;
        break;
      case prepare_commit:
      case prepare_abort:
        valid_epoch = retry_on_epoch_bump;
        break;
      default:
        valid_epoch = retry_on_epoch_bump || retry_on_overflow || current;
    }
  } else {
    valid_epoch = (!from_client || current) && producer_epoch >= stored;
  }
  if (txn->producer_id() != producer_id && !retry_on_overflow)
    return fail(error_code::invalid_producer_id_mapping);
  if (!valid_epoch) return fail(error_code::producer_fenced);
  if (txn->pending_state() && !fencing) return fail(error_code::concurrent_transactions);

  const producer_id_and_epoch stored_answer{txn->producer_id(), stored};
  const bool retry = v2 ? (retry_on_epoch_bump || retry_on_overflow) : true;
  bool start = false;  // a Prepare transition
  switch (state) {
    case ongoing:
      start = true;
      break;
    case empty:
      if (v2 && !commit && current)
        start = true;
      else
        return fail(error_code::invalid_txn_state);
      break;
    case complete_commit:
    case complete_abort: {
      const bool same_result = commit == (state == complete_commit);
      if (same_result && retry) return done({error_code::none, stored_answer});
      if (v2 && !commit && current) {
        start = true;
        break;
      }
      return fail(error_code::invalid_txn_state);
    }
    case prepare_commit:
    case prepare_abort: {
      const bool same_result = commit == (state == prepare_commit);
      return fail(same_result ? error_code::concurrent_transactions : error_code::invalid_txn_state);
    }
    default:
      _log->error("transaction {}: EndTxn found state {}", transactional_id, transaction_state_name(state));
      return fail(error_code::unknown_server_error);
  }
  if (!start) return fail(error_code::invalid_txn_state);

  int64_t next_producer_id = no_producer_id;
  if (v2 && txn->is_producer_epoch_exhausted()) {
    auto id = _producer_ids();
    if (!id) return fail(id.error().code);
    next_producer_id = *id;
  }
  if (fencing) {
    if (v2) {
      txn->clear_epoch_fence();
    } else {
      txn->adopt_fenced_epoch(producer_epoch);
    }
  }
  auto t = txn->prepare_abort_or_commit(commit ? prepare_commit : prepare_abort, client_transaction_version,
                                        next_producer_id, now());
  const producer_id_and_epoch answer = t.next_producer_id != no_producer_id
                                           ? producer_id_and_epoch{t.next_producer_id, 0}
                                           : producer_id_and_epoch{t.producer_id, t.producer_epoch};
  write_transition(transactional_id, partition, coordinator_epoch, std::move(t),
                   [this, alive = _alive, transactional_id, partition, coordinator_epoch, fencing, answer,
                    done = std::move(done)](error_code e) {
                     if (!*alive) return;
                     if (e != error_code::none) {
                       if (fencing) {
                         if (auto* txn = lookup(partition, coordinator_epoch, transactional_id))
                           txn->set_failed_epoch_fence(true);
                       }
                       return done({e, {}});
                     }
                     auto* txn = lookup(partition, coordinator_epoch, transactional_id);
                     if (!txn) return done({error_code::not_coordinator, {}});
                     // Answer now: the decision is durable; the markers follow.
                     done({error_code::none, answer});
                     begin_markers(transactional_id, partition, coordinator_epoch, *txn);
                   });
}

void transaction_coordinator::clear_unstarted_fence(const std::string& transactional_id) {
  // The abort that follows a fence either took the pending state over or failed before writing anything;
  // in the latter case the fence must not block every later request.
  auto found = find(transactional_id);
  if (found && *found && (*found)->pending_state() == transaction_state::prepare_epoch_fence) {
    (*found)->clear_epoch_fence();
  }
}

// --- Markers

void transaction_coordinator::begin_markers(const std::string& transactional_id, int32_t partition,
                                            int32_t coordinator_epoch, transaction_metadata& txn) {
  marker_completion c;
  c.partition = partition;
  c.coordinator_epoch = coordinator_epoch;
  c.markers.producer_id = txn.producer_id();
  c.markers.producer_epoch = txn.producer_epoch();
  c.markers.commit = txn.state() == transaction_state::prepare_commit;
  c.markers.coordinator_epoch = coordinator_epoch;
  c.markers.transaction_version = txn.client_transaction_version();
  c.markers.partitions.assign(txn.partitions().begin(), txn.partitions().end());
  c.complete = txn.prepare_complete(now());
  _completions.insert_or_assign(transactional_id, std::move(c));
  send_markers(transactional_id);
}

void transaction_coordinator::send_markers(const std::string& transactional_id) {
  auto it = _completions.find(transactional_id);
  if (it == _completions.end()) return;
  if (it->second.markers.partitions.empty()) return write_complete(transactional_id);
  const int32_t epoch = it->second.coordinator_epoch;
  _markers.send(it->second.markers,
                [this, alive = _alive, transactional_id, epoch](std::vector<txn_marker_result> results) {
                  if (*alive) on_marker_results(transactional_id, epoch, std::move(results));
                });
}

void transaction_coordinator::on_marker_results(const std::string& transactional_id,
                                                int32_t coordinator_epoch,
                                                std::vector<txn_marker_result> results) {
  auto it = _completions.find(transactional_id);
  if (it == _completions.end() || it->second.coordinator_epoch != coordinator_epoch) return;
  auto& c = it->second;
  transaction_metadata* txn = lookup(c.partition, coordinator_epoch, transactional_id);
  if (!txn) {
    _completions.erase(it);
    return;
  }
  bool retry = false;
  for (const auto& r : results) {
    auto outcome = r.partition_gone ? marker_outcome::drop_partition : classify_marker_error(r.error);
    switch (outcome) {
      case marker_outcome::written:
      case marker_outcome::drop_partition:
        if (outcome == marker_outcome::drop_partition) {
          _log->warn("transaction {}: no marker for {}-{} ({}): skipped", transactional_id, r.partition.topic,
                     r.partition.partition, r.partition_gone ? "partition gone" : error_name(r.error));
        }
        std::erase(c.markers.partitions, r.partition);
        txn->remove_partition(r.partition);
        break;
      case marker_outcome::drop_transaction:
        _log->warn("transaction {}: marker for {}-{} refused ({}): completion abandoned", transactional_id,
                   r.partition.topic, r.partition.partition, error_name(r.error));
        txn->abandon_transition();
        _timers.cancel(marker_timer_key(transactional_id));
        _completions.erase(it);
        return;
      case marker_outcome::retry:
        retry = true;
        break;
    }
  }
  if (c.markers.partitions.empty()) return write_complete(transactional_id);
  if (retry) {
    _timers.schedule(marker_timer_key(transactional_id), now() + _config.marker_retry_backoff_ms,
                     [this, transactional_id] { send_markers(transactional_id); });
  }
}

void transaction_coordinator::write_complete(const std::string& transactional_id) {
  auto it = _completions.find(transactional_id);
  if (it == _completions.end()) return;
  const auto& c = it->second;
  const int32_t partition = c.partition;
  const int32_t coordinator_epoch = c.coordinator_epoch;
  write_transition(
      transactional_id, partition, coordinator_epoch, c.complete,
      [this, alive = _alive, transactional_id, partition, coordinator_epoch](error_code e) {
        if (!*alive) return;
        auto it = _completions.find(transactional_id);
        if (it == _completions.end() || it->second.coordinator_epoch != coordinator_epoch) return;
        if (e == error_code::coordinator_not_available) {
          // Not written (too few replicas, a timeout): the transition stays pending; try again.
          // write_transition abandoned the pending state: take it again.
          if (auto* txn = lookup(partition, coordinator_epoch, transactional_id)) {
            it->second.complete = txn->prepare_complete(now());
          }
          _timers.schedule(complete_timer_key(transactional_id), now() + _config.complete_retry_backoff_ms,
                           [this, transactional_id] { write_complete(transactional_id); });
          return;
        }
        if (e != error_code::none) {
          _log->warn("transaction {}: completion not written ({}); the next coordinator finishes it",
                     transactional_id, error_name(e));
        }
        _completions.erase(it);
      });
}

// --- Administration

transaction_description transaction_coordinator::describe(const std::string& transactional_id) const {
  transaction_description d;
  d.transactional_id = transactional_id;
  if (transactional_id.empty()) {
    d.error = error_code::invalid_request;
    return d;
  }
  auto it = _partitions.find(partition_for(transactional_id));
  if (it == _partitions.end()) {
    d.error = error_code::not_coordinator;
    return d;
  }
  if (it->second.loading) {
    d.error = error_code::coordinator_load_in_progress;
    return d;
  }
  auto t = it->second.transactions.find(transactional_id);
  if (t == it->second.transactions.end() || t->second.state() == transaction_state::dead) {
    d.error = error_code::transactional_id_not_found;
    return d;
  }
  const auto& txn = t->second;
  d.state = txn.state();
  d.timeout_ms = txn.timeout_ms();
  d.start_timestamp_ms = txn.start_timestamp_ms();
  d.producer_id = txn.producer_id();
  d.producer_epoch = txn.producer_epoch();
  d.partitions = txn.partitions();
  return d;
}

list_transactions_result transaction_coordinator::list(const list_transactions_filter& filter) const {
  list_transactions_result out;
  std::set<transaction_state> states;
  for (const auto& name : filter.states) {
    if (auto s = transaction_state_from_name(name)) {
      states.insert(*s);
    } else {
      out.unknown_state_filters.push_back(name);
    }
  }
  // Only unknown states asked for: nothing can match.
  if (!filter.states.empty() && states.empty()) return out;
  std::optional<std::regex> pattern;
  if (filter.id_pattern && !filter.id_pattern->empty()) {
    try {
      pattern.emplace(*filter.id_pattern);
    } catch (const std::regex_error&) {
      out.error = error_code::invalid_regular_expression;
      return out;
    }
  }
  const std::set<int64_t> producer_ids(filter.producer_ids.begin(), filter.producer_ids.end());
  const int64_t now_ms = now();
  for (const auto& [partition, entry] : _partitions) {
    if (entry.loading) {
      out.error = error_code::coordinator_load_in_progress;
      out.transactions.clear();
      return out;
    }
    for (const auto& [id, txn] : entry.transactions) {
      if (txn.state() == transaction_state::dead) continue;
      if (!states.empty() && !states.contains(txn.state())) continue;
      if (!producer_ids.empty() && !producer_ids.contains(txn.producer_id())) continue;
      if (filter.duration_ms >= 0 &&
          (txn.start_timestamp_ms() < 0 || now_ms - txn.start_timestamp_ms() <= filter.duration_ms)) {
        continue;
      }
      if (pattern && !std::regex_match(id, *pattern)) continue;
      out.transactions.push_back({id, txn.producer_id(), txn.state()});
    }
  }
  return out;
}

// --- Time

void transaction_coordinator::schedule_periodic() {
  _timers.schedule(abort_timer_key, now() + _config.abort_timed_out_interval_ms, [this] {
    abort_timed_out_transactions();
    schedule_periodic();
  });
  if (!_timers.contains(expire_timer_key)) {
    _timers.schedule(expire_timer_key, now() + _config.remove_expired_interval_ms, [this] {
      remove_expired_transactional_ids();
      if (!_timers.contains(expire_timer_key)) schedule_periodic();
    });
  }
}

void transaction_coordinator::run_expired_timers() {
  _timers.run_due(now());
}

void transaction_coordinator::abort_timed_out_transactions() {
  const int64_t now_ms = now();
  std::vector<std::string> expired;
  for (const auto& [partition, entry] : _partitions) {
    if (entry.loading) continue;
    for (const auto& [id, txn] : entry.transactions) {
      if (txn.state() == transaction_state::ongoing && !txn.pending_state() &&
          txn.start_timestamp_ms() + txn.timeout_ms() < now_ms) {
        expired.push_back(id);
      }
    }
  }
  for (const auto& id : expired) {
    auto found = find(id);
    if (!found || !*found) continue;
    transaction_metadata* txn = *found;
    const int16_t server_tv = _transaction_version;
    const int16_t fenced_epoch = txn->prepare_fence_producer_epoch(server_tv < 2);
    _log->info("transaction {} (producer {}) timed out after {} ms: aborting it", id, txn->producer_id(),
               txn->timeout_ms());
    end_transaction_internal(
        id, txn->producer_id(), fenced_epoch, false, false, server_tv, [this, id](end_txn_result r) {
          if (r.error != error_code::none) {
            _log->warn("transaction {}: timed-out abort failed: {}", id, error_name(r.error));
          }
        });
    clear_unstarted_fence(id);
  }
}

void transaction_coordinator::remove_expired_transactional_ids() {
  const int64_t now_ms = now();
  for (auto& [partition, entry] : _partitions) {
    if (entry.loading) continue;
    std::vector<std::string> expired;
    for (const auto& [id, txn] : entry.transactions) {
      if (transaction_state_may_expire(txn.state()) && !txn.pending_state() &&
          txn.last_update_timestamp_ms() <= now_ms - _config.id_expiration_ms) {
        expired.push_back(id);
      }
    }
    const int32_t p = partition;
    const int32_t epoch = entry.coordinator_epoch;
    for (const auto& id : expired) {
      auto t = entry.transactions.at(id).prepare_dead();
      _log->info("transactional id {} expired: removing it", id);
      write_transition(id, p, epoch, std::move(t), [this, id](error_code e) {
        if (e != error_code::none) _log->warn("removing transactional id {} failed: {}", id, error_name(e));
      });
    }
  }
}

}  // namespace mala::coordinator
