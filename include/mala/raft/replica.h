// One member of a KRaft-style Raft quorum as a pure, deterministic state machine: no I/O, no clock, no
// threads. The network/storage glue (raft_node) feeds it events and carries out the effects it returns;
// the deterministic simulation in tests/unit/raft/ drives it the same way over a simulated clock and network.
//
// Protocol: Kafka's KRaft, KIP-595 (Raft for the metadata quorum) with KIP-996 (pre-vote) and Kafka's
// check-quorum (KAFKA-15489). Voters come from controller.quorum.voters (fixed), or (KIP-853, kraft.version
// 1) from the log: the voter set of the log's start (the latest snapshot's, which the glue reads), then every
// VotersRecord in the log, the last one in effect as soon as it is appended, committed or not, and undone by
// a truncation (Kafka's KRaftControlRecordStateMachine). Any other node is an observer that only fetches; an
// observer that a VotersRecord adds becomes a voter, a voter it removes an observer.
//
// Voter changes (KIP-853, Kafka's AddVoterHandler / RemoveVoterHandler), leader only, one at a time:
// add_voter() and remove_voter() check the request (kraft.version 1, no change pending, the high watermark
// established in this epoch and past the last VotersRecord, the voter new or present; a new voter must be an
// observer fetching with the same directory id that caught up with the leader's log), append a VotersRecord
// with the new set and answer once the high watermark passes it (a majority of the new set has it), with
// REQUEST_TIMED_OUT after controller.quorum.request.timeout.ms, or NOT_LEADER_OR_FOLLOWER when the
// leadership ends first. A leader that removed itself leads until the change commits (its own log no longer
// counts toward the high watermark), then resigns and carries on as an observer.
//
// Roles (Kafka's EpochState classes):
//   unattached   knows an epoch but no leader; may have voted in it. A voter becomes prospective when its
//                randomised election timeout expires (controller.quorum.election.timeout.ms + random jitter
//                of up to the same); an observer keeps fetching from a random voter (or, with
//                controller.quorum.bootstrap.servers, a random bootstrap server) to discover the leader.
//   prospective  KIP-996: asks every voter for a pre-vote (VoteRequest with PreVote=true and its *current*
//                epoch) without bumping its epoch or persisting anything. A majority of grants (itself
//                included) makes it a candidate; a majority of rejections sends it back to the leader it
//                knew, or, with none, into a random binary-exponential backoff (up to
//                controller.quorum.election.backoff.max.ms). A voter grants a pre-vote only when the
//                request's log is at least as up to date as its own and it is not following a live leader (a
//                follower grants only before its first successful fetch or after the leader resigned, Kafka's
//                fix for the prospective/follower ping-pong). So a node that was partitioned away rejoins
//                without bumping anyone's epoch: its pre-votes fail and the answers tell it the current
//                leader and epoch.
//   candidate    bumps the epoch, votes for itself (persisted) and sends VoteRequests. Elected with a
//                majority; with a majority of rejections it backs off, then becomes prospective again, as it
//                does when its election timeout expires.
//   leader       persists the win, appends a leader_change entry (Kafka's LeaderChangeMessage control record)
//                at the start of its epoch and sends BeginQuorumEpoch to the other voters (resent every
//                controller.quorum.request.timeout.ms until a voter acknowledges or fetches). It serves
//                Fetch: long-polls up to the request's max wait when it has nothing new for the replica;
//                answers records, or a DivergingEpoch when (fetch offset, last fetched epoch) is not a prefix
//                of its log. It resigns (check quorum) when it has not heard a Fetch from a majority of
//                voters for 1.5 x controller.quorum.fetch.timeout.ms, and on resign() it sends EndQuorumEpoch
//                with the other voters ordered by how far they have replicated.
//   follower     fetches from the leader with (fetch offset = log end, last fetched epoch), one Fetch in
//                flight; appends the records, or truncates to the divergence point; learns the high watermark
//                from the response. No successful Fetch for controller.quorum.fetch.timeout.ms: a voter
//                becomes prospective, an observer unattached. An EndQuorumEpoch shortens that timeout by the
//                voter's position among the preferred successors (Kafka's strict exponential backoff).
//   resigned     the leader after resign() or check quorum, or a node restarting from a persisted leadership:
//                no longer serves its epoch, resends EndQuorumEpoch, becomes prospective after an election
//                timeout.
//
// Votes (KIP-595): one per epoch, persisted before the answer is sent; granted only when the candidate's
// (LastOffsetEpoch, LastOffset) is at least this node's (last epoch, log end offset), compared epoch first.
// Any message carrying a higher epoch moves a node to that epoch (follower when the leader is named, else
// unattached).
//
// Commitment: the leader's high watermark (exclusive) is the largest offset that a majority of voters (itself
// included) has replicated, counting only the fetch offsets followers sent in this epoch; it advances only
// past the epoch's first entry (the leader_change entry), so entries of earlier epochs are committed only
// together with one of the leader's own (Raft's commitment rule; Kafka's
// LeaderState.maybeUpdateHighWatermark). It never goes backwards. Followers take min(leader's high watermark,
// own log end). The high watermark is not persisted (Kafka does not either): a restarted node starts at 0 and
// learns it again.
//
// Interface. Events: tick(now_ms) (the only source of time; messages and appends are handled at the time of
// the last tick), on_message(from, message), append(records) on the leader, resign(). Each event may leave
// effects, collected until take_effects(). The glue applies one batch of effects in this order:
//   1. quorum_state_to_persist: write (and fsync) the quorum-state file;
//   2. log_operations: make the truncations and appends durable (the replica already made them through
//      raft_log, the page-cache part; a glue whose raft_log is storage::partition_log only flushes), then
//      report it with on_log_flushed() (the leader's own log counts toward the high watermark only up to
//      the flushed offset, as in Kafka);
//   3. messages: send;
//   4. high_watermark: expose the new committed offset (apply committed records).
// Steps 1-2 before 3 are what Raft's safety needs: a vote or a fetch offset is only announced once it is
// durable. next_deadline_ms() tells the glue when to tick next if nothing else happens.
//
// Snapshots (KIP-630). The glue snapshots its state machine at a committed offset with create_snapshot() (or
// checks the id with may_create_snapshot(), writes the snapshot into the log itself, away from this thread,
// as raft_node does) and may then drop the entries before it with delete_before_snapshot(). The leader
// answers a Fetch whose offset is below its log start (or whose divergence point falls at or before it) with
// its latest snapshot id instead of records; the follower then downloads that snapshot in FetchSnapshot
// chunks of fetch_snapshot_max_bytes (one request in flight, resumed at its byte position), installs it
// through raft_log::install_snapshot (durable on return), reports `effects::snapshot_installed` (the glue
// reloads its state machine from it), takes the snapshot's end offset as its high watermark if that is
// higher, and fetches on from there (KafkaRaftClient.handleFetchSnapshotResponse). Leaving the follower state
// abandons a partial download. With `raft_config::glue_stores_snapshots` the glue writes and syncs the
// downloaded snapshot's file itself, away from this thread (`effects::snapshot_to_store`), and calls
// snapshot_stored(); the follower sends nothing to the leader meanwhile, and then installs it through
// raft_log::install_stored_snapshot.
//
// The persisted quorum state survives a restart together with the log: a restarted replica is constructed
// from both; everything else (votes received, follower progress, the high watermark) is rebuilt.
//
// Threads: a replica is used by one thread (shard 0 in the broker). Its invariants (one leader per epoch) are
// checked with aborts that stay on in release builds: breaking them would silently lose committed data.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mala/common/result.h"
#include "mala/common/uuid.h"
#include "mala/raft/log.h"
#include "mala/raft/messages.h"
#include "mala/raft/voter_set.h"

