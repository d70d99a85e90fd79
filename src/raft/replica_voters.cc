// raft::replica's KIP-853 part: the voter set that follows the VotersRecords in the log, and the leader's
// voter changes (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter) as Kafka's AddVoterHandler,
// RemoveVoterHandler and UpdateVoterHandler. The rest of the state machine is in replica.cc.
#include <algorithm>
#include <string>
#include <utility>

#include "mala/common/assert.h"
#include "mala/raft/replica.h"

namespace mala::raft {

// A static quorum (no voter set at the log's start) tracks VotersRecords too: the first one is its upgrade to
// kraft.version 1 (upgrade_kraft_version, or a Kafka leader's).
void replica::load_voter_history() {
  _voter_history.clear();
  int64_t next = _log.start_offset();
  const int64_t end = _log.end_offset();
  while (next < end) {
    const std::vector<log_entry> entries = _log.read(next, 512);
    if (entries.empty()) break;
    for (const log_entry& e : entries) {
      if (e.type == entry_type::voters) {
        auto voters = decode_voters_record(e.payload);
        MALA_ASSERT(voters.ok(), "node {}: the VotersRecord at offset {} does not decode: {}",
                    _config.node_id, e.offset, voters.ok() ? "" : voters.error().message);
        _voter_history.push_back({e.offset, std::move(*voters)});
      }
      next = e.offset + 1;
    }
  }
}

void replica::track_voter_entries(std::span<const log_entry> entries) {
  bool changed = false;
  for (const log_entry& e : entries) {
    if (e.type != entry_type::voters) continue;
    auto voters = decode_voters_record(e.payload);
    // A VotersRecord that does not decode cannot be passed over: every node must agree on the voters.
    MALA_ASSERT(voters.ok(), "node {}: the VotersRecord at offset {} does not decode: {}", _config.node_id,
                e.offset, voters.ok() ? "" : voters.error().message);
    _voter_history.push_back({e.offset, std::move(*voters)});
    changed = true;
  }
  if (changed) refresh_voters();
}

void replica::forget_voter_entries_from(int64_t offset) {
  if (_voter_history.empty() || _voter_history.back().offset < offset) return;
  while (!_voter_history.empty() && _voter_history.back().offset >= offset) _voter_history.pop_back();
  refresh_voters();
}

const std::vector<voter_info>* replica::voter_set() const {
  if (!_voter_history.empty()) return &_voter_history.back().voters;
  return _base_voter_set ? &*_base_voter_set : nullptr;
}

std::optional<std::vector<voter_info>> replica::voter_set_before(int64_t offset) const {
  const std::vector<voter_info>* found = _base_voter_set ? &*_base_voter_set : nullptr;
  for (const voter_set_at& v : _voter_history) {
    if (v.offset >= offset) break;
    found = &v.voters;
  }
  if (!found) return std::nullopt;
  return *found;
}

bool replica::is_own_key(const voter_info& voter) const {
  // A voter without a directory id (Mala's --initial-controllers allow one) is this node by its id.
  return voter.id == _config.node_id && (voter.directory_id.is_zero() || _config.directory_id.is_zero() ||
                                         voter.directory_id == _config.directory_id);
}

void replica::refresh_voters() {
  const std::vector<int32_t> before = _voters;
  const bool was_voter = _is_voter;
  if (const auto* set = voter_set()) {
    _voters.clear();
    _is_voter = false;
    for (const voter_info& v : *set) {
      _voters.push_back(v.id);
      if (is_own_key(v)) _is_voter = true;
    }
  } else {
    _voters = _config.voters;
    _is_voter = is_voter_id(_config.node_id);
  }
  if (_voters == before && _is_voter == was_voter) return;
  _effects.voters_changed = true;
  if (_role == role::leader) {
    // LeaderState.updateVoterAndObserverStates: the new voters' progress counts from now on; a removed one
    // is an observer.
    for (follower_progress& f : _followers) f.state.voter = is_voter_id(f.state.replica_id);
    for (int32_t id : _voters) {
      if (id == _config.node_id) continue;
      follower_progress& f = progress_of(id);
      if (f.state.voter) continue;
      f.state.voter = true;
      f.acknowledged = f.state.last_fetch_ms >= 0;  // it fetches from this leader already
      f.begin_resend_ms = _now_ms;
    }
  } else if (!was_voter && _is_voter && _role == role::unattached) {
    _election_deadline_ms = _now_ms + randomized_election_timeout();
  } else if (was_voter && !_is_voter && (_role == role::prospective || _role == role::candidate)) {
    become_unattached(_epoch, _voted_id);
  }
}

int64_t replica::append_voter_set(const std::vector<voter_info>& voters) {
  const int64_t offset = _log.end_offset();
  append_to_log({log_entry{offset, _epoch, entry_type::voters, encode_voters_record(voters)}});
  complete_parked_fetches();
  maybe_advance_high_watermark();
  return offset;
}

void replica::start_voter_change(int64_t request_id, const std::vector<voter_info>& voters) {
  _pending_voter_change = pending_voter_change{request_id, 0, _now_ms + _config.request_timeout_ms};
  _pending_voter_change->offset = append_voter_set(voters);
  maybe_complete_voter_change();
}

void replica::answer_voter_change(error_code error, std::string message) {
  if (!_pending_voter_change) return;
  _effects.voter_change_answers.push_back({_pending_voter_change->request_id, error, std::move(message)});
  _pending_voter_change.reset();
}

void replica::maybe_complete_voter_change() {
  if (!_pending_voter_change || _high_watermark <= _pending_voter_change->offset) return;
  answer_voter_change(error_code::none);
  // RemoveVoterHandler: a leader that removed itself resigns once the change is committed (at the next tick,
  // as Kafka's pollLeader does, not inside the step that moved the high watermark).
  if (_role == role::leader && !_is_voter) _resign_requested = true;
}

namespace {

std::string replica_key(int32_t id, const uuid& directory_id) {
  return "ReplicaKey(id=" + std::to_string(id) + ", directoryId=" + directory_id.to_string() + ")";
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

}  // namespace

std::optional<voter_change_answer> replica::voter_change_refusal(std::string_view verb) const {
  auto refusal = [](error_code error, std::string message) {
    return voter_change_answer{0, error, std::move(message)};
  };
  if (_pending_voter_change) {
    return refusal(error_code::request_timed_out,
                   "Request timed out waiting for leader to handle previous voter change request");
  }
  if (_high_watermark <= _epoch_start_offset) {
    return refusal(error_code::request_timed_out,
                   "Request timed out waiting for leader to establish HWM and fence previous voter changes");
  }
  if (!voter_set()) {
    return refusal(error_code::unsupported_version, "Cluster doesn't support " + std::string(verb) +
                                                        " voter because the kraft.version feature is 0");
  }
  if (!_voter_history.empty() && _voter_history.back().offset >= _high_watermark) {
    return refusal(error_code::request_timed_out,
                   "Request timed out waiting for voters to commit the latest voter change at " +
                       std::to_string(_voter_history.back().offset) + " with HWM " +
                       std::to_string(_high_watermark));
  }
  return std::nullopt;
}

void replica::add_voter(int64_t request_id, voter_info voter, bool ack_when_committed) {
  auto refuse = [&](error_code error, std::string message = {}) {
    _effects.voter_change_answers.push_back({request_id, error, std::move(message)});
  };
  if (_role != role::leader) return refuse(error_code::not_leader_or_follower);
  if (voter.id < 0 || voter.directory_id.is_zero()) {
    return refuse(error_code::invalid_request, "Add voter request didn't include a valid voter");
  }
  if (auto refusal = voter_change_refusal("adding"))
    return refuse(refusal->error, std::move(refusal->message));
  if (is_voter_id(voter.id)) {
    return refuse(error_code::duplicate_voter,
                  "The voter id for " + replica_key(voter.id, voter.directory_id) +
                      " is already part of the set of voters " + ids_text(_voters) + ".");
  }
  // LeaderState.isReplicaCaughtUp: an observer fetching with this key that reached the log end lately.
  const follower_progress* observer = nullptr;
  for (const follower_progress& f : _followers) {
    if (f.state.replica_id == voter.id && f.state.directory_id == voter.directory_id) observer = &f;
  }
  if (!observer || observer->state.last_caught_up_ms < 0 ||
      observer->state.last_fetch_ms < _now_ms - _config.fetch_timeout_ms) {
    return refuse(error_code::request_timed_out, "Aborted add voter operation for " +
                                                     replica_key(voter.id, voter.directory_id) +
                                                     " since it is lagging behind");
  }
  std::vector<voter_info> next = *voter_set();
  next.push_back(std::move(voter));
  if (!ack_when_committed) {
    append_voter_set(next);
    _effects.voter_change_answers.push_back({request_id, error_code::none, {}});
    return;
  }
  start_voter_change(request_id, next);
}

void replica::remove_voter(int64_t request_id, int32_t voter_id, const uuid& directory_id) {
  auto refuse = [&](error_code error, std::string message = {}) {
    _effects.voter_change_answers.push_back({request_id, error, std::move(message)});
  };
  if (_role != role::leader) return refuse(error_code::not_leader_or_follower);
  if (voter_id < 0)
    return refuse(error_code::invalid_request, "Remove voter request didn't include a valid voter");
  if (auto refusal = voter_change_refusal("removing"))
    return refuse(refusal->error, std::move(refusal->message));
  std::vector<voter_info> next = *voter_set();
  // VoterSet.removeVoter: the exact key (id and directory id), and never the last voter.
  const auto it = std::find_if(next.begin(), next.end(), [&](const voter_info& v) {
    return v.id == voter_id && v.directory_id == directory_id;
  });
  if (it == next.end() || next.size() == 1) {
    return refuse(error_code::voter_not_found, "Cannot remove voter " + replica_key(voter_id, directory_id) +
                                                   " from the set of voters " + ids_text(_voters));
  }
  next.erase(it);
  start_voter_change(request_id, next);
}

void replica::update_voter(int64_t request_id, int32_t leader_epoch, voter_info voter,
                           int16_t min_kraft_version, int16_t max_kraft_version) {
  auto answer = [&](error_code error, std::string message = {}) {
    _effects.voter_change_answers.push_back({request_id, error, std::move(message)});
  };
  if (leader_epoch < _epoch) return answer(error_code::fenced_leader_epoch);
  if (leader_epoch > _epoch) return answer(error_code::unknown_leader_epoch);
  if (_role != role::leader) return answer(error_code::not_leader_or_follower);
  if (voter.id < 0 || voter.directory_id.is_zero()) {
    return answer(error_code::invalid_request, "Update voter request didn't include a valid voter");
  }
  if (min_kraft_version < 0 || max_kraft_version < 0 || max_kraft_version < min_kraft_version) {
    return answer(error_code::invalid_request, "Update voter request has an invalid kraft.version range");
  }
  if (!voter_set()) {
    // kraft.version 0 (UpdateVoterHandler without reconfiguration): kept in memory for the upgrade.
    if (_high_watermark <= _epoch_start_offset || _reported_voters.empty()) {
      return answer(error_code::request_timed_out,
                    "Request timed out waiting for leader to establish HWM and fence previous voter changes");
    }
    if (min_kraft_version > 0) {
      return answer(error_code::invalid_request,
                    "The voter's kraft.version range [" + std::to_string(min_kraft_version) + ", " +
                        std::to_string(max_kraft_version) + "] does not support the finalized version 0");
    }
    const auto reported = std::find_if(_reported_voters.begin(), _reported_voters.end(),
                                       [&](const reported_voter& r) { return r.voter.id == voter.id; });
    if (reported == _reported_voters.end()) {
      return answer(error_code::voter_not_found, "Cannot update voter " +
                                                     replica_key(voter.id, voter.directory_id) +
                                                     " in the set of voters " + ids_text(_voters));
    }
    *reported = reported_voter{std::move(voter), min_kraft_version, max_kraft_version};
    return answer(error_code::none);
  }
  if (auto refusal = voter_change_refusal("updating"))
    return answer(refusal->error, std::move(refusal->message));
  if (dynamic_kraft_version < min_kraft_version || dynamic_kraft_version > max_kraft_version) {
    return answer(error_code::invalid_request,
                  "The voter's kraft.version range [" + std::to_string(min_kraft_version) + ", " +
                      std::to_string(max_kraft_version) + "] does not support the finalized version " +
                      std::to_string(dynamic_kraft_version));
  }
  std::vector<voter_info> next = *voter_set();
  const auto it = std::find_if(next.begin(), next.end(), [&](const voter_info& v) {
    return v.id == voter.id && v.directory_id == voter.directory_id;
  });
  if (it == next.end()) {
    return answer(error_code::voter_not_found, "Cannot update voter " +
                                                   replica_key(voter.id, voter.directory_id) +
                                                   " in the set of voters " + ids_text(_voters));
  }
  if (*it != voter) {
    *it = std::move(voter);
    append_voter_set(next);
  }
  answer(error_code::none);
}

// KafkaRaftClient.pollFollowerAsVoter's update check (every 3 fetch timeouts, from tick()).
void replica::maybe_send_update_voter() {
  if (!_config.local_voter || _leader_id < 0) return;
  const voter_info& wanted = *_config.local_voter;
  uuid directory_id = _config.directory_id;
  if (const auto* voters = voter_set()) {
    // kraft.version 1: only an entry that differs from what this node is now.
    const auto own =
        std::find_if(voters->begin(), voters->end(), [&](const voter_info& v) { return is_own_key(v); });
    if (own == voters->end()) return;
    if (own->listener_name == wanted.listener_name && own->endpoint.host == wanted.endpoint.host &&
        own->endpoint.port == wanted.endpoint.port)
      return;
    if (!own->directory_id.is_zero()) directory_id = own->directory_id;
  } else {
    // kraft.version 0: until this epoch's leader accepted it, so that the leader knows the voter's directory
    // id, listener and range when kraft.version is upgraded (KafkaRaftClient.shouldSendUpdateVoteRequest).
    if (_update_voter_accepted_epoch == _epoch) return;
  }
  if (directory_id.is_zero()) return;
  update_voter_request request;
  request.current_leader_epoch = _epoch;
  request.voter_id = _config.node_id;
  request.voter_directory_id = directory_id;
  request.listener_name = wanted.listener_name;
  request.host = wanted.endpoint.host;
  request.port = wanted.endpoint.port;
  request.min_kraft_version = 0;
  request.max_kraft_version = _config.max_kraft_version;
  send(_leader_id, new_correlation_id(), std::move(request));
}

void replica::handle_update_voter_response(const update_voter_response& response) {
  if (_role != role::follower || response.current_leader.leader_epoch != _epoch) return;
  if (response.error_code == error_code::none || response.error_code == error_code::unsupported_version)
    _update_voter_accepted_epoch = _epoch;
}

void replica::start_reported_voters() {
  _reported_voters.clear();
  if (voter_set()) return;
  for (int32_t id : _voters) {
    reported_voter r;
    r.voter.id = id;
    if (id == _config.node_id) {
      if (_config.local_voter) r.voter = *_config.local_voter;
      r.voter.id = id;
      r.voter.directory_id = _config.directory_id;
      r.max_kraft_version = _config.max_kraft_version;
    }
    _reported_voters.push_back(std::move(r));
  }
}

status replica::upgrade_kraft_version(int32_t epoch, int16_t version, bool validate_only) {
  if (_role != role::leader || epoch < _epoch) {
    return status::error(error_code::not_leader_or_follower,
                         "Upgrade kraft version failed because the replica is not the current leader");
  }
  if (epoch > _epoch) {
    return status::error(error_code::invalid_request,
                         "Attempt to append from epoch " + std::to_string(epoch) +
                             " which is larger than the current epoch of " + std::to_string(_epoch));
  }
  const int16_t current = kraft_version();
  if (version == current) return status::success();
  auto invalid = [](std::string message) {
    return status::error(error_code::invalid_update_version, std::move(message));
  };
  const std::string from_to =
      "kraft.version from version " + std::to_string(current) + " to " + std::to_string(version);
  if (version < current)
    return invalid("Invalid upgrade of " + from_to + " because the new version is a downgrade");
  if (version > dynamic_kraft_version || _reported_voters.empty())
    return invalid("Invalid upgrade of " + from_to);
  // VoterSet.supportsVersion: a voter not heard from is a static voter of range [0, 0], as in Kafka.
  for (const reported_voter& r : _reported_voters) {
    if (version < r.min_kraft_version || version > r.max_kraft_version) {
      const std::string why = r.voter.directory_id.is_zero()
                                  ? "has not sent UpdateRaftVoter to this leader yet"
                                  : "supports [" + std::to_string(r.min_kraft_version) + ", " +
                                        std::to_string(r.max_kraft_version) + "]";
      return invalid("Invalid upgrade of kraft.version to " + std::to_string(version) +
                     " because not all of the voters support it (voter " + std::to_string(r.voter.id) + " " +
                     why + ")");
    }
  }
  std::vector<voter_info> voters;
  std::string unknown;
  for (const reported_voter& r : _reported_voters) {
    if (r.voter.directory_id.is_zero() || r.voter.endpoint.host.empty()) {
      unknown += (unknown.empty() ? "" : ", ") + std::to_string(r.voter.id);
    }
    voters.push_back(r.voter);
  }
  if (!unknown.empty()) {
    return invalid("Directory id must be known for all of the voters: voter(s) " + unknown +
                   " have not sent UpdateRaftVoter to this leader yet");
  }
  if (validate_only) return status::success();
  // One write: the KRaftVersionRecord and the VotersRecord (LeaderState's control batch of the upgrade).
  const auto records = voter_set_control_records(voters);
  const int64_t next = _log.end_offset();
  append_to_log({log_entry{next, _epoch, entry_type::kraft_version, records[0].value, false},
                 log_entry{next + 1, _epoch, entry_type::voters, records[1].value, true}});
  _reported_voters.clear();
  complete_parked_fetches();
  maybe_advance_high_watermark();
  return status::success();
}

}  // namespace mala::raft
