#include "mala/coordinator/transaction_metadata.h"

#include <array>
#include <utility>

namespace mala::coordinator {

namespace {

constexpr std::array<std::string_view, 8> state_names{"Empty",        "Ongoing",          "PrepareCommit",
                                                      "PrepareAbort", "CompleteCommit",   "CompleteAbort",
                                                      "Dead",         "PrepareEpochFence"};

// Kafka's TransactionState.validPreviousStates (TV2 also lets an abort start from Empty / Complete*).
bool valid_previous(transaction_state to, transaction_state from) {
  using enum transaction_state;
  switch (to) {
    case empty:
      return from == empty || from == complete_commit || from == complete_abort;
    case ongoing:
      return from == ongoing || from == empty || from == complete_commit || from == complete_abort;
    case prepare_commit:
      return from == ongoing;
    case prepare_abort:
      return from == ongoing || from == prepare_epoch_fence || from == empty || from == complete_commit ||
             from == complete_abort;
    case complete_commit:
      return from == prepare_commit;
    case complete_abort:
      return from == prepare_abort;
    case dead:
      return from == empty || from == complete_commit || from == complete_abort;
    case prepare_epoch_fence:
      return from == ongoing;
  }
  return false;
}

}  // namespace

std::string_view transaction_state_name(transaction_state state) {
  const auto i = static_cast<size_t>(state);
  return i < state_names.size() ? state_names[i] : std::string_view("Unknown");
}

std::optional<transaction_state> transaction_state_from_name(std::string_view name) {
  for (size_t i = 0; i < state_names.size(); ++i) {
    if (state_names[i] == name) return static_cast<transaction_state>(i);
  }
  return std::nullopt;
}

std::optional<transaction_state> transaction_state_from_status(int8_t status) {
  if (status < 0 || status > static_cast<int8_t>(transaction_state::prepare_epoch_fence)) return std::nullopt;
  return static_cast<transaction_state>(status);
}

bool transaction_state_may_expire(transaction_state state) {
  return state == transaction_state::empty || state == transaction_state::complete_commit ||
         state == transaction_state::complete_abort;
}

transaction_metadata::transaction_metadata(std::string transactional_id, int64_t producer_id,
                                           int16_t producer_epoch, int32_t timeout_ms, int64_t now_ms)
    : _id(std::move(transactional_id)) {
  _v.producer_id = producer_id;
  _v.producer_epoch = producer_epoch;
  _v.timeout_ms = timeout_ms;
  _v.state = transaction_state::empty;
  _v.last_update_timestamp_ms = now_ms;
}

transaction_metadata::transaction_metadata(std::string transactional_id, const transaction_transition& stored)
    : _id(std::move(transactional_id)), _v(stored) {
  _v.last_producer_epoch = no_producer_epoch;
}

transaction_transition transaction_metadata::transit(transaction_state target) const {
  transaction_transition t = _v;
  t.state = target;
  return t;
}

result<transaction_transition> transaction_metadata::prepare_increment_epoch(
    int32_t timeout_ms, std::optional<int16_t> expected_epoch, int64_t new_producer_id, int64_t now_ms) {
  if (is_producer_epoch_exhausted() && (!expected_epoch || *expected_epoch == _v.producer_epoch)) {
    return prepare_producer_id_rotation(new_producer_id, timeout_ms, expected_epoch.has_value(), now_ms);
  }
  const auto bumped = static_cast<int16_t>(_v.producer_epoch + 1);
  int16_t epoch = bumped;
  int16_t last_epoch = no_producer_epoch;
  if (expected_epoch) {
    if (_v.producer_epoch == no_producer_epoch || *expected_epoch == _v.producer_epoch) {
      last_epoch = _v.producer_epoch;
    } else if (*expected_epoch == _v.last_producer_epoch) {
      // A retry of the bump this producer already got: the same epoch again.
      epoch = _v.producer_epoch;
      last_epoch = _v.last_producer_epoch;
    } else {
      return status::error(error_code::producer_fenced, "the producer's epoch is not the current one");
    }
  }
  transaction_transition t = transit(transaction_state::empty);
  t.producer_epoch = epoch;
  t.last_producer_epoch = last_epoch;
  t.timeout_ms = timeout_ms;
  t.partitions.clear();
  t.start_timestamp_ms = -1;
  t.last_update_timestamp_ms = now_ms;
  set_pending(transaction_state::empty);
  return t;
}

transaction_transition transaction_metadata::prepare_producer_id_rotation(int64_t new_producer_id,
                                                                          int32_t timeout_ms,
                                                                          bool recorded_last_epoch,
                                                                          int64_t now_ms) {
  transaction_transition t = transit(transaction_state::empty);
  t.prev_producer_id = _v.producer_id;
  t.producer_id = new_producer_id;
  t.producer_epoch = 0;
  t.last_producer_epoch = recorded_last_epoch ? _v.producer_epoch : no_producer_epoch;
  t.timeout_ms = timeout_ms;
  t.partitions.clear();
  t.start_timestamp_ms = -1;
  t.last_update_timestamp_ms = now_ms;
  set_pending(transaction_state::empty);
  return t;
}

int16_t transaction_metadata::prepare_fence_producer_epoch(bool bump_epoch) {
  set_pending(transaction_state::prepare_epoch_fence);
  if (!bump_epoch || _failed_epoch_fence || _v.producer_epoch >= INT16_MAX) return _v.producer_epoch;
  return static_cast<int16_t>(_v.producer_epoch + 1);
}

void transaction_metadata::adopt_fenced_epoch(int16_t fenced_epoch) {
  _pending.reset();
  _v.producer_epoch = fenced_epoch;
  _v.last_producer_epoch = no_producer_epoch;
}

transaction_transition transaction_metadata::prepare_add_partitions(const std::set<txn_partition>& added,
                                                                    int64_t now_ms,
                                                                    int16_t client_transaction_version) {
  transaction_transition t = transit(transaction_state::ongoing);
  if (_v.state == transaction_state::empty || _v.state == transaction_state::complete_commit ||
      _v.state == transaction_state::complete_abort) {
    t.start_timestamp_ms = now_ms;
    t.partitions.clear();
  }
  t.partitions.insert(added.begin(), added.end());
  t.last_update_timestamp_ms = now_ms;
  t.client_transaction_version = client_transaction_version;
  set_pending(transaction_state::ongoing);
  return t;
}

transaction_transition transaction_metadata::prepare_abort_or_commit(transaction_state target,
                                                                     int16_t client_transaction_version,
                                                                     int64_t next_producer_id,
                                                                     int64_t now_ms) {
  transaction_transition t = transit(target);
  if (client_transaction_version >= 2 && _v.producer_epoch < INT16_MAX) {
    t.producer_epoch = static_cast<int16_t>(_v.producer_epoch + 1);
    t.last_producer_epoch = _v.producer_epoch;
  }
  // Transactions v2 may abort a transaction that never added a partition: it starts now.
  const bool nothing_added = _v.state == transaction_state::empty ||
                             _v.state == transaction_state::complete_commit ||
                             _v.state == transaction_state::complete_abort;
  if (nothing_added) {
    t.partitions.clear();
    t.start_timestamp_ms = now_ms;
  }
  t.next_producer_id = next_producer_id;
  t.last_update_timestamp_ms = now_ms;
  t.client_transaction_version = client_transaction_version;
  set_pending(target);
  return t;
}

transaction_transition transaction_metadata::prepare_complete(int64_t now_ms) {
  const transaction_state target = _v.state == transaction_state::prepare_commit
                                       ? transaction_state::complete_commit
                                       : transaction_state::complete_abort;
  // The Prepare record is written: an earlier failed fence is behind us.
  _failed_epoch_fence = false;
  transaction_transition t = transit(target);
  if (_v.client_transaction_version >= 2 && _v.next_producer_id != no_producer_id) {
    t.prev_producer_id = _v.producer_id;
    t.producer_id = _v.next_producer_id;
    t.producer_epoch = 0;
  }
  t.next_producer_id = no_producer_id;
  t.partitions.clear();
  t.last_update_timestamp_ms = now_ms;
  set_pending(target);
  return t;
}

transaction_transition transaction_metadata::prepare_dead() {
  transaction_transition t = transit(transaction_state::dead);
  t.partitions.clear();
  set_pending(transaction_state::dead);
  return t;
}

status transaction_metadata::complete_transition(const transaction_transition& t) {
  if (!_pending || *_pending != t.state) {
    return status::error(error_code::invalid_txn_state, std::string("transition to ") +
                                                            std::string(transaction_state_name(t.state)) +
                                                            " is not the pending one");
  }
  if (!valid_previous(t.state, _v.state)) {
    _pending.reset();
    return status::error(error_code::invalid_txn_state,
                         std::string("no transition from ") + std::string(transaction_state_name(_v.state)) +
                             " to " + std::string(transaction_state_name(t.state)));
  }
  _v = t;
  _pending.reset();
  return status::success();
}

}  // namespace mala::coordinator