namespace mala::raft {

struct raft_config {
  int32_t node_id = -1;
  std::vector<int32_t> voters;  // controller.quorum.voters (ids); a node not listed is an observer
  // controller.quorum.bootstrap.servers as destinations (bootstrap_server_id(i)): an observer that knows no
  // leader fetches from a random one of them (KIP-853) rather than from a random voter.
  int32_t bootstrap_servers = 0;
  int32_t election_timeout_ms = 1000;              // controller.quorum.election.timeout.ms
  int32_t fetch_timeout_ms = 2000;                 // controller.quorum.fetch.timeout.ms
  int32_t election_backoff_max_ms = 1000;          // controller.quorum.election.backoff.max.ms
  int32_t request_timeout_ms = 2000;               // controller.quorum.request.timeout.ms
  int32_t retry_backoff_ms = 20;                   // controller.quorum.retry.backoff.ms
  int32_t fetch_max_wait_ms = 500;                 // KafkaRaftClient's fetchMaxWaitMs (long poll)
  int32_t fetch_max_entries = 512;                 // entries per Fetch response (Kafka bounds bytes instead)
  int32_t fetch_snapshot_max_bytes = 1024 * 1024;  // FetchSnapshot MaxBytes: the chunk a follower asks for
  // A downloaded snapshot is handed to the glue to store (effects::snapshot_to_store, then snapshot_stored())
  // rather than written through raft_log::install_snapshot on this thread.
  bool glue_stores_snapshots = false;
  uint64_t random_seed = 0;  // election jitter and backoff; the only randomness
  // KIP-853 (kraft.version 1): the voter set at the start of the log (the latest snapshot's, or the
  // bootstrap checkpoint's); VotersRecords in the log change it. `voters` is then ignored. nullopt: static
  // voters (kraft.version 0).
  std::optional<std::vector<voter_info>> voter_set;
  uuid directory_id;  // the metadata log dir's directory.id: this node's ReplicaKey with node_id
  // KIP-853: this node's entry as the voter set should hold it (its default controller listener). A voter
  // following the leader whose entry differs sends UpdateRaftVoter every 3 fetch timeouts until it matches
  // (KafkaRaftClient.pollFollowerAsVoter); with static voters (kraft.version 0) it sends one per epoch, so
  // that a Kafka 4.4 leader learns its directory id and kraft.version range. nullopt: never sent.
  std::optional<voter_info> local_voter;
  int16_t max_kraft_version = 1;  // the kraft.version range this node supports: 0 to this
};

// The destination id of the i-th bootstrap server (Kafka's QuorumConfig gives them negative ids from -2; -1
// is "no node").
constexpr int32_t bootstrap_server_id(int32_t i) {
  return -2 - i;
}

// Kafka's QuorumStateData (the quorum-state file): the epoch, the leader if known, the vote cast in the
// epoch.
struct quorum_state {
  int32_t leader_epoch = 0;
  int32_t leader_id = no_leader;
  int32_t voted_id = no_voter;

