// The Raft messages (messages.h) as Kafka's KRaft RPCs for the one partition __cluster_metadata-0: Vote,
// BeginQuorumEpoch v1, EndQuorumEpoch v1, Fetch v18 and FetchSnapshot v1 (KIP-630), through the generated
// protocol structs.
//
// Client side: encode_raft_request() builds a request body, decode_raft_response() reads the answer.
// Server side: from_protocol() turns a decoded request into a raft message after the checks KafkaRaftClient
// makes before its state machine sees a request (ClusterId, then topic and partition), and to_protocol()
// turns the replica's answer into the protocol response.
//
// Errors as Kafka answers them: a request for another cluster id is INCONSISTENT_CLUSTER_ID at top level; a
// request that is not exactly one topic __cluster_metadata (by name, or by topic id for Fetch v13+) with one
// partition 0 is INVALID_REQUEST at top level ("until we support multi-raft, we treat topic partition
// mismatches as invalid requests", KafkaRaftClient). from_protocol() returns these as the status code, and
// top_level_error_response() builds the answer.
//
// Fetch records travel as v2 record batches, one batch per entry, framed exactly as partition_raft_log writes
// them on disk (storage/metadata_partition.h): base offset = entry offset, partition leader epoch = entry
// epoch; a data entry is one record with a null key and the payload as value; a leader_change entry is a
// control batch with one LEADER_CHANGE control record whose value is the payload, or an encoded
// LeaderChangeMessage when the payload is empty. Decoding validates every batch (framing, CRC-32C, records),
// reads batches of several records (as Kafka's controller writes them) as one entry per record, and refuses
// offsets that do not increase; a trailing partial batch (a fetch cut at its byte limit) is ignored, as Kafka
// consumers do.
//
// FetchSnapshot: the chunk travels as the response's UnalignedRecords, bytes as they are (the snapshot
// payload is opaque to Raft). A Fetch answer's SnapshotId (-1/-1 when absent) becomes
// fetch_response::snapshot_id.
//
// Directory ids (KIP-853) are sent as the zero uuid (Mala has no directory ids for the quorum; Kafka treats
// zero as "no directory id"); LeaderEndpoints are sent when the caller gives them (Kafka falls back to its
// voter set when they are empty).
//
// Vote: Mala sends the newest VoteRequest version proto/ defines. PreVote (KIP-996) needs v2; while proto/
// has only v0-1 (the Kafka reference in ../shared predates v2) a pre-vote request cannot be encoded and
// encode_raft_request() returns UNSUPPORTED_VERSION for it. The code picks up v2 by itself once
// proto/VoteRequest.msg defines PreVote.
//
// Threads: plain functions of their arguments.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/result.h"
#include "mala/common/uuid.h"
#include "mala/protocol/messages/begin_quorum_epoch_request.h"
#include "mala/protocol/messages/begin_quorum_epoch_response.h"
#include "mala/protocol/messages/end_quorum_epoch_request.h"
#include "mala/protocol/messages/end_quorum_epoch_response.h"
#include "mala/protocol/messages/fetch_request.h"
#include "mala/protocol/messages/fetch_response.h"
#include "mala/protocol/messages/fetch_snapshot_request.h"
#include "mala/protocol/messages/fetch_snapshot_response.h"
#include "mala/protocol/messages/update_raft_voter_request.h"
#include "mala/protocol/messages/update_raft_voter_response.h"
#include "mala/protocol/messages/vote_request.h"
#include "mala/protocol/messages/vote_response.h"
#include "mala/raft/messages.h"
#include "mala/storage/metadata_partition.h"

