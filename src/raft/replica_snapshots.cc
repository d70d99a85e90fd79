// raft::replica's KIP-630 part: snapshots of the committed prefix (create_snapshot, delete_before_snapshot),
// the leader answering a Fetch below its log start with its snapshot id and serving FetchSnapshot chunks, and
// a follower downloading and installing one. The rest of the state machine is in replica.cc, the voter
// changes in replica_voters.cc.
#include <algorithm>
#include <string>
#include <utility>

#include "mala/common/assert.h"
#include "mala/raft/replica.h"

namespace mala::raft {

bool replica::may_create_snapshot(offset_and_epoch id) const {
  // KafkaRaftClient.createSnapshot / KafkaMetadataLog.createNewSnapshot: only a committed prefix, and only
  // one whose id names an entry of this log. A snapshot at 0 holds nothing (Kafka's bootstrap snapshot id).
  if (id.offset <= 0 || id.offset > _high_watermark || id.offset > _log.end_offset()) return false;
  const auto latest = _log.latest_snapshot();
  if (latest && *latest == id) return true;
  if (id.offset <= _log.start_offset()) return false;  // before the entries held: nothing to check it against
  const std::vector<log_entry> last = _log.read(id.offset - 1, 1);
  return last.size() == 1 && last[0].epoch == id.epoch;
}

bool replica::create_snapshot(offset_and_epoch id, std::span<const uint8_t> payload) {
  return may_create_snapshot(id) && _log.write_snapshot(id, payload);
}

void replica::delete_before_snapshot() {
  const auto latest = _log.latest_snapshot();
  if (!latest) return;
  _log.delete_before(latest->offset);
  // The VotersRecords now gone from the log: the last of them is the voter set at its start.
  while (!_voter_history.empty() && _voter_history.front().offset < _log.start_offset()) {
    _base_voter_set = std::move(_voter_history.front().voters);
    _voter_history.erase(_voter_history.begin());
  }
}

// Kafka's ReplicatedLog.validateOffsetAndEpoch: a fetch offset below the log start, or a divergence at or
// before it (the replica's last fetched epoch is older than the snapshot at the log start, so truncating
// would have to go below the entries held), is answered with the latest snapshot.
std::optional<offset_and_epoch> replica::snapshot_for_fetch(const fetch_request& request,
                                                            const offset_and_epoch& end) const {
  const int64_t start = _log.start_offset();
  if (start == 0) return std::nullopt;
  const auto latest = _log.latest_snapshot();
  if (!latest) return std::nullopt;
  if (request.fetch_offset < start) return latest;
  if (latest->offset == start) {
    // The snapshot at the log start is known: Kafka's rule exactly.
    if ((request.fetch_offset == start && request.last_fetched_epoch != latest->epoch) ||
        request.last_fetched_epoch < latest->epoch) {
      return latest;
    }
    return std::nullopt;
  }
  // The epoch at the log start is not known here: a divergence that would truncate to the log start or
  // before it gets the snapshot (at worst one Kafka would have answered with a DivergingEpoch).
  const bool diverging = end.epoch != request.last_fetched_epoch || end.offset < request.fetch_offset;
  if (diverging && end.offset <= start) return latest;
  return std::nullopt;
}

void replica::handle_fetch_snapshot_request(int32_t from, int64_t correlation_id,
                                            const fetch_snapshot_request& request) {
  auto reply_error = [&](error_code code) {
    fetch_snapshot_response response;
    response.error_code = code;
    response.snapshot_id = request.snapshot_id;
    response.current_leader = current_leader();
    send(from, correlation_id, std::move(response));
  };
  // KafkaRaftClient.handleFetchSnapshotRequest: validateLeaderOnlyRequest, then the snapshot and position.
  if (request.current_leader_epoch < _epoch) return reply_error(error_code::fenced_leader_epoch);
  if (request.current_leader_epoch > _epoch) return reply_error(error_code::unknown_leader_epoch);
  if (_role != role::leader) return reply_error(error_code::not_leader_or_follower);
  // A snapshot at 0 (the bootstrap checkpoint) is never served, as Kafka does not either.
  const int64_t max_bytes = std::max(request.max_bytes, 1);
  auto chunk = request.snapshot_id.offset > 0
                   ? _log.read_snapshot_chunk(request.snapshot_id, request.position, max_bytes)
                   : std::nullopt;
  if (!chunk) return reply_error(error_code::snapshot_not_found);
  const int64_t size = chunk->size;
  // Kafka refuses position >= size; an empty snapshot is served at position 0 here, else it could never be
  // fetched.
  if (request.position < 0 || request.position > size || (request.position == size && size > 0)) {
    return reply_error(error_code::position_out_of_range);
  }
  // A replica fetching a snapshot is following this leader (LeaderState.updateCheckQuorumForFollowingVoter).
  follower_progress& p = progress_of(from);
  p.state.last_fetch_ms = _now_ms;
  p.acknowledged = true;

  fetch_snapshot_response response;
  response.snapshot_id = request.snapshot_id;
  response.size = size;
  response.position = request.position;
  response.bytes = std::move(chunk->bytes);
  response.current_leader = {_config.node_id, _epoch};
  send(from, correlation_id, std::move(response));
}

void replica::handle_fetch_snapshot_response(int32_t from, int64_t correlation_id,
                                             const fetch_snapshot_response& response) {
  if (response.current_leader.leader_epoch > _epoch) {
    observe_epoch(response.current_leader.leader_epoch, response.current_leader.leader_id);
    return;
  }
  if (!_fetch_in_flight || !_fetch_in_flight->snapshot ||
      _fetch_in_flight->correlation_id != correlation_id || _fetch_in_flight->destination != from) {
    return;
  }
  _fetch_in_flight.reset();
  auto abandon = [&] {
    // Start over with a Fetch: the leader names the snapshot it holds now.
    _snapshot_download.reset();
    _next_fetch_ms = _now_ms + _config.retry_backoff_ms;
  };
  if (response.error_code != error_code::none) {
    if (observe_epoch(response.current_leader.leader_epoch, response.current_leader.leader_id)) return;
    if (_role == role::follower && from == _leader_id &&
        response.error_code == error_code::not_leader_or_follower) {
      _leader_resigned = true;
    }
    if (response.error_code == error_code::snapshot_not_found ||
        response.error_code == error_code::position_out_of_range) {
      abandon();  // the leader deleted it meanwhile (Kafka starts over the same way)
      return;
    }
    _next_fetch_ms = _now_ms + _config.retry_backoff_ms;
    return;
  }
  if (response.current_leader.leader_id != from || response.current_leader.leader_epoch != _epoch) return;
  if (_role != role::follower || from != _leader_id || !_snapshot_download) return;

  if (!_leader_resigned) _fetch_deadline_ms = _now_ms + _config.fetch_timeout_ms;
  _has_fetched = true;
  snapshot_download& download = *_snapshot_download;
  const auto received = static_cast<int64_t>(download.bytes.size());
  if (response.snapshot_id != download.id || response.position != received || response.size < 0 ||
      response.size - received < static_cast<int64_t>(response.bytes.size()) ||
      (response.bytes.empty() && received != response.size)) {
    abandon();  // not the chunk asked for (Kafka throws; from the wire it is answered by starting over)
    return;
  }
  download.bytes.insert(download.bytes.end(), response.bytes.begin(), response.bytes.end());
  if (static_cast<int64_t>(download.bytes.size()) == response.size) {
    const offset_and_epoch id = download.id;
    // KIP-853: the snapshot's voter set is the one at the new log start.
    // A static quorum's snapshot has none (kraft.version 0), unless the quorum was upgraded before it. With a
    // voter set in effect, a snapshot whose voters cannot be read is not installed; a static replica takes
    // such a payload as one without voters (its state machine reads the rest).
    std::optional<std::vector<voter_info>> snapshot_voters;
    auto in_snapshot = voter_set_in_snapshot(download.bytes);
    if (in_snapshot.ok()) {
      snapshot_voters = std::move(*in_snapshot);
    } else if (voter_set()) {
      abandon();
      return;
    }
    if (_config.glue_stores_snapshots) {
      // The glue writes and syncs the file away from this thread; nothing goes to the leader meanwhile.
      download.storing = true;
      download.voters = std::move(snapshot_voters);
      _effects.snapshot_to_store = effects::snapshot_file{id, std::move(download.bytes)};
      download.bytes.clear();
      return;
    }
    if (!_log.install_snapshot(id, download.bytes)) {
      abandon();
      return;
    }
    finish_snapshot_install(id, std::move(snapshot_voters));
  }
  maybe_send_fetch();
}

bool replica::snapshot_stored(offset_and_epoch id, bool stored) {
  if (_role != role::follower || !_snapshot_download || !_snapshot_download->storing ||
      _snapshot_download->id != id) {
    return false;
  }
  if (!stored || !_log.install_stored_snapshot(id)) {
    // Start over with a Fetch: the leader names the snapshot it holds now.
    _snapshot_download.reset();
    _next_fetch_ms = _now_ms + _config.retry_backoff_ms;
    maybe_send_fetch();
    return false;  // a stored file the log refused stays, for the next start to judge as a crash would
  }
  finish_snapshot_install(id, std::move(_snapshot_download->voters));
  maybe_send_fetch();
  return true;
}

void replica::finish_snapshot_install(offset_and_epoch id,
                                      std::optional<std::vector<voter_info>> snapshot_voters) {
  if (snapshot_voters) _base_voter_set = std::move(*snapshot_voters);
  _voter_history.clear();
  refresh_voters();
  _snapshot_download.reset();
  _flushed_end_offset = id.offset;  // the snapshot is durable once installed
  _effects.snapshot_installed = id;
  // The snapshot is of a committed prefix: the high watermark is at least its end (Kafka's follower takes
  // the log's high watermark, which install moved to the log start).
  set_high_watermark(id.offset);
}

void replica::send_fetch_snapshot(int32_t destination) {
  const int64_t correlation_id = new_correlation_id();
  _fetch_in_flight =
      fetch_in_flight{destination, correlation_id, -1, -1, _now_ms + _config.request_timeout_ms, true};
  send(destination, correlation_id,
       fetch_snapshot_request{_config.node_id, _epoch, _snapshot_download->id,
                              static_cast<int64_t>(_snapshot_download->bytes.size()),
                              _config.fetch_snapshot_max_bytes});
}

}  // namespace mala::raft