  bool operator==(const quorum_state&) const = default;
};

struct log_truncation {
  int64_t offset = 0;  // entries at and after it were removed
};
struct log_append {
  std::vector<log_entry> entries;
};
using log_operation = std::variant<log_truncation, log_append>;

// The answer to add_voter() / remove_voter() (AddRaftVoter / RemoveRaftVoter).
struct voter_change_answer {
  int64_t request_id = 0;
  error_code error = error_code::none;
  std::string message;  // empty: Kafka's default message for the error
};

struct effects {
  std::optional<quorum_state> quorum_state_to_persist;  // the latest state; supersedes earlier ones
  std::vector<log_operation> log_operations;            // in order
  std::vector<outbound_message> messages;
  std::optional<int64_t> high_watermark;  // the new committed offset (exclusive), when it moved
  // A snapshot fetched from the leader replaced the whole log (raft_log::install_snapshot, already durable):
  // the glue reloads its state machine from log().read_snapshot(id). Log operations of the same event come
  // after it; a glue that takes effects less often than once per event sees at most one install per batch.
  std::optional<offset_and_epoch> snapshot_installed;
  // With raft_config::glue_stores_snapshots: a snapshot downloaded whole, for the glue to write and sync as
  // the log's snapshot file `id` (off this thread), then to call snapshot_stored(id, ...).
  struct snapshot_file {
    offset_and_epoch id;
    std::vector<uint8_t> payload;
  };
  std::optional<snapshot_file> snapshot_to_store;
  std::vector<voter_change_answer> voter_change_answers;
  bool voters_changed = false;  // the voter set in effect changed (the glue learns the new voters' endpoints)

