#include "mala/raft/rpc_codec.h"

#include <array>
#include <optional>
#include <utility>

#include "mala/protocol/messages/leader_change_message.h"
#include "mala/protocol/record_batch.h"
#include "mala/protocol/versioned_message.h"
#include "mala/protocol/wire.h"
#include "mala/storage/metadata_partition.h"

namespace mala::raft {

namespace {

const std::string metadata_topic(storage::metadata_topic_name);
constexpr int32_t metadata_partition = storage::metadata_partition;

// KIP-996 renames CandidateEpoch / CandidateId / CandidateDirectoryId to ReplicaEpoch / ReplicaId /
// ReplicaDirectoryId in VoteRequest v2 and adds PreVote; these accessors work with either generated form.
template <typename P>
auto& vote_epoch(P& p) {
  if constexpr (requires { p.replica_epoch; }) {
    return p.replica_epoch;
  } else {
    return p.candidate_epoch;
  }
}
template <typename P>
auto& vote_replica_id(P& p) {
  if constexpr (requires { p.replica_id; }) {
    return p.replica_id;
  } else {
    return p.candidate_id;
  }
}
template <typename P>
constexpr bool has_pre_vote = requires(P p) {
  p.pre_vote;
};

template <typename Message>
std::vector<uint8_t> encode_body(const Message& m, int16_t version) {
  std::vector<uint8_t> out;
  out.reserve(m.encoded_size(version));
  protocol::wire_writer w(out);
  m.encode(w, version);
  return out;
}

template <typename Message>
result<Message> decode_body(std::span<const uint8_t> body, int16_t version, std::string_view what) {
  if (version < Message::min_version || version > Message::max_version) {
    return status::error(error_code::unsupported_version,
                         std::string(what) + " v" + std::to_string(version) + " is not defined");
  }
  Message m;
  protocol::wire_reader r(body);
  const auto st = m.decode(r, version);
  if (st != protocol::decode_status::ok) {
    return status::error(error_code::corrupt_message, std::string(what) + " v" + std::to_string(version) +
                                                          ": " +
                                                          std::string(protocol::decode_status_name(st)));
  }
  if (r.remaining() != 0) {
    return status::error(error_code::corrupt_message,
                         std::string(what) + ": " + std::to_string(r.remaining()) + " bytes after the body");
  }
  return m;
}

template <typename Endpoints>
Endpoints leader_endpoints(std::span<const raft_endpoint> endpoints) {
  Endpoints out;
  for (const auto& e : endpoints) {
    typename Endpoints::value_type le;
    le.name = e.listener_name;
    le.host = e.host;
    le.port = e.port;
    out.push_back(std::move(le));
  }
  return out;
}

// KafkaRaftClient.hasValidClusterId: a request without a cluster id (older senders) is accepted.
status check_cluster_id(const std::optional<std::string>& got, std::string_view expected) {
  if (got && *got != expected) {
    return status::error(error_code::inconsistent_cluster_id,
                         "request for cluster " + *got + ", this is " + std::string(expected));
  }
  return status::success();
}

// Exactly one topic (the metadata topic, by name) with exactly one partition 0.
template <typename Topics>
status check_single_partition(const Topics& topics) {
  if (topics.size() != 1 || topics[0].topic_name != metadata_topic || topics[0].partitions.size() != 1 ||
      topics[0].partitions[0].partition_index != metadata_partition) {
    return status::error(error_code::invalid_request, "request is not for exactly __cluster_metadata-0");
  }
  return status::success();
}

error_code to_error(int16_t code) {
  return static_cast<error_code>(code);
}

template <typename Response>
status check_response(const Response& r, std::string_view what) {
  if (r.error_code != 0) {
    return status::error(to_error(r.error_code), std::string(what) + ": top-level " +
                                                     std::string(error_name(to_error(r.error_code))));
  }
  if (auto st = check_single_partition(r.topics); !st.ok()) {
    return status::error(error_code::invalid_request,
                         std::string(what) + ": answer is not for __cluster_metadata-0");
  }
  return status::success();
}

std::vector<uint8_t> encoded_leader_change(int32_t leader_id) {
  protocol::leader_change_message m;
  m.version_ = 0;  // ControlRecordUtils.LEADER_CHANGE_CURRENT_VERSION
  m.leader_id = leader_id;
  return protocol::encode_control_value(m, 0);
}

}  // namespace

std::vector<uint8_t> leader_change_payload(int32_t leader_id, std::span<const int32_t> voters,
                                           std::span<const int32_t> granting_voters) {
  protocol::leader_change_message m;
  m.version_ = 0;  // ControlRecordUtils.LEADER_CHANGE_CURRENT_VERSION
  m.leader_id = leader_id;
  for (int32_t id : voters) m.voters.push_back({id});
  for (int32_t id : granting_voters) m.granting_voters.push_back({id});
  return protocol::encode_control_value(m, 0);
}

uuid metadata_topic_id() {
  uuid id;
  id.bytes[15] = 1;
  return id;
}

result<encoded_request> encode_raft_request(const raft_message& m, int32_t local_id,
                                            const std::string& cluster_id,
                                            std::span<const raft_endpoint> local_endpoints) {
  (void)local_id;  // every request carries its sender's id in the message itself
  if (const auto* v = std::get_if<vote_request>(&m.body)) {
    protocol::vote_request p;
    p.cluster_id = cluster_id;
    p.voter_id = v->voter_id;
    protocol::vote_request::partition_data part;
    part.partition_index = metadata_partition;
    vote_epoch(part) = v->candidate_epoch;
    vote_replica_id(part) = v->candidate_id;
    part.last_offset_epoch = v->last_offset_epoch;
    part.last_offset = v->last_offset;
    if constexpr (has_pre_vote<protocol::vote_request::partition_data>) {
      part.pre_vote = v->pre_vote;
    } else if (v->pre_vote) {
      return status::error(
          error_code::unsupported_version,
          "PreVote needs VoteRequest v2 (KIP-996), which proto/VoteRequest.msg does not define");
    }
    p.topics.push_back({metadata_topic, {part}});
    return encoded_request{vote_api_key, vote_api_version, 2, 1, encode_body(p, vote_api_version)};
  }
  if (const auto* b = std::get_if<begin_quorum_epoch_request>(&m.body)) {
    protocol::begin_quorum_epoch_request p;
    p.cluster_id = cluster_id;
    p.voter_id = b->voter_id;
    protocol::begin_quorum_epoch_request::partition_data part;
    part.partition_index = metadata_partition;
    part.leader_id = b->leader_id;
    part.leader_epoch = b->leader_epoch;
    p.topics.push_back({metadata_topic, {part}});
    p.leader_endpoints = leader_endpoints<decltype(p.leader_endpoints)>(local_endpoints);
    return encoded_request{begin_quorum_epoch_api_key, begin_quorum_epoch_api_version, 2, 1,
                           encode_body(p, begin_quorum_epoch_api_version)};
  }
  if (const auto* e = std::get_if<end_quorum_epoch_request>(&m.body)) {
    protocol::end_quorum_epoch_request p;
    p.cluster_id = cluster_id;
    protocol::end_quorum_epoch_request::partition_data part;
    part.partition_index = metadata_partition;
    part.leader_id = e->leader_id;
    part.leader_epoch = e->leader_epoch;
    for (int32_t id : e->preferred_successors) {
      protocol::end_quorum_epoch_request__replica_info candidate;
      candidate.candidate_id = id;
      part.preferred_candidates.push_back(candidate);
    }
    p.topics.push_back({metadata_topic, {part}});
    p.leader_endpoints = leader_endpoints<decltype(p.leader_endpoints)>(local_endpoints);
    return encoded_request{end_quorum_epoch_api_key, end_quorum_epoch_api_version, 2, 1,
                           encode_body(p, end_quorum_epoch_api_version)};
  }
  if (const auto* f = std::get_if<fetch_request>(&m.body)) {
    // KafkaRaftClient.buildFetchRequest: one partition, MaxBytes 8 MiB, no fetch session.
    protocol::fetch_request p;
    p.cluster_id = cluster_id;
    p.replica_state.replica_id = f->replica_id;
    p.max_wait_ms = f->max_wait_ms;
    p.min_bytes = 0;
    p.max_bytes = raft_fetch_max_bytes;
    protocol::fetch_request::fetch_partition part;
    part.partition = metadata_partition;
    part.current_leader_epoch = f->current_leader_epoch;
    part.fetch_offset = f->fetch_offset;
    part.last_fetched_epoch = f->last_fetched_epoch;
    part.partition_max_bytes = raft_fetch_max_bytes;
    part.replica_directory_id = f->replica_directory_id;
    part.high_watermark = f->high_watermark;
    protocol::fetch_request::fetch_topic topic;
    topic.topic = metadata_topic;
    topic.topic_id = metadata_topic_id();
    topic.partitions.push_back(part);
    p.topics.push_back(std::move(topic));
    return encoded_request{fetch_api_key, fetch_api_version, 2, 1, encode_body(p, fetch_api_version)};
  }
  if (const auto* f = std::get_if<fetch_snapshot_request>(&m.body)) {
    // KafkaRaftClient.buildFetchSnapshotRequest: one partition, the chunk size as MaxBytes.
    protocol::fetch_snapshot_request p;
    p.cluster_id = cluster_id;
    p.replica_id = f->replica_id;
    p.max_bytes = f->max_bytes;
    protocol::fetch_snapshot_request::partition_snapshot part;
    part.partition = metadata_partition;
    part.current_leader_epoch = f->current_leader_epoch;
    part.snapshot_id.end_offset = f->snapshot_id.offset;
    part.snapshot_id.epoch = f->snapshot_id.epoch;
    part.position = f->position;
    p.topics.push_back({metadata_topic, {part}});
    return encoded_request{fetch_snapshot_api_key, fetch_snapshot_api_version, 2, 1,
                           encode_body(p, fetch_snapshot_api_version)};
  }
  if (const auto* u = std::get_if<update_voter_request>(&m.body)) {
    // KafkaRaftClient.buildUpdateVoterRequest: the voter's key, listener and kraft.version range.
    protocol::update_raft_voter_request p;
    p.cluster_id = cluster_id;
    p.current_leader_epoch = u->current_leader_epoch;
    p.voter_id = u->voter_id;
    p.voter_directory_id = u->voter_directory_id;
    auto& listener = p.listeners.emplace_back();
    listener.name = u->listener_name;
    listener.host = u->host;
    listener.port = static_cast<uint16_t>(u->port);
    p.kraft_version_feature.min_supported_version = u->min_kraft_version;
    p.kraft_version_feature.max_supported_version = u->max_kraft_version;
    return encoded_request{update_voter_api_key, update_voter_api_version, 2, 1,
                           encode_body(p, update_voter_api_version)};
  }
  return status::error(error_code::invalid_request, "not a request: " + describe(m));
}

result<raft_message_body> decode_raft_response(int16_t api_key, int16_t api_version,
                                               std::span<const uint8_t> body, bool pre_vote_request,
                                               int64_t fetch_offset) {
  if (api_key == vote_api_key) {
    auto r = decode_body<protocol::vote_response>(body, api_version, "VoteResponse");
    if (!r.ok()) return r.error();
    if (auto st = check_response(*r, "VoteResponse"); !st.ok()) return st;
    const auto& part = r->topics[0].partitions[0];
    return raft_message_body{vote_response{to_error(part.error_code), part.leader_id, part.leader_epoch,
                                           part.vote_granted, pre_vote_request}};
  }
  if (api_key == begin_quorum_epoch_api_key) {
    auto r =
        decode_body<protocol::begin_quorum_epoch_response>(body, api_version, "BeginQuorumEpochResponse");
    if (!r.ok()) return r.error();
    if (auto st = check_response(*r, "BeginQuorumEpochResponse"); !st.ok()) return st;
    const auto& part = r->topics[0].partitions[0];
    return raft_message_body{
        begin_quorum_epoch_response{to_error(part.error_code), part.leader_id, part.leader_epoch}};
  }
  if (api_key == end_quorum_epoch_api_key) {
    auto r = decode_body<protocol::end_quorum_epoch_response>(body, api_version, "EndQuorumEpochResponse");
    if (!r.ok()) return r.error();
    if (auto st = check_response(*r, "EndQuorumEpochResponse"); !st.ok()) return st;
    const auto& part = r->topics[0].partitions[0];
    return raft_message_body{
        end_quorum_epoch_response{to_error(part.error_code), part.leader_id, part.leader_epoch}};
  }
  if (api_key == fetch_api_key) {
    auto r = decode_body<protocol::fetch_response>(body, api_version, "FetchResponse");
    if (!r.ok()) return r.error();
    if (r->error_code != 0) {
      return status::error(to_error(r->error_code),
                           "FetchResponse: top-level " + std::string(error_name(to_error(r->error_code))));
    }
    const bool by_id = api_version >= 13;
    if (r->responses.size() != 1 || r->responses[0].partitions.size() != 1 ||
        (by_id ? r->responses[0].topic_id != metadata_topic_id() : r->responses[0].topic != metadata_topic) ||
        r->responses[0].partitions[0].partition_index != metadata_partition) {
      return status::error(error_code::invalid_request,
                           "FetchResponse: answer is not for __cluster_metadata-0");
    }
    const auto& part = r->responses[0].partitions[0];
    fetch_response out;
    for (const auto& e : r->node_endpoints) {
      if (e.port > 0 && e.port <= 65535) out.node_endpoints.push_back({e.node_id, e.host, e.port});
    }
    if (part.snapshot_id.end_offset >= 0 || part.snapshot_id.epoch >= 0) {
      out.snapshot_id = offset_and_epoch{part.snapshot_id.end_offset, part.snapshot_id.epoch};
    }
    out.error_code = to_error(part.error_code);
    out.high_watermark = part.high_watermark;
    out.diverging_epoch = {part.diverging_epoch.epoch, part.diverging_epoch.end_offset};
    out.current_leader = {part.current_leader.leader_id, part.current_leader.leader_epoch};
    if (!part.records.null && !part.records.bytes.empty()) {
      auto entries = entries_from_batches(part.records.bytes, fetch_offset);
      if (!entries.ok()) return entries.error();
      out.records = std::move(*entries);
    }
    return raft_message_body{std::move(out)};
  }
  if (api_key == fetch_snapshot_api_key) {
    auto r = decode_body<protocol::fetch_snapshot_response>(body, api_version, "FetchSnapshotResponse");
    if (!r.ok()) return r.error();
    if (r->error_code != 0) {
      return status::error(to_error(r->error_code), "FetchSnapshotResponse: top-level " +
                                                        std::string(error_name(to_error(r->error_code))));
    }
    if (r->topics.size() != 1 || r->topics[0].name != metadata_topic || r->topics[0].partitions.size() != 1 ||
        r->topics[0].partitions[0].index != metadata_partition) {
      return status::error(error_code::invalid_request,
                           "FetchSnapshotResponse: answer is not for __cluster_metadata-0");
    }
    const auto& part = r->topics[0].partitions[0];
    fetch_snapshot_response out;
    out.error_code = to_error(part.error_code);
    out.snapshot_id = {part.snapshot_id.end_offset, part.snapshot_id.epoch};
    out.size = part.size;
    out.position = part.position;
    if (!part.unaligned_records.null) {
      out.bytes.assign(part.unaligned_records.bytes.begin(), part.unaligned_records.bytes.end());
    }
    out.current_leader = {part.current_leader.leader_id, part.current_leader.leader_epoch};
    return raft_message_body{std::move(out)};
  }
  if (api_key == update_voter_api_key) {
    auto r = decode_body<protocol::update_raft_voter_response>(body, api_version, "UpdateRaftVoterResponse");
    if (!r.ok()) return r.error();
    return raft_message_body{update_voter_response{
        to_error(r->error_code), {r->current_leader.leader_id, r->current_leader.leader_epoch}}};
  }
  return status::error(error_code::invalid_request, "not a Raft API key: " + std::to_string(api_key));
}

result<raft_message_body> from_protocol(const protocol::vote_request& request, std::string_view cluster_id) {
  if (auto st = check_cluster_id(request.cluster_id, cluster_id); !st.ok()) return st;
  if (auto st = check_single_partition(request.topics); !st.ok()) return st;
  const auto& part = request.topics[0].partitions[0];
  vote_request out;
  out.candidate_epoch = vote_epoch(part);
  out.candidate_id = vote_replica_id(part);
  out.voter_id = request.voter_id;
  out.last_offset_epoch = part.last_offset_epoch;
  out.last_offset = part.last_offset;
  if constexpr (has_pre_vote<protocol::vote_request::partition_data>) out.pre_vote = part.pre_vote;
  return raft_message_body{out};
}

result<raft_message_body> from_protocol(const protocol::begin_quorum_epoch_request& request,
                                        std::string_view cluster_id) {
  if (auto st = check_cluster_id(request.cluster_id, cluster_id); !st.ok()) return st;
  if (auto st = check_single_partition(request.topics); !st.ok()) return st;
  const auto& part = request.topics[0].partitions[0];
  return raft_message_body{begin_quorum_epoch_request{request.voter_id, part.leader_id, part.leader_epoch}};
}

result<raft_message_body> from_protocol(const protocol::end_quorum_epoch_request& request,
                                        std::string_view cluster_id) {
  if (auto st = check_cluster_id(request.cluster_id, cluster_id); !st.ok()) return st;
  if (auto st = check_single_partition(request.topics); !st.ok()) return st;
  const auto& part = request.topics[0].partitions[0];
  end_quorum_epoch_request out{part.leader_id, part.leader_epoch, {}};
  // v0 carries PreferredSuccessors, v1+ PreferredCandidates; a decoded struct holds only its version's field.
  out.preferred_successors = part.preferred_successors;
  for (const auto& c : part.preferred_candidates) out.preferred_successors.push_back(c.candidate_id);
  return raft_message_body{std::move(out)};
}

result<raft_message_body> from_protocol(const protocol::fetch_request& request, int16_t api_version,
                                        std::string_view cluster_id) {
  if (auto st = check_cluster_id(request.cluster_id, cluster_id); !st.ok()) return st;
  const bool by_id = api_version >= 13;
  if (request.topics.size() != 1 || request.topics[0].partitions.size() != 1 ||
      (by_id ? request.topics[0].topic_id != metadata_topic_id()
             : request.topics[0].topic != metadata_topic) ||
      request.topics[0].partitions[0].partition != metadata_partition) {
    return status::error(error_code::invalid_request, "Fetch is not for exactly __cluster_metadata-0");
  }
  const auto& part = request.topics[0].partitions[0];
  fetch_request out;
  out.replica_id = api_version >= 15 ? request.replica_state.replica_id : request.replica_id;
  out.current_leader_epoch = part.current_leader_epoch;
  out.fetch_offset = part.fetch_offset;
  out.last_fetched_epoch = part.last_fetched_epoch;
  out.max_wait_ms = request.max_wait_ms;
  if (api_version >= 17) out.replica_directory_id = part.replica_directory_id;
  if (api_version >= 18) out.high_watermark = part.high_watermark;
  return raft_message_body{out};
}

result<raft_message_body> from_protocol(const protocol::fetch_snapshot_request& request,
                                        std::string_view cluster_id) {
  if (auto st = check_cluster_id(request.cluster_id, cluster_id); !st.ok()) return st;
  if (request.topics.size() != 1 || request.topics[0].name != metadata_topic ||
      request.topics[0].partitions.size() != 1 ||
      request.topics[0].partitions[0].partition != metadata_partition) {
    return status::error(error_code::invalid_request,
                         "FetchSnapshot is not for exactly __cluster_metadata-0");
  }
  const auto& part = request.topics[0].partitions[0];
  fetch_snapshot_request out;
  out.replica_id = request.replica_id;
  out.current_leader_epoch = part.current_leader_epoch;
  out.snapshot_id = {part.snapshot_id.end_offset, part.snapshot_id.epoch};
  out.position = part.position;
  out.max_bytes = request.max_bytes;
  return raft_message_body{out};
}

protocol_fetch_snapshot_response to_protocol(fetch_snapshot_response response) {
  protocol_fetch_snapshot_response out;
  out.bytes = std::move(response.bytes);
  protocol::fetch_snapshot_response::partition_snapshot part;
  part.index = metadata_partition;
  part.error_code = static_cast<int16_t>(response.error_code);
  part.snapshot_id.end_offset = response.snapshot_id.offset;
  part.snapshot_id.epoch = response.snapshot_id.epoch;
  part.current_leader.leader_id = response.current_leader.leader_id;
  part.current_leader.leader_epoch = response.current_leader.leader_epoch;
  part.size = response.size;
  part.position = response.position;
  part.unaligned_records = protocol::records_view::of(out.bytes);
  out.message.topics.push_back({metadata_topic, {std::move(part)}});
  return out;
}

protocol::vote_response to_protocol(const vote_response& response) {
  protocol::vote_response out;
  protocol::vote_response::partition_data part;
  part.partition_index = metadata_partition;
  part.error_code = static_cast<int16_t>(response.error_code);
  part.leader_id = response.leader_id;
  part.leader_epoch = response.leader_epoch;
  part.vote_granted = response.vote_granted;
  out.topics.push_back({metadata_topic, {part}});
  return out;
}

namespace {

// BeginQuorumEpoch and EndQuorumEpoch answer with the same partition fields (ErrorCode, LeaderId,
// LeaderEpoch).
template <typename ProtocolResponse, typename Response>
ProtocolResponse leader_epoch_answer(const Response& response) {
  ProtocolResponse out;
  typename ProtocolResponse::partition_data part;
  part.partition_index = metadata_partition;
  part.error_code = static_cast<int16_t>(response.error_code);
  part.leader_id = response.leader_id;
  part.leader_epoch = response.leader_epoch;
  out.topics.push_back({metadata_topic, {part}});
  return out;
}

}  // namespace

protocol::begin_quorum_epoch_response to_protocol(const begin_quorum_epoch_response& response) {
  return leader_epoch_answer<protocol::begin_quorum_epoch_response>(response);
}

protocol::end_quorum_epoch_response to_protocol(const end_quorum_epoch_response& response) {
  return leader_epoch_answer<protocol::end_quorum_epoch_response>(response);
}

result<protocol_fetch_response> to_protocol(const fetch_response& response, int64_t timestamp_ms) {
  protocol_fetch_response out;
  auto batches = entries_to_batches(response.records, timestamp_ms, response.current_leader);
  if (!batches.ok()) return batches.error();
  out.records = std::move(*batches);
  protocol::fetch_response::partition_data part;
  part.partition_index = metadata_partition;
  part.error_code = static_cast<int16_t>(response.error_code);
  part.high_watermark = response.high_watermark;
  part.log_start_offset = 0;  // fetch_response does not carry it; KRaft followers ignore it
  if (response.snapshot_id) {
    part.snapshot_id.end_offset = response.snapshot_id->offset;
    part.snapshot_id.epoch = response.snapshot_id->epoch;
  }
  part.diverging_epoch = {response.diverging_epoch.epoch, response.diverging_epoch.end_offset};
  part.current_leader = {response.current_leader.leader_id, response.current_leader.leader_epoch};
  part.records = protocol::records_view::of(out.records);
  protocol::fetch_response::fetchable_topic_response topic;
  topic.topic = metadata_topic;
  topic.topic_id = metadata_topic_id();
  topic.partitions.push_back(std::move(part));
  out.message.responses.push_back(std::move(topic));
  for (const auto& e : response.node_endpoints) {
    protocol::fetch_response::node_endpoint endpoint;
    endpoint.node_id = e.node_id;
    endpoint.host = e.host;
    endpoint.port = e.port;
    out.message.node_endpoints.push_back(std::move(endpoint));
  }
  return out;
}

result<std::vector<uint8_t>> entries_to_batches(std::span<const log_entry> entries, int64_t timestamp_ms,
                                                leader_id_and_epoch current_leader) {
  std::vector<uint8_t> out;
  // One batch per write: a run of entries ending with batch_end (the last run may be cut short only by a
  // caller that read it so; the replica sends whole writes).
  size_t i = 0;
  while (i < entries.size()) {
    const log_entry& first = entries[i];
    const bool control = first.type != entry_type::data;
    // Kept until the batch is built: a generated LeaderChangeMessage for an entry without a payload, and each
    // control record's key.
    std::vector<std::vector<uint8_t>> leader_changes;
    std::vector<std::array<uint8_t, 4>> keys;
    leader_changes.reserve(entries.size() - i);
    keys.reserve(entries.size() - i);
    std::vector<storage::metadata_batch_record> records;
    for (; i < entries.size(); ++i) {
      const log_entry& e = entries[i];
      if (e.epoch != first.epoch || (e.type != entry_type::data) != control) break;
      const bool generated = e.type == entry_type::leader_change && e.payload.empty();
      if (generated) {
        leader_changes.push_back(encoded_leader_change(
            e.epoch == current_leader.leader_epoch ? current_leader.leader_id : no_leader));
      }
      std::optional<std::span<const uint8_t>> key;
      if (control) key = keys.emplace_back(storage::control_record_key(control_record_type_of(e.type)));
      records.push_back(
          storage::metadata_batch_record{key, generated ? std::span<const uint8_t>(leader_changes.back())
                                                        : std::span<const uint8_t>(e.payload)});
      if (e.batch_end) {
        ++i;
        break;
      }
    }
    auto batch = storage::build_metadata_batch(records, timestamp_ms, control);
    if (!batch.ok()) return batch.error();
    protocol::stamp_base_offset(*batch, first.offset);
    protocol::stamp_partition_leader_epoch(*batch, first.epoch);
    out.insert(out.end(), batch->begin(), batch->end());
  }
  return out;
}

result<std::vector<log_entry>> entries_from_batches(std::span<const uint8_t> batches, int64_t from_offset) {
  std::vector<log_entry> out;
  std::vector<uint8_t> decompressed;
  int64_t last = -1;
  auto corrupt = [](int64_t offset, std::string_view why) {
    return status::error(error_code::corrupt_message,
                         "fetched batch at offset " + std::to_string(offset) + ": " + std::string(why));
  };
  protocol::batch_splitter splitter(batches);
  while (auto span = splitter.next()) {
    protocol::record_batch_view batch(*span);
    if (!batch.ok()) return corrupt(batch.base_offset(), protocol::batch_status_name(batch.status()));
    if (batch.header().magic != protocol::current_magic) return corrupt(batch.base_offset(), "not magic 2");
    const int32_t epoch = batch.header().partition_leader_epoch;
    auto reader = batch.records(decompressed);
    for (const auto& record : reader) {
      const int64_t offset = batch.offset_of(record);
      if (offset < from_offset) continue;
      if (offset <= last) return corrupt(batch.base_offset(), "offsets do not increase");
      log_entry entry{offset,
                      epoch,
                      entry_type::data,
                      {},
                      /*batch_end=*/offset + 1 == batch.header().next_offset()};
      if (batch.is_control()) {
        const auto type = record.key ? storage::control_record_type(*record.key) : std::nullopt;
        const auto kind = type ? entry_type_of_control_record(*type) : std::nullopt;
        if (!kind) return corrupt(offset, "control record of an unsupported type");
        entry.type = *kind;
      }
      if (record.value) entry.payload.assign(record.value->begin(), record.value->end());
      out.push_back(std::move(entry));
      last = offset;
    }
    if (!reader.ok()) return corrupt(batch.base_offset(), protocol::batch_status_name(reader.status()));
  }
  // A trailing batch cut short is what a fetch bounded by bytes may end with; anything else is garbage.
  if (!splitter.ok() && splitter.status() != protocol::batch_status::partial_batch) {
    return corrupt(-1, protocol::batch_status_name(splitter.status()));
  }
  return out;
}

}  // namespace mala::raft
