#include "mala/raft/replica.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>

#include "mala/common/assert.h"
#include "mala/raft/rpc_codec.h"

namespace mala::raft {

namespace {

constexpr int64_t never = std::numeric_limits<int64_t>::max();

// KafkaRaftClient.RETRY_BACKOFF_BASE_MS: the unit of the binary exponential election backoff.
constexpr int64_t election_backoff_base_ms = 100;

// LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR: a leader resigns after 1.5 fetch timeouts without a majority.
constexpr int64_t check_quorum_factor_num = 3;
constexpr int64_t check_quorum_factor_den = 2;

template <class... Ts>
struct overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
overloaded(Ts...) -> overloaded<Ts...>;

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

std::string_view role_name(role r) {
  switch (r) {
    case role::unattached:
      return "unattached";
    case role::prospective:
      return "prospective";
    case role::candidate:
      return "candidate";
    case role::leader:
      return "leader";
    case role::follower:
      return "follower";
    case role::resigned:
      return "resigned";
  }
  return "?";
}

replica::replica(raft_config config, raft_log& log, std::optional<quorum_state> persisted, int64_t now_ms)
    : _config(std::move(config)), _log(log), _now_ms(now_ms), _flushed_end_offset(log.end_offset()) {
  _base_voter_set = _config.voter_set;
  load_voter_history();
  refresh_voters();
  _effects.voters_changed = false;  // the glue reads the set it starts with
  // Seeded per node so that nodes sharing a seed still draw different timeouts.
  _random_state = _config.random_seed ^
                  (static_cast<uint64_t>(static_cast<uint32_t>(_config.node_id)) * 0x9e3779b97f4a7c15ULL);
  // Correlation ids start at a random point so that a response to a request sent before a restart never
  // matches a request sent after it.
  _next_correlation_id = static_cast<int64_t>(next_random() >> 24);

  const quorum_state state = persisted.value_or(quorum_state{});
  _epoch = state.leader_epoch;
  _leader_id = state.leader_id;
  _voted_id = state.voted_id;
  _persisted = state;

  if (_is_voter && state.leader_id == _config.node_id) {
    // The leader state (follower progress, the high watermark) is gone with the process: like Kafka's
    // QuorumState.initialize, come back resigned and let a new election happen.
    _role = role::leader;  // so that become_resigned sees where it comes from
    _led_epoch = _epoch;
    become_resigned({});
  } else if (state.leader_id != no_leader && state.leader_id != _config.node_id) {
    become_follower(_epoch, state.leader_id);
  } else {
    become_unattached(_epoch, state.voted_id);
  }
  // A single voter is a majority of one: elect itself at once, as Kafka does.
  if (_is_voter && _voters.size() == 1 && _role != role::leader) become_prospective();
}

// ---------------------------------------------------------------------------------------------------------
// Events

void replica::tick(int64_t now_ms) {
  _now_ms = std::max(_now_ms, now_ms);
  switch (_role) {
    case role::unattached:
      if (_is_voter) {
        if (_now_ms >= _election_deadline_ms) become_prospective();
      } else {
        if (_fetch_in_flight && _now_ms >= _fetch_in_flight->deadline_ms) _fetch_in_flight.reset();
        maybe_send_fetch();
      }
      break;
    case role::prospective:
      if (_backoff_until_ms >= 0 ? _now_ms >= _backoff_until_ms : _now_ms >= _election_deadline_ms) {
        start_pre_vote_round();
      }
      break;
    case role::candidate:
      // Lost or timed out: wait the random, growing backoff (KafkaRaftClient.pollCandidate), so that two
      // candidates whose timeouts ended close together do not split the vote again, then canvass again
      // before bumping the epoch (KIP-996).
      if (_backoff_until_ms >= 0) {
        if (_now_ms >= _backoff_until_ms) become_prospective();
      } else if (_now_ms >= _election_deadline_ms) {
        _backoff_until_ms = _now_ms + election_backoff_ms();
      }
      break;
    case role::follower:
      if (_now_ms >= _fetch_deadline_ms) {
        if (_is_voter) {
          become_prospective();
        } else {
          become_unattached(_epoch, _voted_id);
        }
        break;
      }
      if (_fetch_in_flight && _now_ms >= _fetch_in_flight->deadline_ms) _fetch_in_flight.reset();
      if (_is_voter && _now_ms >= _update_voter_deadline_ms) {
        maybe_send_update_voter();
        _update_voter_deadline_ms = _now_ms + 3 * static_cast<int64_t>(_config.fetch_timeout_ms);
      }
      maybe_send_fetch();
      break;
    case role::leader: {
      if (_now_ms >= check_quorum_deadline_ms()) {
        become_resigned({});
        break;
      }
      if (_resign_requested) {
        resign();
        break;
      }
      if (_pending_voter_change && _now_ms >= _pending_voter_change->deadline_ms) {
        // LeaderState.maybeExpirePendingOperation: the record stays in the log and may still commit.
        answer_voter_change(error_code::request_timed_out);
      }
      std::vector<parked_fetch> due;
      std::erase_if(_parked_fetches, [&](const parked_fetch& p) {
        if (p.deadline_ms > _now_ms) return false;
        due.push_back(p);
        return true;
      });
      for (const parked_fetch& p : due) answer_parked_fetch(p);
      for (follower_progress& f : _followers) {
        if (f.state.voter && !f.acknowledged && _now_ms >= f.begin_resend_ms) {
          send(f.state.replica_id, new_correlation_id(),
               begin_quorum_epoch_request{f.state.replica_id, _config.node_id, _epoch});
          f.begin_resend_ms = _now_ms + _config.request_timeout_ms;
        }
      }
      break;
    }
    case role::resigned:
      if (_now_ms >= _election_deadline_ms) {
        // A leader that removed itself from the voters carries on as an observer
        // (KafkaRaftClient.pollResigned).
        if (_is_voter) {
          become_prospective();
        } else {
          become_unattached(_epoch, no_voter);
        }
        break;
      }
      if (_now_ms >= _end_quorum_resend_ms) {
        for (int32_t voter : _voters) {
          if (voter == _config.node_id || contains(_end_quorum_acknowledged, voter)) continue;
          send(voter, new_correlation_id(),
               end_quorum_epoch_request{_config.node_id, _epoch, _preferred_successors});
        }
        _end_quorum_resend_ms = _now_ms + _config.request_timeout_ms;
      }
      break;
  }
}

void replica::on_message(int32_t from, const raft_message& message) {
  if (from == _config.node_id) return;
  const int64_t correlation_id = message.correlation_id;
  std::visit(
      overloaded{
          [&](const vote_request& m) { handle_vote_request(from, correlation_id, m); },
          [&](const vote_response& m) { handle_vote_response(from, m); },
          [&](const begin_quorum_epoch_request& m) {
            handle_begin_quorum_epoch_request(from, correlation_id, m);
          },
          [&](const begin_quorum_epoch_response& m) { handle_begin_quorum_epoch_response(from, m); },
          [&](const end_quorum_epoch_request& m) {
            handle_end_quorum_epoch_request(from, correlation_id, m);
          },
          [&](const end_quorum_epoch_response& m) { handle_end_quorum_epoch_response(from, m); },
          [&](const fetch_request& m) { handle_fetch_request(from, correlation_id, m, true); },
          [&](const fetch_response& m) { handle_fetch_response(from, correlation_id, m); },
          [&](const fetch_snapshot_request& m) { handle_fetch_snapshot_request(from, correlation_id, m); },
          [&](const fetch_snapshot_response& m) { handle_fetch_snapshot_response(from, correlation_id, m); },
          // Served by the glue (raft_node::update_voter), never through here.
          [&](const update_voter_request&) {},
          [&](const update_voter_response& m) { handle_update_voter_response(m); },
      },
      message.body);
}

result<append_info> replica::append(const std::vector<std::vector<uint8_t>>& records) {
  if (_role != role::leader) {
    return status::error(error_code::not_leader_or_follower, "raft: only the leader appends");
  }
  if (records.empty()) return status::error(error_code::invalid_request, "raft: empty append");
  const int64_t first = _log.end_offset();
  std::vector<log_entry> entries;
  entries.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    entries.push_back(log_entry{first + static_cast<int64_t>(i), _epoch, entry_type::data, records[i],
                                /*batch_end=*/i + 1 == records.size()});
  }
  append_to_log(std::move(entries));
  maybe_advance_high_watermark();  // a single voter commits at once
  complete_parked_fetches();       // long-polling followers get the new entries
  return append_info{first, _log.end_offset() - 1, _epoch};
}

void replica::on_log_flushed(int64_t end_offset) {
  _flushed_end_offset = std::max(_flushed_end_offset, std::min(end_offset, _log.end_offset()));
  if (_role == role::leader) maybe_advance_high_watermark();
}

void replica::resign() {
  if (_role != role::leader) return;
  // Kafka's LeaderState.nonLeaderVotersByDescendingFetchOffset: the most caught-up voter is asked first.
  std::vector<const follower_progress*> voters;
  for (const follower_progress& f : _followers) {
    if (f.state.voter) voters.push_back(&f);
  }
  std::stable_sort(voters.begin(), voters.end(), [](const follower_progress* a, const follower_progress* b) {
    return a->state.log_end_offset > b->state.log_end_offset;
  });
  std::vector<int32_t> successors;
  for (const follower_progress* f : voters) successors.push_back(f->state.replica_id);
  become_resigned(std::move(successors));
}

effects replica::take_effects() {
  return std::exchange(_effects, effects{});
}

int64_t replica::next_deadline_ms() const {
  switch (_role) {
    case role::unattached:
      if (_is_voter) return _election_deadline_ms;
      return _fetch_in_flight ? _fetch_in_flight->deadline_ms : _next_fetch_ms;
    case role::prospective:
    case role::candidate:
      return _backoff_until_ms >= 0 ? _backoff_until_ms : _election_deadline_ms;
    case role::follower: {
      // While the glue stores a downloaded snapshot no fetch is due: only the fetch timeout.
      const bool storing = _snapshot_download && _snapshot_download->storing;
      int64_t next = std::min(_fetch_deadline_ms, _fetch_in_flight ? _fetch_in_flight->deadline_ms
                                                  : storing        ? _fetch_deadline_ms
                                                                   : _next_fetch_ms);
      if (_is_voter && _config.local_voter) next = std::min(next, _update_voter_deadline_ms);
      return next;
    }
    case role::leader: {
      if (_resign_requested) return _now_ms;
      int64_t next = check_quorum_deadline_ms();
      if (_pending_voter_change) next = std::min(next, _pending_voter_change->deadline_ms);
      for (const parked_fetch& p : _parked_fetches) next = std::min(next, p.deadline_ms);
      for (const follower_progress& f : _followers) {
        if (f.state.voter && !f.acknowledged) next = std::min(next, f.begin_resend_ms);
      }
      return next;
    }
    case role::resigned: {
      bool unacknowledged = false;
      for (int32_t voter : _voters) {
        if (voter != _config.node_id && !contains(_end_quorum_acknowledged, voter)) unacknowledged = true;
      }
      return unacknowledged ? std::min(_election_deadline_ms, _end_quorum_resend_ms) : _election_deadline_ms;
    }
  }
  return never;
}

std::vector<replica_progress> replica::progress() const {
  std::vector<replica_progress> out;
  if (_role != role::leader) return out;
  for (const follower_progress& f : _followers) out.push_back(f.state);
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Transitions

void replica::become_unattached(int32_t epoch, int32_t voted_id) {
  if (_role == role::leader) leave_leadership();
  _role = role::unattached;
  _epoch = epoch;
  _leader_id = no_leader;
  _voted_id = voted_id;
  persist();
  _granted.clear();
  _rejected.clear();
  _backoff_until_ms = -1;
  _fetch_in_flight.reset();
  _snapshot_download.reset();
  _election_deadline_ms = _now_ms + randomized_election_timeout();
  _next_fetch_ms = _now_ms;
  if (!_is_voter) maybe_send_fetch();  // an observer looks for the leader among the voters
}

void replica::become_prospective() {
  if (_role == role::leader) leave_leadership();
  // Nothing is persisted: the epoch, the vote and the leader stay as they are (KIP-996). A resigned leader
  // forgets itself as the leader; a follower remembers whom it followed, to return to it if the pre-vote
  // fails.
  if (_role == role::resigned) _leader_id = no_leader;
  _role = role::prospective;
  _fetch_in_flight.reset();
  _snapshot_download.reset();
  start_pre_vote_round();
}

bool replica::open_vote_round() {
  _granted.assign(1, _config.node_id);
  _rejected.clear();
  _backoff_until_ms = -1;
  _election_deadline_ms = _now_ms + randomized_election_timeout();
  return static_cast<int>(_granted.size()) >= majority();
}

void replica::start_pre_vote_round() {
  if (open_vote_round()) {
    become_candidate();
    return;
  }
  send_vote_requests(true);
}

void replica::become_candidate() {
  _role = role::candidate;
  _epoch += 1;
  _leader_id = no_leader;
  _voted_id = _config.node_id;
  persist();
  ++_election_retries;
  if (open_vote_round()) {
    become_leader();
    return;
  }
  send_vote_requests(false);
}

void replica::become_leader() {
  _role = role::leader;
  _resign_requested = false;
  _leader_id = _config.node_id;
  _led_epoch = _epoch;
  persist();
  _election_retries = 0;
  _backoff_until_ms = -1;
  _leader_since_ms = _now_ms;
  _fetch_in_flight.reset();
  _snapshot_download.reset();
  _followers.clear();
  _parked_fetches.clear();
  for (int32_t voter : _voters) {
    if (voter == _config.node_id) continue;
    follower_progress f;
    f.state.replica_id = voter;
    f.state.voter = true;
    _followers.push_back(f);
  }
  // KIP-595: the leader's first entry in its epoch is a LeaderChangeMessage; the high watermark passes it
  // before exposing anything of earlier epochs.
  _epoch_start_offset = _log.end_offset();
  append_to_log({log_entry{_epoch_start_offset, _epoch, entry_type::leader_change,
                           leader_change_payload(_config.node_id, _voters, _granted)}});
  start_reported_voters();
  if (_base_voter_set && _voter_history.empty() && !_base_voter_set->empty()) {
    // Kafka's LeaderState.appendStartOfEpochControlRecords: while the voter set is only in a snapshot (the
    // bootstrap checkpoint), the leader writes it into the log, so that a replica fetching from the log's
    // start (an observer to be added as a voter) learns it.
    const auto records = voter_set_control_records(*_base_voter_set);
    const int64_t next = _log.end_offset();
    append_to_log({log_entry{next, _epoch, entry_type::kraft_version, records[0].value, false},
                   log_entry{next + 1, _epoch, entry_type::voters, records[1].value, true}});
  }
  for (follower_progress& f : _followers) {
    send(f.state.replica_id, new_correlation_id(),
         begin_quorum_epoch_request{f.state.replica_id, _config.node_id, _epoch});
    f.begin_resend_ms = _now_ms + _config.request_timeout_ms;
  }
  maybe_advance_high_watermark();
}

void replica::become_follower(int32_t epoch, int32_t leader_id) {
  if (_role == role::leader) leave_leadership();
  if (epoch != _epoch) _voted_id = no_voter;  // the vote belongs to the old epoch
  _role = role::follower;
  _epoch = epoch;
  _leader_id = leader_id;
  persist();
  _election_retries = 0;
  _backoff_until_ms = -1;
  _granted.clear();
  _rejected.clear();
  _has_fetched = false;
  _leader_resigned = false;
  _fetch_in_flight.reset();
  _snapshot_download.reset();
  _next_fetch_ms = _now_ms;
  _fetch_deadline_ms = _now_ms + _config.fetch_timeout_ms;
  // FollowerState: a few rounds of Fetch before the first check of the voter's own entry.
  _update_voter_deadline_ms = _now_ms + 3 * static_cast<int64_t>(_config.fetch_timeout_ms);
  maybe_send_fetch();
}

void replica::become_resigned(std::vector<int32_t> preferred_successors) {
  if (_role == role::leader) leave_leadership();
  _role = role::resigned;
  _fetch_in_flight.reset();
  _snapshot_download.reset();
  _leader_id = _config.node_id;  // still the leader of this epoch on disk; it just no longer serves it
  persist();
  _preferred_successors = std::move(preferred_successors);
  _end_quorum_acknowledged.clear();
  _election_deadline_ms = _now_ms + randomized_election_timeout();
  for (int32_t voter : _voters) {
    if (voter == _config.node_id) continue;
    send(voter, new_correlation_id(),
         end_quorum_epoch_request{_config.node_id, _epoch, _preferred_successors});
  }
  _end_quorum_resend_ms = _now_ms + _config.request_timeout_ms;
}

void replica::leave_leadership() {
  // Parked fetches are answered rather than left to time out, so followers look for the next leader at once.
  for (const parked_fetch& p : _parked_fetches) {
    fetch_response response;
    response.error_code = error_code::not_leader_or_follower;
    response.current_leader = {no_leader, _epoch};
    send(p.replica_id, p.correlation_id, std::move(response));
  }
  _parked_fetches.clear();
  _followers.clear();
  _reported_voters.clear();
  if (_pending_voter_change) answer_voter_change(error_code::not_leader_or_follower);
}

// Kafka's maybeTransition / maybeHandleCommonResponse: a higher epoch always wins; a leader named for the
// current epoch ends an election. Returns whether the role changed.
bool replica::observe_epoch(int32_t epoch, int32_t leader_id) {
  if (epoch > _epoch) {
    if (leader_id != no_leader && leader_id != _config.node_id) {
      become_follower(epoch, leader_id);
    } else {
      become_unattached(epoch, no_voter);
    }
    return true;
  }
  if (epoch != _epoch || leader_id == no_leader || leader_id == _config.node_id) return false;
  MALA_ASSERT(_led_epoch != _epoch, "another node claims the leadership of an epoch this node led ({})",
              state_for_logs());
  switch (_role) {
    case role::unattached:
    case role::candidate:
      become_follower(epoch, leader_id);
      return true;
    case role::prospective:
      if (_leader_id == no_leader) {
        become_follower(epoch, leader_id);
        return true;
      }
      MALA_ASSERT(_leader_id == leader_id, "two leaders named for one epoch ({})", state_for_logs());
      return false;
    case role::follower:
      MALA_ASSERT(_leader_id == leader_id, "two leaders named for one epoch ({})", state_for_logs());
      return false;
    case role::leader:
    case role::resigned:
      MALA_ASSERT(false, "another leader in this node's epoch ({})", state_for_logs());
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------------
// Elections

void replica::send_vote_requests(bool pre_vote) {
  for (int32_t voter : _voters) {
    if (voter == _config.node_id) continue;
    send(
        voter, new_correlation_id(),
        vote_request{_epoch, _config.node_id, voter, _log.last_fetched_epoch(), _log.end_offset(), pre_vote});
  }
}

void replica::count_vote(int32_t from, bool granted) {
  if (contains(_granted, from) || contains(_rejected, from)) return;
  (granted ? _granted : _rejected).push_back(from);
  if (static_cast<int>(_granted.size()) >= majority()) {
    if (_role == role::prospective) {
      become_candidate();
    } else {
      become_leader();
    }
    return;
  }
  const int voters = static_cast<int>(_voters.size());
  if (_backoff_until_ms >= 0 || static_cast<int>(_rejected.size()) <= voters - majority()) return;
  // The election cannot be won. A prospective that knew a leader goes back to it (KIP-996); otherwise wait a
  // random, growing backoff so that competing nodes do not collide again (KafkaRaftClient's
  // binaryExponentialElectionBackoffMs), rather than the whole election timeout.
  if (_role == role::prospective && _leader_id != no_leader) {
    become_follower(_epoch, _leader_id);
    return;
  }
  _backoff_until_ms = _now_ms + election_backoff_ms();
}

bool replica::can_grant_pre_vote() const {
  switch (_role) {
    case role::leader:
      return false;
    case role::follower:
      // KIP-996: a follower of a live leader refuses, so a node that lost contact alone cannot start an
      // election; before its first successful fetch (or after the leader resigned) it does grant, which
      // breaks the ping-pong of nodes turning each other back into followers of a dead leader.
      return !_has_fetched || _leader_resigned;
    default:
      return true;
  }
}

bool replica::can_grant_vote(int32_t candidate_id) const {
  switch (_role) {
    case role::unattached:
      return _voted_id == no_voter || _voted_id == candidate_id;
    case role::prospective:
      return _leader_id == no_leader && (_voted_id == no_voter || _voted_id == candidate_id);
    default:
      return false;  // a candidate voted for itself; a leader, follower or resigned leader knows the leader
  }
}

int64_t replica::election_backoff_ms() {
  const int retries = std::max(1, _election_retries);
  const int64_t slots = int64_t{2} << std::min(20, retries - 1);
  return std::min<int64_t>(election_backoff_base_ms * random_below(slots), _config.election_backoff_max_ms);
}

// KafkaRaftClient.strictExponentialElectionBackoffMs: the first preferred successor stands at once, the next
// ones after exponentially growing delays, anyone else after the maximum backoff.
int64_t replica::strict_exponential_backoff_ms(int position, int total) const {
  if (position == 0) return 0;
  if (position < 0 || position >= total) return _config.election_backoff_max_ms;
  const int64_t base = int64_t{_config.election_backoff_max_ms} >> (total - 1);
  return std::min<int64_t>(_config.election_backoff_max_ms, base << (position - 1));
}

// ---------------------------------------------------------------------------------------------------------
// Handlers

void replica::handle_vote_request(int32_t from, int64_t correlation_id, const vote_request& request) {
  auto reply = [&](error_code code, bool granted) {
    send(from, correlation_id,
         vote_response{code, current_leader().leader_id, _epoch, granted, request.pre_vote});
  };
  if (!_is_voter || !is_voter_id(request.candidate_id) || from != request.candidate_id) {
    reply(error_code::inconsistent_voter_set, false);
    return;
  }
  if (request.candidate_epoch < _epoch) {
    reply(error_code::fenced_leader_epoch,
          false);  // the answer carries the epoch (and leader) to catch up to
    return;
  }
  // A higher epoch moves this node to it even for a pre-vote (KAFKA-17641): a replica at that epoch exists.
  if (request.candidate_epoch > _epoch) become_unattached(request.candidate_epoch, no_voter);

  const bool up_to_date = offset_and_epoch{request.last_offset, request.last_offset_epoch} >=
                          offset_and_epoch{_log.end_offset(), _log.last_fetched_epoch()};
  if (request.pre_vote) {
    reply(error_code::none, up_to_date && can_grant_pre_vote());  // binding nothing, persisting nothing
    return;
  }
  const bool granted = up_to_date && can_grant_vote(request.candidate_id);
  if (granted && _voted_id != request.candidate_id) {
    // The vote is persisted (effects order) before the answer leaves; the timer restarts so this node does
    // not compete with the candidate it just voted for.
    become_unattached(_epoch, request.candidate_id);
  }
  reply(error_code::none, granted);
}

void replica::handle_vote_response(int32_t from, const vote_response& response) {
  if (!is_voter_id(from)) return;
  if (observe_epoch(response.leader_epoch, response.leader_id)) return;
  if (response.leader_epoch != _epoch || response.error_code != error_code::none) return;
  if (response.pre_vote ? _role == role::prospective : _role == role::candidate) {
    count_vote(from, response.vote_granted);
  }
}

error_code replica::check_leader_notice(int32_t from, int32_t leader_id, int32_t leader_epoch) const {
  if (leader_epoch < _epoch) return error_code::fenced_leader_epoch;
  if (from != leader_id || !is_voter_id(leader_id) || leader_id == _config.node_id) {
    return error_code::inconsistent_voter_set;
  }
  return error_code::none;
}

void replica::handle_begin_quorum_epoch_request(int32_t from, int64_t correlation_id,
                                                const begin_quorum_epoch_request& request) {
  auto reply = [&](error_code code) {
    send(from, correlation_id, begin_quorum_epoch_response{code, current_leader().leader_id, _epoch});
  };
  if (auto refused = check_leader_notice(from, request.leader_id, request.leader_epoch);
      refused != error_code::none) {
    reply(refused);
    return;
  }
  if (request.leader_epoch > _epoch || _role != role::follower || _leader_id != request.leader_id) {
    if (request.leader_epoch == _epoch) {
      MALA_ASSERT(_led_epoch != _epoch, "BeginQuorumEpoch from another leader of this node's epoch ({})",
                  state_for_logs());
      MALA_ASSERT(!((_role == role::follower || _role == role::prospective) && _leader_id != no_leader &&
                    _leader_id != request.leader_id),
                  "BeginQuorumEpoch from a second leader of the epoch ({})", state_for_logs());
    }
    become_follower(request.leader_epoch, request.leader_id);
  }
  reply(error_code::none);
}

void replica::handle_begin_quorum_epoch_response(int32_t from, const begin_quorum_epoch_response& response) {
  if (observe_epoch(response.leader_epoch, response.leader_id)) return;
  if (_role != role::leader || response.leader_epoch != _epoch || response.error_code != error_code::none)
    return;
  for (follower_progress& f : _followers) {
    if (f.state.replica_id == from) f.acknowledged = true;
  }
}

void replica::handle_end_quorum_epoch_request(int32_t from, int64_t correlation_id,
                                              const end_quorum_epoch_request& request) {
  auto reply = [&](error_code code) {
    send(from, correlation_id, end_quorum_epoch_response{code, current_leader().leader_id, _epoch});
  };
  if (auto refused = check_leader_notice(from, request.leader_id, request.leader_epoch);
      refused != error_code::none) {
    reply(refused);
    return;
  }
  observe_epoch(request.leader_epoch, request.leader_id);
  if (_role == role::follower && _leader_id == request.leader_id && _epoch == request.leader_epoch) {
    _leader_resigned = true;
    const auto& successors = request.preferred_successors;
    const auto it = std::find(successors.begin(), successors.end(), _config.node_id);
    const int position = it == successors.end() ? -1 : static_cast<int>(it - successors.begin());
    _fetch_deadline_ms =
        std::min(_fetch_deadline_ms,
                 _now_ms + strict_exponential_backoff_ms(position, static_cast<int>(successors.size())));
  }
  reply(error_code::none);
}

void replica::handle_end_quorum_epoch_response(int32_t from, const end_quorum_epoch_response& response) {
  if (observe_epoch(response.leader_epoch, response.leader_id)) return;
  if (_role != role::resigned || response.leader_epoch != _epoch || response.error_code != error_code::none)
    return;
  if (!contains(_end_quorum_acknowledged, from)) _end_quorum_acknowledged.push_back(from);
}

void replica::handle_fetch_request(int32_t from, int64_t correlation_id, const fetch_request& request,
                                   bool may_park) {
  auto reply_error = [&](error_code code) {
    fetch_response response;
    response.error_code = code;
    response.current_leader = current_leader();
    send(from, correlation_id, std::move(response));
  };
  // KafkaRaftClient.validateLeaderOnlyRequest. Non-leaders answer with what they know of the leader, which is
  // how an observer finds it.
  if (request.current_leader_epoch < _epoch) return reply_error(error_code::fenced_leader_epoch);
  if (request.current_leader_epoch > _epoch) return reply_error(error_code::unknown_leader_epoch);
  if (_role != role::leader) return reply_error(error_code::not_leader_or_follower);
  if (request.fetch_offset < 0 || request.last_fetched_epoch < 0 || request.last_fetched_epoch > _epoch) {
    return reply_error(error_code::invalid_request);
  }

  follower_progress& p = progress_of(from);
  // Kafka's ReplicaState.updateFollowerState: caught up when the fetch reaches the log end now, or the log
  // end as of its previous fetch (then since that fetch).
  if (request.fetch_offset >= _log.end_offset()) {
    p.state.last_caught_up_ms = _now_ms;
  } else if (p.previous_fetch_ms >= 0 && request.fetch_offset >= p.leader_end_at_previous_fetch) {
    p.state.last_caught_up_ms = std::max(p.state.last_caught_up_ms, p.previous_fetch_ms);
  }
  p.previous_fetch_ms = _now_ms;
  p.leader_end_at_previous_fetch = _log.end_offset();
  if (!request.replica_directory_id.is_zero()) p.state.directory_id = request.replica_directory_id;
  p.state.last_fetch_ms = _now_ms;
  p.state.seen_high_watermark = std::max(p.state.seen_high_watermark, p.sent_high_watermark);
  p.acknowledged = true;
  // The replica has one fetch in flight: a parked older one is obsolete.
  std::erase_if(_parked_fetches, [&](const parked_fetch& parked) { return parked.replica_id == from; });

  fetch_response response;
  response.current_leader = {_config.node_id, _epoch};
  // Kafka's ReplicatedLog.validateOffsetAndEpoch: the replica's log is a prefix of ours only if we hold its
  // last fetched epoch up to at least its fetch offset; otherwise point it at the end of the largest common
  // epoch.
  const offset_and_epoch end = _log.end_offset_for_epoch(request.last_fetched_epoch);
  if (const auto snapshot = snapshot_for_fetch(request, end)) {
    // KIP-630: the entries the replica needs are gone; it fetches the snapshot, then fetches on from its end.
    response.snapshot_id = *snapshot;
    response.high_watermark = _high_watermark;
    p.sent_high_watermark = _high_watermark;
    send(from, correlation_id, std::move(response));
    return;
  }
  if (end.epoch != request.last_fetched_epoch || end.offset < request.fetch_offset) {
    response.diverging_epoch = {end.epoch, end.offset};
    response.high_watermark = _high_watermark;
    send(from, correlation_id, std::move(response));
    return;
  }
  // A valid fetch offset is durable on the replica (it flushes before fetching) and matches our log.
  p.state.log_end_offset = request.fetch_offset;
  if (p.state.voter) maybe_advance_high_watermark();

  response.records = read_whole_writes(request.fetch_offset);
  if (response.records.empty() && may_park && request.max_wait_ms > 0 &&
      p.sent_high_watermark >= _high_watermark && request.high_watermark >= _high_watermark) {
    // Long poll: answered when entries arrive, the high watermark moves, or the wait ends. A replica that
    // has not been sent the high watermark, or says (Fetch v18, KIP-1166) it has an older one, is answered
    // now, as KafkaRaftClient's isHighWatermarkUpdated.
    _parked_fetches.push_back({from, correlation_id, request, _now_ms + request.max_wait_ms});
    return;
  }
  response.high_watermark = _high_watermark;
  p.sent_high_watermark = _high_watermark;
  send(from, correlation_id, std::move(response));
}

void replica::handle_fetch_response(int32_t from, int64_t correlation_id, const fetch_response& response) {
  // A higher epoch is a fact even in a stale response.
  if (response.current_leader.leader_epoch > _epoch) {
    observe_epoch(response.current_leader.leader_epoch, response.current_leader.leader_id);
    return;
  }
  if (!_fetch_in_flight || _fetch_in_flight->snapshot || _fetch_in_flight->correlation_id != correlation_id ||
      _fetch_in_flight->destination != from) {
    return;  // not the answer to the fetch in flight (duplicated, late, or from before a transition)
  }
  const fetch_in_flight sent = *_fetch_in_flight;
  _fetch_in_flight.reset();

  if (response.error_code != error_code::none) {
    if (observe_epoch(response.current_leader.leader_epoch, response.current_leader.leader_id)) return;
    if (_role == role::follower && from == _leader_id &&
        response.error_code == error_code::not_leader_or_follower) {
      _leader_resigned = true;  // our leader no longer serves the epoch
    }
    _next_fetch_ms = _now_ms + _config.retry_backoff_ms;
    return;
  }
  if (response.current_leader.leader_epoch != _epoch) return;
  if (_role != role::follower) {
    // An observer that asked a random voter, or a bootstrap server (which may be the leader under another
    // id), found the leader of its epoch: follow it (and fetch again).
    const int32_t leader = response.current_leader.leader_id;
    if (leader != no_leader && (leader == from || from <= bootstrap_server_id(0)))
      observe_epoch(_epoch, leader);
    return;
  }
  if (response.current_leader.leader_id != from) return;
  if (from != _leader_id) return;

  if (!_leader_resigned) _fetch_deadline_ms = _now_ms + _config.fetch_timeout_ms;
  _has_fetched = true;
  if (_log.end_offset() != sent.fetch_offset || _log.last_fetched_epoch() != sent.last_fetched_epoch) {
    maybe_send_fetch();  // the log moved since the request: its answer does not apply
    return;
  }

  if (response.diverging_epoch.epoch >= 0 || response.diverging_epoch.end_offset >= 0) {
    // Truncate to the end of the largest epoch both logs share (Kafka's truncateToEndOffset); the next fetch
    // either matches or walks further back, one epoch per round trip.
    const offset_and_epoch local = _log.end_offset_for_epoch(response.diverging_epoch.epoch);
    int64_t truncate_to = std::min(response.diverging_epoch.end_offset, local.offset);
    if (truncate_to >= _log.end_offset() || truncate_to < _log.start_offset()) {
      _next_fetch_ms = _now_ms + _config.retry_backoff_ms;  // nonsense from the wire: ask again later
      return;
    }
    // The leader's epoch end may fall inside one of our writes of an older epoch (it holds a prefix of the
    // epoch we wrote more of): cut the whole write, as Kafka truncates whole batches, so that this log never
    // ends inside a write (it could be elected with it and commit part of a write).
    truncate_to = write_start_at_or_before(truncate_to);
    MALA_ASSERT(truncate_to >= _high_watermark, "divergence below the high watermark ({})", state_for_logs());
    truncate_log(truncate_to);
    maybe_send_fetch();
    return;
  }

  if (response.snapshot_id) {
    // KIP-630: download the leader's snapshot (KafkaRaftClient.handleFetchResponse). It holds a committed
    // prefix, so it never ends below what this node knows to be committed.
    const offset_and_epoch id = *response.snapshot_id;
    if (id.offset <= 0 || id.epoch < 0 || id.epoch > _epoch || id.offset < _high_watermark) {
      _next_fetch_ms = _now_ms + _config.retry_backoff_ms;  // nonsense from the wire
      return;
    }
    if (!_snapshot_download || _snapshot_download->id != id) _snapshot_download = snapshot_download{id, {}};
    maybe_send_fetch();
    return;
  }

  if (!response.records.empty()) {
    int64_t expected = _log.end_offset();
    int32_t epoch = _log.last_fetched_epoch();
    for (const log_entry& e : response.records) {
      if (e.offset != expected || e.epoch < epoch || e.epoch > _epoch) {
        _next_fetch_ms = _now_ms + _config.retry_backoff_ms;  // records that do not continue our log
        return;
      }
      ++expected;
      epoch = e.epoch;
    }
    append_to_log(response.records);
  }
  if (response.high_watermark >= 0) {
    set_high_watermark(std::min(response.high_watermark, _log.end_offset()));
  }
  maybe_send_fetch();
}

// ---------------------------------------------------------------------------------------------------------
// Replication

void replica::maybe_send_fetch() {
  if (_fetch_in_flight || _now_ms < _next_fetch_ms) return;
  if (_role == role::follower) {
    if (_snapshot_download && _snapshot_download->storing) return;  // until the glue stored it
    if (_snapshot_download) {
      send_fetch_snapshot(_leader_id);
    } else {
      send_fetch(_leader_id);
    }
  } else if (_role == role::unattached && !_is_voter && _config.bootstrap_servers > 0) {
    send_fetch(bootstrap_server_id(static_cast<int32_t>(random_below(_config.bootstrap_servers))));
  } else if (_role == role::unattached && !_is_voter && !_voters.empty()) {
    send_fetch(_voters[static_cast<size_t>(random_below(static_cast<int64_t>(_voters.size())))]);
  }
}

void replica::send_fetch(int32_t destination) {
  const int64_t correlation_id = new_correlation_id();
  _fetch_in_flight = fetch_in_flight{destination, correlation_id, _log.end_offset(),
                                     _log.last_fetched_epoch(), _now_ms + _config.request_timeout_ms};
  send(destination, correlation_id,
       fetch_request{_config.node_id, _epoch, _log.end_offset(), _log.last_fetched_epoch(),
                     _config.fetch_max_wait_ms, _config.directory_id, _high_watermark});
}

replica::follower_progress& replica::progress_of(int32_t replica_id) {
  for (follower_progress& f : _followers) {
    if (f.state.replica_id == replica_id) return f;
  }
  follower_progress observer;
  observer.state.replica_id = replica_id;
  observer.state.voter = false;
  observer.acknowledged = true;
  _followers.push_back(observer);
  return _followers.back();
}

void replica::maybe_advance_high_watermark() {
  // The leader counts only what it has flushed (KafkaRaftClient updates the leader's own end offset after
  // flushing its log), so an entry is never committed on a majority that holds it only in page caches.
  // A leader that removed itself from the voters (KIP-853) counts only the others until it resigns.
  std::vector<int64_t> offsets;
  if (_is_voter) offsets.push_back(std::min(_log.end_offset(), _flushed_end_offset));
  for (const follower_progress& f : _followers) {
    if (f.state.voter) offsets.push_back(f.state.log_end_offset);
  }
  offsets.resize(_voters.size(), -1);  // a voter not tracked (none expected) holds nothing
  std::sort(offsets.begin(), offsets.end(), std::greater<>());
  const int64_t replicated = offsets[_voters.size() / 2];  // held by a majority
  if (replicated > _epoch_start_offset && replicated > _high_watermark) {
    set_high_watermark(replicated);
    complete_parked_fetches();  // followers learn the new high watermark without waiting out the long poll
    maybe_complete_voter_change();
  }
}

void replica::set_high_watermark(int64_t high_watermark) {
  if (high_watermark <= _high_watermark) return;
  _high_watermark = high_watermark;
  _effects.high_watermark = high_watermark;
}

void replica::complete_parked_fetches() {
  std::vector<parked_fetch> parked = std::exchange(_parked_fetches, {});
  for (const parked_fetch& p : parked) answer_parked_fetch(p);
}

void replica::answer_parked_fetch(const parked_fetch& parked) {
  // Validated when it arrived; the leader's log has only grown since.
  fetch_response response;
  response.current_leader = {_config.node_id, _epoch};
  if (parked.request.fetch_offset < _log.start_offset()) {
    response.snapshot_id = _log.latest_snapshot();  // delete_before_snapshot() ran while it waited
  } else {
    response.records = read_whole_writes(parked.request.fetch_offset);
  }
  response.high_watermark = _high_watermark;
  progress_of(parked.replica_id).sent_high_watermark = _high_watermark;
  send(parked.replica_id, parked.correlation_id, std::move(response));
}

std::vector<log_entry> replica::read_whole_writes(int64_t from_offset) const {
  // Up to fetch_max_entries entries, cut back to the last whole write; a write longer than that is sent
  // whole (a write is bounded by the leader's batch limit).
  std::vector<log_entry> out = _log.read(from_offset, static_cast<size_t>(_config.fetch_max_entries));
  size_t whole = out.size();
  while (whole > 0 && !out[whole - 1].batch_end) --whole;
  if (whole > 0) {
    out.resize(whole);
    return out;
  }
  while (!out.empty() && !out.back().batch_end && out.back().offset + 1 < _log.end_offset()) {
    std::vector<log_entry> more =
        _log.read(out.back().offset + 1, static_cast<size_t>(_config.fetch_max_entries));
    if (more.empty()) break;
    for (log_entry& e : more) {
      const bool end = e.batch_end;
      out.push_back(std::move(e));
      if (end) break;
    }
  }
  if (!out.empty() && !out.back().batch_end) out.clear();  // the leader's own write is never partial
  return out;
}

int64_t replica::check_quorum_deadline_ms() const {
  const int needed = majority() - (_is_voter ? 1 : 0);  // besides the leader itself, while a voter
  if (needed <= 0) return never;
  std::vector<int64_t> last_fetch;
  for (const follower_progress& f : _followers) {
    if (f.state.voter) last_fetch.push_back(std::max(f.state.last_fetch_ms, _leader_since_ms));
  }
  std::sort(last_fetch.begin(), last_fetch.end(), std::greater<>());
  const int64_t timeout =
      int64_t{_config.fetch_timeout_ms} * check_quorum_factor_num / check_quorum_factor_den;
  return last_fetch[static_cast<size_t>(needed - 1)] + timeout;
}

int64_t replica::write_start_at_or_before(int64_t offset) const {
  while (offset > _log.start_offset()) {
    const std::vector<log_entry> before = _log.read(offset - 1, 1);
    if (before.empty() || before.front().batch_end) break;
    --offset;
  }
  return offset;
}

void replica::append_to_log(std::vector<log_entry> entries) {
  _log.append(entries);
  track_voter_entries(entries);
  _effects.log_operations.emplace_back(log_append{std::move(entries)});
}

void replica::truncate_log(int64_t offset) {
  _log.truncate_to(offset);
  _flushed_end_offset = std::min(_flushed_end_offset, offset);
  _effects.log_operations.emplace_back(log_truncation{offset});
  forget_voter_entries_from(offset);
}

// ---------------------------------------------------------------------------------------------------------
// Plumbing

void replica::persist() {
  const quorum_state state{_epoch, _leader_id, _voted_id};
  if (state == _persisted) return;
  _persisted = state;
  _effects.quorum_state_to_persist = state;
}

void replica::send(int32_t destination, int64_t correlation_id, raft_message_body body) {
  _effects.messages.push_back(outbound_message{destination, raft_message{correlation_id, std::move(body)}});
}

uint64_t replica::next_random() {
  // splitmix64: tiny, and the same sequence on every platform (std distributions are not).
  uint64_t z = (_random_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int64_t replica::random_below(int64_t bound) {
  if (bound <= 1) return 0;
  return static_cast<int64_t>(next_random() % static_cast<uint64_t>(bound));
}

leader_id_and_epoch replica::current_leader() const {
  switch (_role) {
    case role::leader:
    case role::follower:
    case role::prospective:
      return {_leader_id, _epoch};
    default:
      return {no_leader, _epoch};
  }
}

bool replica::is_voter_id(int32_t id) const {
  return contains(_voters, id);
}

std::string replica::state_for_logs() const {
  return fmt::format("node {}, {}, epoch {}, leader {}, voted {}", _config.node_id, role_name(_role), _epoch,
                     _leader_id, _voted_id);
}

}  // namespace mala::raft