  bool empty() const {
    return !quorum_state_to_persist && log_operations.empty() && messages.empty() && !high_watermark &&
           !snapshot_installed && !snapshot_to_store && voter_change_answers.empty() && !voters_changed;
  }
};

enum class role : int8_t { unattached, prospective, candidate, leader, follower, resigned };
std::string_view role_name(role r);

// Where a client append landed.
struct append_info {
  int64_t first_offset = 0;
  int64_t last_offset = 0;
  int32_t epoch = 0;
};

// What the leader knows about one replica (for DescribeQuorum).
struct replica_progress {
  int32_t replica_id = -1;
  uuid directory_id;  // from its Fetch requests (ReplicaDirectoryId); zero when it sent none
  bool voter = false;
  int64_t log_end_offset = -1;  // its last valid fetch offset in this epoch; -1 before one
  int64_t last_fetch_ms = -1;
  // The high watermark of the last answer sent to it before its latest Fetch. A replica has one Fetch in
  // flight and sends the next only after handling the previous answer (raft_node tells its listeners, the
  // metadata loader among them, before its next request leaves), so it has applied every entry below this.
  // Only a Fetch that timed out on the replica's side breaks that; -1 before a second Fetch.
  int64_t seen_high_watermark = -1;
  // The last time its fetch offset reached the leader's log end (at that fetch, or as of its previous fetch),
  // -1 never: Kafka's lastCaughtUpTimestamp.
  int64_t last_caught_up_ms = -1;
};

class replica {
 public:
  // `log` is the durable log as recovered (it must outlive the replica); `persisted` the quorum-state file
  // (nullopt on a fresh node); `now_ms` the clock at start-up. A single voter elects itself here.
  replica(raft_config config, raft_log& log, std::optional<quorum_state> persisted, int64_t now_ms);

  void tick(int64_t now_ms);
  void on_message(int32_t from, const raft_message& message);
  // Leader only: appends one entry per record in the current epoch. not_leader_or_follower elsewhere,
  // invalid_request for no records.
  result<append_info> append(const std::vector<std::vector<uint8_t>>& records);
  // The glue made the log durable up to `end_offset` (exclusive; the log end when its flush started, or less
  // when the log was truncated meanwhile). The leader's own log counts toward the high watermark only up to
  // there, so the glue may flush on another thread while the replica goes on.
  void on_log_flushed(int64_t end_offset);
  // Leader only: graceful resignation (EndQuorumEpoch). Ignored elsewhere.
  void resign();
  // KIP-853 voter changes (see the top of this file); each is answered once through
  // effects::voter_change_answers with `request_id`.
  // `ack_when_committed` false (AddRaftVoter v1's AckWhenCommitted, KIP-853): answered once the VotersRecord
  // is appended; the next change still waits for it to commit.
  void add_voter(int64_t request_id, voter_info voter, bool ack_when_committed = true);
  void remove_voter(int64_t request_id, int32_t voter_id, const uuid& directory_id);
  // UpdateRaftVoter (Kafka's UpdateVoterHandler): a voter (same id and directory id) announces its current
  // listener and supported kraft.version range; the set is appended with its new endpoint and the answer
  // given at once (not waiting for the commit, as Kafka's). `leader_epoch` is the request's
  // CurrentLeaderEpoch.
  // With static voters (kraft.version 0) nothing is appended: the leader keeps the voter's directory id,
  // listener and range in memory for this epoch (Kafka's KRaftVersionUpgrade.Voters), for
  // upgrade_kraft_version.
  void update_voter(int64_t request_id, int32_t leader_epoch, voter_info voter, int16_t min_kraft_version,
                    int16_t max_kraft_version);
  // kraft.version in effect: 1 once a voter set is in effect (the log's start or a VotersRecord), else 0.
  int16_t kraft_version() const { return voter_set() ? dynamic_kraft_version : int16_t{0}; }
  // UpdateFeatures of kraft.version (KafkaRaftClient.upgradeKRaftVersion, LeaderState
  // .maybeAppendUpgradedKRaftVersion), leader only: from 0 to 1 it appends one write of a KRaftVersionRecord
  // and a VotersRecord with the static voters as their UpdateRaftVoter requests described them in this epoch;
  // from then on the voter set is in the log (KIP-853 voter changes work). Refused (nothing appended) unless
  // every voter reported its directory id and supports version 1. `validate_only`: the checks alone. The
  // level already in effect is a no-op; a lower one is INVALID_UPDATE_VERSION. `epoch` is the caller's
  // leader epoch: NOT_LEADER_OR_FOLLOWER when stale.
  status upgrade_kraft_version(int32_t epoch, int16_t version, bool validate_only);
  // Stores a snapshot of the committed prefix before id.offset (raft_log::write_snapshot); `id.epoch` must be
  // the epoch of entry id.offset - 1. False when id.offset is above the high watermark, outside the log, 0,
  // of the wrong epoch, or the write failed; true (nothing written) when the log already holds that snapshot
  // (KafkaRaftClient.createSnapshot's checks).
  bool create_snapshot(offset_and_epoch id, std::span<const uint8_t> payload);
  // create_snapshot's checks of `id` without the write (the glue then writes the file elsewhere and has the
  // log adopt it).
  bool may_create_snapshot(offset_and_epoch id) const;
  // Drops the entries before the latest snapshot (raft_log::delete_before). Replicas that need them get the
  // snapshot instead. No-op without a snapshot.
  void delete_before_snapshot();
  // The glue stored the snapshot file of effects::snapshot_to_store (durably, or not: `stored` false). If
  // this replica still waits for it, the snapshot is installed (raft_log::install_stored_snapshot) and the
  // follower fetches on from its end, or, not stored (or refused by the log), the download starts over.
  // Returns whether it was installed. A stored file not installed (nothing waited for it any more: the
  // follower state was left meanwhile) is a snapshot the log does not know, which the next start judges as
  // it does one a crash left between the two steps.
  bool snapshot_stored(offset_and_epoch id, bool stored);

