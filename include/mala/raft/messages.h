// The messages Raft replicas exchange, as internal structs. They carry what Kafka's KRaft RPCs carry for the
// one partition __cluster_metadata-0, with field names kept close to Kafka's JSON schemas so that the glue
// that encodes them with the generated protocol structs is a field-by-field copy:
//
//   vote_request                  VoteRequest (KIP-595; v2 adds PreVote, KIP-996)
//     candidate_epoch               Topics[].Partitions[].CandidateEpoch (ReplicaEpoch in v2)
//     candidate_id                  .CandidateId (ReplicaId in v2)
//     voter_id                      VoterId (v1+)
//     last_offset_epoch             .LastOffsetEpoch  (the epoch of the candidate's last entry)
//     last_offset                   .LastOffset       (the candidate's log end offset, exclusive)
//     pre_vote                      .PreVote (v2+)
//   vote_response                 VoteResponse: ErrorCode (partition level), LeaderId, LeaderEpoch,
//                                   VoteGranted;
//     pre_vote                      not on the wire: Kafka pairs a response with its request by
//                                   correlation id
//   begin_quorum_epoch_request    BeginQuorumEpochRequest: VoterId, LeaderId, LeaderEpoch
//   begin_quorum_epoch_response   BeginQuorumEpochResponse: ErrorCode, LeaderId, LeaderEpoch
//   end_quorum_epoch_request      EndQuorumEpochRequest: LeaderId, LeaderEpoch,
//     preferred_successors          PreferredSuccessors (v0) / PreferredCandidates[].CandidateId (v1+)
//   end_quorum_epoch_response     EndQuorumEpochResponse: ErrorCode, LeaderId, LeaderEpoch
//   fetch_request                 FetchRequest (v13+, KIP-595 fields):
//     replica_id                    ReplicaState.ReplicaId (ReplicaId before v15)
//     current_leader_epoch          Topics[].Partitions[].CurrentLeaderEpoch
//     fetch_offset                  .FetchOffset
//     last_fetched_epoch            .LastFetchedEpoch
//     max_wait_ms                   MaxWaitMs
//   fetch_response                FetchResponse: Responses[].Partitions[].ErrorCode, HighWatermark,
//     diverging_epoch               DivergingEpoch {Epoch, EndOffset}
//     current_leader                CurrentLeader {LeaderId, LeaderEpoch}
//     records                       Records (entries; the glue converts to/from record batches)
//     snapshot_id                   SnapshotId {EndOffset, Epoch} (KIP-630): the fetch offset is below the
//                                   leader's log start; fetch this snapshot instead
//   fetch_snapshot_request        FetchSnapshotRequest (KIP-630): ReplicaId,
//     current_leader_epoch          Topics[].Partitions[].CurrentLeaderEpoch
//     snapshot_id                   .SnapshotId {EndOffset, Epoch}
//     position                      .Position (the byte offset of the chunk asked for)
//     max_bytes                     MaxBytes
//   fetch_snapshot_response       FetchSnapshotResponse: Partitions[].ErrorCode, SnapshotId, CurrentLeader,
//     size                          .Size (the whole snapshot's bytes)
//     position                      .Position (of this chunk)
//     bytes                         .UnalignedRecords (the chunk)
//   update_voter_request          UpdateRaftVoterRequest (KIP-853), a voter following the leader:
//     current_leader_epoch          CurrentLeaderEpoch
//     voter_id, voter_directory_id  VoterId, VoterDirectoryId
//     listener_name, host, port     Listeners (its controller listener)
//     min/max_kraft_version         KRaftVersionFeature
//   update_voter_response         UpdateRaftVoterResponse: ErrorCode, CurrentLeader {LeaderId, LeaderEpoch}
//
// `raft_message::correlation_id` is the request header's CorrelationId: a response echoes its request's.
// Kafka's ClusterId, topic name and partition index are the glue's business (one partition, one cluster).
//
// Threads: plain values.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "mala/common/error_code.h"
#include "mala/common/uuid.h"
#include "mala/raft/log.h"