namespace mala::raft {

// The metadata partition as its RPCs name it: by topic name (Fetch before v13, DescribeQuorum) or by Kafka's
// Uuid.METADATA_TOPIC_ID (most significant bits 0, least significant 1; "AAAAAAAAAAAAAAAAAAAAAQ").
using storage::metadata_topic_name;
uuid metadata_topic_id();

// API keys and the versions Mala sends.
inline constexpr int16_t vote_api_key = protocol::vote_request::api_key;
inline constexpr int16_t begin_quorum_epoch_api_key = protocol::begin_quorum_epoch_request::api_key;
inline constexpr int16_t end_quorum_epoch_api_key = protocol::end_quorum_epoch_request::api_key;
inline constexpr int16_t fetch_api_key = protocol::fetch_request::api_key;
inline constexpr int16_t fetch_snapshot_api_key = protocol::fetch_snapshot_request::api_key;
inline constexpr int16_t vote_api_version = protocol::vote_request::max_version;
inline constexpr int16_t begin_quorum_epoch_api_version = 1;
inline constexpr int16_t end_quorum_epoch_api_version = 1;
inline constexpr int16_t fetch_api_version = 18;
inline constexpr int16_t fetch_snapshot_api_version = 1;
inline constexpr int16_t update_voter_api_key = protocol::update_raft_voter_request::api_key;
inline constexpr int16_t update_voter_api_version = 0;

// KafkaRaftClient.MAX_FETCH_SIZE_BYTES: the Fetch MaxBytes a KRaft replica asks for (8 MiB).
inline constexpr int32_t raft_fetch_max_bytes = 8 * 1024 * 1024;

// One listener of the sending node (BeginQuorumEpoch / EndQuorumEpoch v1 LeaderEndpoints).
struct raft_endpoint {
  std::string listener_name;
  std::string host;
  uint16_t port = 0;
};

struct encoded_request {
  int16_t api_key = 0;
  int16_t api_version = 0;
  int16_t request_header_version = 2;  // every version sent here is flexible
  int16_t response_header_version = 1;
  std::vector<uint8_t> body;
};

// The body of one of the six requests. invalid_request for a response message; unsupported_version for a
// pre-vote while VoteRequest v2 is not defined (see above).
result<encoded_request> encode_raft_request(const raft_message& m, int32_t local_id,
                                            const std::string& cluster_id,
                                            std::span<const raft_endpoint> local_endpoints = {});

// Reads the answer to a request of `api_key` / `api_version`. `pre_vote_request`: the request was a pre-vote
// (vote_response::pre_vote is not on the wire). Records of a Fetch answer below `fetch_offset` (a batch that
// starts before it) are dropped; its NodeEndpoints (ports outside 1-65535 skipped) become
// fetch_response::node_endpoints. A top-level error, a response for another topic or partition, or
// malformed bytes are an error status.
result<raft_message_body> decode_raft_response(int16_t api_key, int16_t api_version,
                                               std::span<const uint8_t> body, bool pre_vote_request,
                                               int64_t fetch_offset = -1);

// Server side: the checks above, then the raft message. The status code is the top-level error to answer.
result<raft_message_body> from_protocol(const protocol::vote_request& request, std::string_view cluster_id);
result<raft_message_body> from_protocol(const protocol::begin_quorum_epoch_request& request,
                                        std::string_view cluster_id);
result<raft_message_body> from_protocol(const protocol::end_quorum_epoch_request& request,
                                        std::string_view cluster_id);
// `api_version`: the topic is named before v13 and identified by topic id from v13.
result<raft_message_body> from_protocol(const protocol::fetch_request& request, int16_t api_version,
                                        std::string_view cluster_id);
result<raft_message_body> from_protocol(const protocol::fetch_snapshot_request& request,
                                        std::string_view cluster_id);

protocol::vote_response to_protocol(const vote_response& response);
protocol::begin_quorum_epoch_response to_protocol(const begin_quorum_epoch_response& response);
protocol::end_quorum_epoch_response to_protocol(const end_quorum_epoch_response& response);

// A Fetch response and the record batches its `records` field points into: keep them together (moving keeps
// the view valid; the type cannot be copied).
struct protocol_fetch_response {
  protocol::fetch_response message;
  std::vector<uint8_t> records;

  protocol_fetch_response() = default;
  protocol_fetch_response(protocol_fetch_response&&) = default;
  protocol_fetch_response& operator=(protocol_fetch_response&&) = default;
  protocol_fetch_response(const protocol_fetch_response&) = delete;
  protocol_fetch_response& operator=(const protocol_fetch_response&) = delete;
};

// A FetchSnapshot response and the chunk its `unaligned_records` points into (same rules as above).
struct protocol_fetch_snapshot_response {
  protocol::fetch_snapshot_response message;
  std::vector<uint8_t> bytes;

  protocol_fetch_snapshot_response() = default;
  protocol_fetch_snapshot_response(protocol_fetch_snapshot_response&&) = default;
  protocol_fetch_snapshot_response& operator=(protocol_fetch_snapshot_response&&) = default;
  protocol_fetch_snapshot_response(const protocol_fetch_snapshot_response&) = delete;
  protocol_fetch_snapshot_response& operator=(const protocol_fetch_snapshot_response&) = delete;
};

protocol_fetch_snapshot_response to_protocol(fetch_snapshot_response response);

// The records become batches stamped `timestamp_ms`; node_endpoints become NodeEndpoints.
// record_list_too_large when an entry does not fit a metadata batch (max_metadata_batch_bytes).
result<protocol_fetch_response> to_protocol(const fetch_response& response, int64_t timestamp_ms);

// The answer to a request refused at top level (from_protocol's status code).
template <typename ProtocolResponse>
ProtocolResponse top_level_error_response(mala::error_code code) {
  ProtocolResponse response;
  response.error_code = static_cast<int16_t>(code);
  return response;
}

// Entries from v2 record batches (a Fetch response's records) as described above.
result<std::vector<log_entry>> entries_from_batches(std::span<const uint8_t> batches,
                                                    int64_t from_offset = -1);
// The LeaderChangeMessage (v0) a leader writes as the first entry of its epoch, as Kafka's
// LeaderState.appendStartOfEpochControlRecords: the leader, every voter and the voters that granted it.
std::vector<uint8_t> leader_change_payload(int32_t leader_id, std::span<const int32_t> voters,
                                           std::span<const int32_t> granting_voters);

// One batch per entry, concatenated. An empty leader_change payload (written by Mala before it filled them
// in) becomes a LeaderChangeMessage naming
// `current_leader.leader_id` when the entry is of `current_leader.leader_epoch` (-1 otherwise).
result<std::vector<uint8_t>> entries_to_batches(std::span<const log_entry> entries, int64_t timestamp_ms,
                                                leader_id_and_epoch current_leader = {});

}  // namespace mala::raft