  effects take_effects();
  // The next time tick() has something to do.
  int64_t next_deadline_ms() const;

  int32_t node_id() const { return _config.node_id; }
  bool is_voter() const { return _is_voter; }
  // The voter ids in effect.
  const std::vector<int32_t>& voter_ids() const { return _voters; }
  // KIP-853: the voter set in effect (the last VotersRecord in the log); null with static voters.
  const std::vector<voter_info>* voter_set() const;
  // KIP-853: the voter set in effect for a snapshot ending before `offset` (its control records carry it);
  // nullopt with static voters.
  std::optional<std::vector<voter_info>> voter_set_before(int64_t offset) const;
  role current_role() const { return _role; }
  int32_t epoch() const { return _epoch; }
  int32_t leader_id() const { return _leader_id; }
  int32_t voted_id() const { return _voted_id; }
  int64_t high_watermark() const { return _high_watermark; }
  // Leader only: the offset of this epoch's leader_change entry. Once the high watermark passes it, every
  // entry of earlier epochs is committed too (the controller becomes active then).
  int64_t epoch_start_offset() const { return _epoch_start_offset; }
  const raft_log& log() const { return _log; }
  // Leader only (empty elsewhere): every voter but this one, then the observers that fetched.
  std::vector<replica_progress> progress() const;

 private:
  struct follower_progress {
    replica_progress state;
    int64_t previous_fetch_ms = -1;             // its fetch before the latest
    int64_t leader_end_at_previous_fetch = -1;  // the leader's log end then
    int64_t sent_high_watermark = -1;           // the high watermark last sent to it
    bool acknowledged = false;                  // BeginQuorumEpoch answered or a valid Fetch seen
    int64_t begin_resend_ms = 0;
  };
  struct parked_fetch {
    int32_t replica_id;
    int64_t correlation_id;
    fetch_request request;
    int64_t deadline_ms;
  };
  struct fetch_in_flight {
    int32_t destination;
    int64_t correlation_id;
    int64_t fetch_offset;
    int32_t last_fetched_epoch;
    int64_t deadline_ms;
    bool snapshot = false;  // a FetchSnapshot rather than a Fetch
  };
  struct snapshot_download {
    offset_and_epoch id;
    std::vector<uint8_t> bytes;  // received so far, from position 0
    // Downloaded whole and handed to the glue to store (glue_stores_snapshots), with the voter set it holds.
    bool storing = false;
    std::optional<std::vector<voter_info>> voters;
  };
  // The installed snapshot's bookkeeping, once the log holds it (both ways of storing it).
  void finish_snapshot_install(offset_and_epoch id, std::optional<std::vector<voter_info>> snapshot_voters);

  // transitions
  void become_unattached(int32_t epoch, int32_t voted_id);
  void become_prospective();
  void become_candidate();
  void become_leader();
  void become_follower(int32_t epoch, int32_t leader_id);
  void become_resigned(std::vector<int32_t> preferred_successors);
  void leave_leadership();
  bool observe_epoch(int32_t epoch, int32_t leader_id);