namespace mala::raft {

inline constexpr int32_t no_leader = -1;  // LeaderId when none is known
inline constexpr int32_t no_voter = -1;   // VotedId when no vote was cast in the epoch

struct vote_request {
  int32_t candidate_epoch = 0;
  int32_t candidate_id = -1;
  int32_t voter_id = -1;
  int32_t last_offset_epoch = 0;
  int64_t last_offset = 0;
  bool pre_vote = false;
};

struct vote_response {
  mala::error_code error_code = mala::error_code::none;
  int32_t leader_id = no_leader;
  int32_t leader_epoch = 0;
  bool vote_granted = false;
  bool pre_vote = false;
};

struct begin_quorum_epoch_request {
  int32_t voter_id = -1;
  int32_t leader_id = no_leader;
  int32_t leader_epoch = 0;
};

struct begin_quorum_epoch_response {
  mala::error_code error_code = mala::error_code::none;
  int32_t leader_id = no_leader;
  int32_t leader_epoch = 0;
};

struct end_quorum_epoch_request {
  int32_t leader_id = no_leader;
  int32_t leader_epoch = 0;
  std::vector<int32_t> preferred_successors;  // most caught-up voter first
};

struct end_quorum_epoch_response {
  mala::error_code error_code = mala::error_code::none;
  int32_t leader_id = no_leader;
  int32_t leader_epoch = 0;
};

struct fetch_request {
  int32_t replica_id = -1;
  int32_t current_leader_epoch = 0;
  int64_t fetch_offset = 0;
  int32_t last_fetched_epoch = 0;
  int32_t max_wait_ms = 0;
  uuid replica_directory_id;  // Fetch v17 ReplicaDirectoryId (KIP-853 ReplicaKey); zero when unknown
  // Fetch v18 HighWatermark (KIP-1166): the high watermark the replica knows; int64 max when not sent (older
  // versions). A leader answers at once, without waiting for entries, a replica whose high watermark is
  // behind.
  int64_t high_watermark = std::numeric_limits<int64_t>::max();
};

struct epoch_end_offset {  // FetchResponse.DivergingEpoch; -1/-1 when absent
  int32_t epoch = -1;
  int64_t end_offset = -1;
};

struct leader_id_and_epoch {  // FetchResponse.CurrentLeader
  int32_t leader_id = no_leader;
  int32_t leader_epoch = -1;
};

// One node's listener in a Fetch answer's NodeEndpoints (v16+, KIP-853): how an observer that asked a
// bootstrap server learns where the leader is. Filled by the glue (raft_node), not by the replica.
struct node_endpoint {
  int32_t node_id = -1;
  std::string host;
  int32_t port = 0;
};

struct fetch_response {
  mala::error_code error_code = mala::error_code::none;
  int64_t high_watermark = -1;
  epoch_end_offset diverging_epoch;
  leader_id_and_epoch current_leader;
  std::vector<log_entry> records;
  std::optional<offset_and_epoch> snapshot_id;  // on the wire -1/-1 when absent
  std::vector<node_endpoint> node_endpoints;
};

struct fetch_snapshot_request {
  int32_t replica_id = -1;
  int32_t current_leader_epoch = 0;
  offset_and_epoch snapshot_id;
  int64_t position = 0;
  int32_t max_bytes = 0;
};

struct fetch_snapshot_response {
  mala::error_code error_code = mala::error_code::none;
  offset_and_epoch snapshot_id;
  int64_t size = 0;
  int64_t position = 0;
  std::vector<uint8_t> bytes;
  leader_id_and_epoch current_leader;
};

struct update_voter_request {
  int32_t current_leader_epoch = 0;
  int32_t voter_id = -1;
  uuid voter_directory_id;
  std::string listener_name;
  std::string host;
  int32_t port = 0;
  int16_t min_kraft_version = 0;
  int16_t max_kraft_version = 0;
};

struct update_voter_response {
  mala::error_code error_code = mala::error_code::none;
  leader_id_and_epoch current_leader;
};

using raft_message_body =
    std::variant<vote_request, vote_response, begin_quorum_epoch_request, begin_quorum_epoch_response,
                 end_quorum_epoch_request, end_quorum_epoch_response, fetch_request, fetch_response,
                 fetch_snapshot_request, fetch_snapshot_response, update_voter_request,
                 update_voter_response>;

struct raft_message {
  int64_t correlation_id = 0;
  raft_message_body body;
};

// A message the replica wants sent to node `destination`.
struct outbound_message {
  int32_t destination = -1;
  raft_message message;
};

// One line describing a message, for logs and test failure output.
std::string describe(const raft_message& message);

}  // namespace mala::raft