  // elections
  // Counts this node's own vote and arms the election timer for a new (pre-)vote round; true when that vote
  // alone is a majority (a single voter).
  bool open_vote_round();
  // What a BeginQuorumEpoch or EndQuorumEpoch from `from` is refused with: FENCED_LEADER_EPOCH for an older
  // epoch, INCONSISTENT_VOTER_SET unless the sender is the voter it names as leader (and not this node);
  // NONE.
  error_code check_leader_notice(int32_t from, int32_t leader_id, int32_t leader_epoch) const;
  void start_pre_vote_round();
  void send_vote_requests(bool pre_vote);
  void count_vote(int32_t from, bool granted);
  int majority() const { return static_cast<int>(_voters.size() / 2 + 1); }
  bool can_grant_pre_vote() const;
  bool can_grant_vote(int32_t candidate_id) const;
  int64_t strict_exponential_backoff_ms(int position, int total) const;

  // handlers
  void handle_vote_request(int32_t from, int64_t correlation_id, const vote_request& request);
  void handle_vote_response(int32_t from, const vote_response& response);
  void handle_begin_quorum_epoch_request(int32_t from, int64_t correlation_id,
                                         const begin_quorum_epoch_request& request);
  void handle_begin_quorum_epoch_response(int32_t from, const begin_quorum_epoch_response& response);
  void handle_end_quorum_epoch_request(int32_t from, int64_t correlation_id,
                                       const end_quorum_epoch_request& request);
  void handle_end_quorum_epoch_response(int32_t from, const end_quorum_epoch_response& response);
  void handle_fetch_request(int32_t from, int64_t correlation_id, const fetch_request& request,
                            bool may_park);
  void handle_fetch_response(int32_t from, int64_t correlation_id, const fetch_response& response);
  void handle_fetch_snapshot_request(int32_t from, int64_t correlation_id,
                                     const fetch_snapshot_request& request);
  void handle_fetch_snapshot_response(int32_t from, int64_t correlation_id,
                                      const fetch_snapshot_response& response);

  // replication
  void maybe_send_fetch();
  void send_fetch(int32_t destination);
  void send_fetch_snapshot(int32_t destination);
  // Follower voter: UpdateRaftVoter to the leader when its entry in the voter set is not local_voter.
  void maybe_send_update_voter();
  // A static voter's UpdateRaftVoter accepted by this epoch's leader is not sent again in the epoch; any
  // other answer changes nothing (the entry is checked again after the next period, and a new leader or
  // epoch reaches this replica through its Fetch answers).
  void handle_update_voter_response(const update_voter_response& response);
  // Leader with static voters: _reported_voters for the new epoch (this node's own entry filled in).
  void start_reported_voters();
  // The snapshot the leader answers `request` with instead of records or a divergence, if any (`end`: the
  // leader's end_offset_for_epoch of the request's last fetched epoch).
  std::optional<offset_and_epoch> snapshot_for_fetch(const fetch_request& request,
                                                     const offset_and_epoch& end) const;
  follower_progress& progress_of(int32_t replica_id);
  void maybe_advance_high_watermark();
  void set_high_watermark(int64_t high_watermark);
  void complete_parked_fetches();
  void answer_parked_fetch(const parked_fetch& parked);
  // The entries a Fetch answer carries from `from_offset`: whole writes only (log_entry::batch_end).
  std::vector<log_entry> read_whole_writes(int64_t from_offset) const;
  // The first offset of the write holding offset - 1 when that write goes on past `offset`, else `offset`:
  // a truncation point that cuts no write.
  int64_t write_start_at_or_before(int64_t offset) const;
  int64_t check_quorum_deadline_ms() const;
  void append_to_log(std::vector<log_entry> entries);
  void truncate_log(int64_t offset);

  // voter sets (KIP-853)
  // Reads the VotersRecords of the log from its start (construction, snapshot install).
  void load_voter_history();
  // The VotersRecords among entries just appended / the ones a truncation at `offset` removed.
  void track_voter_entries(std::span<const log_entry> entries);
  void forget_voter_entries_from(int64_t offset);
  // The ids in effect, whether this node is one, the leader's follower list; notes a change as an effect.
  void refresh_voters();
  bool is_own_key(const voter_info& voter) const;
  // Leader: appends a VotersRecord with `voters` (its own write); returns its offset.
  int64_t append_voter_set(const std::vector<voter_info>& voters);
  // Leader: why a voter change ("adding" / "removing") cannot start now (Kafka's checks common to both).
  std::optional<voter_change_answer> voter_change_refusal(std::string_view verb) const;
  // Leader: appends the new set and waits for its commit (answered then, or on timeout).
  void start_voter_change(int64_t request_id, const std::vector<voter_info>& voters);
  // Leader: the pending change is answered with `error`.
  void answer_voter_change(error_code error, std::string message = {});
  // Leader: the pending change committed (the high watermark passed it).
  void maybe_complete_voter_change();

  // plumbing
  void persist();
  void send(int32_t destination, int64_t correlation_id, raft_message_body body);
  int64_t new_correlation_id() { return _next_correlation_id++; }
  uint64_t next_random();
  int64_t random_below(int64_t bound);
  int64_t randomized_election_timeout() {
    return _config.election_timeout_ms + random_below(_config.election_timeout_ms);
  }
  int64_t election_backoff_ms();
  leader_id_and_epoch current_leader() const;
  bool is_voter_id(int32_t id) const;
  // Node, role, epoch, leader and vote, for the message of a failed invariant check.
  std::string state_for_logs() const;

  raft_config _config;
  raft_log& _log;
  bool _is_voter = false;
  // The voter ids in effect: _config.voters, or the ids of the last voter set (KIP-853).
  std::vector<int32_t> _voters;
  // KIP-853: the voter set at the log's start, and the VotersRecords in the log after it, in offset order.
  struct voter_set_at {
    int64_t offset = 0;
    std::vector<voter_info> voters;
  };
  std::optional<std::vector<voter_info>> _base_voter_set;
  std::vector<voter_set_at> _voter_history;
  // Leader: the voter change in progress (its VotersRecord is at `offset`).
  struct pending_voter_change {
    int64_t request_id = 0;
    int64_t offset = 0;
    int64_t deadline_ms = 0;
  };
  std::optional<pending_voter_change> _pending_voter_change;
  // Leader with static voters: the voters as their UpdateRaftVoter requests of this epoch describe them, with
  // the kraft.version range each supports (a voter not heard from yet: its id alone, range [0, 0]).
  struct reported_voter {
    voter_info voter;
    int16_t min_kraft_version = 0;
    int16_t max_kraft_version = 0;
  };
  std::vector<reported_voter> _reported_voters;
  bool _resign_requested = false;  // leader: it removed itself and the change committed
  uint64_t _random_state = 0;
  int64_t _now_ms = 0;
  int64_t _next_correlation_id = 0;

  role _role = role::unattached;
  int32_t _epoch = 0;
  int32_t _leader_id = no_leader;
  int32_t _voted_id = no_voter;
  int64_t _high_watermark = 0;
  int64_t _flushed_end_offset = 0;  // on_log_flushed(): the log is durable below it
  quorum_state _persisted;          // what was last handed out to persist

  // unattached / prospective / candidate / resigned
  int64_t _election_deadline_ms = 0;
  int64_t _backoff_until_ms = -1;  // prospective / candidate after losing: the next round starts then
  int _election_retries = 0;
  std::vector<int32_t> _granted;
  std::vector<int32_t> _rejected;

  // follower / observer
  int64_t _fetch_deadline_ms = 0;
  int64_t _next_fetch_ms = 0;
  int64_t _update_voter_deadline_ms = 0;  // follower: the next check of its own voter-set entry
  // Static voters: the epoch whose leader accepted this voter's UpdateRaftVoter (NONE, or UNSUPPORTED_VERSION
  // from a leader that cannot take it); until then it is sent every check (FollowerState.hasUpdatedLeader).
  int32_t _update_voter_accepted_epoch = -1;
  bool _has_fetched = false;      // a successful Fetch from this leader in this epoch
  bool _leader_resigned = false;  // EndQuorumEpoch or NOT_LEADER_OR_FOLLOWER from it
  std::optional<fetch_in_flight> _fetch_in_flight;
  std::optional<snapshot_download> _snapshot_download;  // follower: the snapshot being fetched

  // leader
  int32_t _led_epoch = -1;  // the epoch this node led (or persisted as led), to catch a second leader in it
  int64_t _epoch_start_offset = 0;
  int64_t _leader_since_ms = 0;
  std::vector<follower_progress> _followers;
  std::vector<parked_fetch> _parked_fetches;

  // resigned
  std::vector<int32_t> _preferred_successors;
  std::vector<int32_t> _end_quorum_acknowledged;
  int64_t _end_quorum_resend_ms = 0;

  effects _effects;
};

}  // namespace mala::raft
