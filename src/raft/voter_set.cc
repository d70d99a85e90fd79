#include "mala/raft/voter_set.h"

#include <set>
#include <string>
#include <utility>

#include "mala/protocol/messages/kraft_version_record.h"
#include "mala/protocol/messages/snapshot_footer_record.h"
#include "mala/protocol/messages/snapshot_header_record.h"
#include "mala/protocol/messages/voters_record.h"
#include "mala/protocol/record_batch.h"
#include "mala/protocol/versioned_message.h"
#include "mala/protocol/wire.h"
#include "mala/storage/metadata_partition.h"

namespace mala::raft {

namespace {

// ControlRecordUtils: the record schema versions Kafka writes.
constexpr int16_t kraft_version_record_version = 0;
constexpr int16_t voters_record_version = 0;
constexpr int16_t snapshot_header_type = 3;
constexpr int16_t snapshot_footer_type = 4;

std::vector<uint8_t> key_of(int16_t type) {
  const auto key = storage::control_record_key(type);
  return {key.begin(), key.end()};
}

status corrupt(std::string why) {
  return status::error(error_code::corrupt_message, "voter set: " + std::move(why));
}

}  // namespace

std::vector<control_record> voter_set_control_records(std::span<const voter_info> voters) {
  protocol::kraft_version_record version;
  version.version_ = kraft_version_record_version;
  version.kraft_version = dynamic_kraft_version;

  protocol::voters_record record;
  record.version_ = voters_record_version;
  for (const auto& v : voters) {
    protocol::voters_record::voter voter;
    voter.voter_id = v.id;
    voter.voter_directory_id = v.directory_id;
    voter.endpoints.push_back({v.listener_name, v.endpoint.host, static_cast<uint16_t>(v.endpoint.port)});
    voter.kraft_version_feature = {0, dynamic_kraft_version};
    record.voters.push_back(std::move(voter));
  }
  return {
      {key_of(kraft_version_control_type),
       protocol::encode_control_value(version, kraft_version_record_version)},
      {key_of(kraft_voters_control_type), protocol::encode_control_value(record, voters_record_version)},
  };
}

result<std::vector<uint8_t>> bootstrap_checkpoint(std::span<const voter_info> voters, int64_t timestamp_ms) {
  protocol::snapshot_header_record header;
  header.last_contained_log_timestamp = timestamp_ms;
  protocol::snapshot_footer_record footer;
  // RecordsSnapshotWriter: the header and the kraft records in the first control batch, the footer alone.
  std::vector<std::vector<control_record>> batches(2);
  batches[0].push_back({key_of(snapshot_header_type), protocol::encode_control_value(header, 0)});
  for (auto& r : voter_set_control_records(voters)) batches[0].push_back(std::move(r));
  batches[1].push_back({key_of(snapshot_footer_type), protocol::encode_control_value(footer, 0)});

  std::vector<uint8_t> out;
  int64_t next_offset = 0;
  for (const auto& records : batches) {
    std::vector<storage::metadata_batch_record> framed;
    for (const auto& r : records) framed.push_back({std::span<const uint8_t>(r.key), r.value});
    auto batch = storage::build_metadata_batch(framed, timestamp_ms, /*control=*/true);
    if (!batch.ok()) return batch.error();
    protocol::stamp_base_offset(*batch, next_offset);
    protocol::stamp_partition_leader_epoch(*batch, 0);
    next_offset += static_cast<int64_t>(framed.size());
    out.insert(out.end(), batch->begin(), batch->end());
  }
  return out;
}

std::vector<uint8_t> encode_voters_record(std::span<const voter_info> voters) {
  return std::move(voter_set_control_records(voters)[1].value);
}

result<std::vector<voter_info>> decode_voters_record(std::span<const uint8_t> value) {
  const auto decoded = protocol::decode_control_value<protocol::voters_record>(value, voters_record_version);
  if (!decoded || decoded->version_ != voters_record_version)
    return corrupt("a VotersRecord does not decode");
  std::vector<voter_info> voters;
  for (const auto& v : decoded->voters) {
    voter_info info;
    info.id = v.voter_id;
    info.directory_id = v.voter_directory_id;
    if (!v.endpoints.empty()) {
      info.listener_name = v.endpoints.front().name;
      info.endpoint = {v.endpoints.front().host, v.endpoints.front().port};
    }
    voters.push_back(std::move(info));
  }
  return voters;
}

result<std::optional<std::vector<voter_info>>> voter_set_in_snapshot(std::span<const uint8_t> payload) {
  protocol::batch_splitter splitter(payload);
  std::vector<uint8_t> decompressed;
  std::optional<std::vector<voter_info>> found;
  while (auto span = splitter.next()) {
    const protocol::record_batch_view batch(*span);
    if (!batch.ok()) return corrupt(std::string(protocol::batch_status_name(batch.status())));
    if (!batch.is_control()) continue;
    auto reader = batch.records(decompressed);
    for (const auto& record : reader) {
      if (!record.key || !record.value) continue;
      if (storage::control_record_type(*record.key) != kraft_voters_control_type) continue;
      auto voters = decode_voters_record(*record.value);
      if (!voters.ok()) return voters.error();
      found = std::move(*voters);
    }
    if (!reader.ok()) return corrupt(std::string(protocol::batch_status_name(reader.status())));
  }
  if (!splitter.ok() || splitter.position() != payload.size()) return corrupt("trailing or partial batch");
  return found;
}

result<std::vector<voter_info>> parse_initial_controllers(std::string_view text,
                                                          std::string_view listener_name) {
  auto invalid = [](std::string message) {
    return status::error(error_code::invalid_config, std::move(message));
  };
  std::vector<voter_info> out;
  std::set<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    std::string_view item =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    start = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    // id@host:port[:directory-id]: a third part after the port is the directory id.
    std::optional<uuid> directory_id;
    const size_t at = item.find('@');
    const size_t bracket = item.rfind(']');
    const size_t port_colon = item.find(':', bracket == std::string_view::npos ? at : bracket);
    if (at != std::string_view::npos && port_colon != std::string_view::npos) {
      const size_t dir_colon = item.find(':', port_colon + 1);
      if (dir_colon != std::string_view::npos) {
        directory_id = uuid::parse(item.substr(dir_colon + 1));
        if (!directory_id) {
          return invalid("invalid directory id '" + std::string(item.substr(dir_colon + 1)) + "' in '" +
                         std::string(item) + "'");
        }
        item = item.substr(0, dir_colon);
      }
    }
    auto parsed = parse_quorum_voters(item);
    if (!parsed.ok()) return invalid(parsed.error().message);
    const auto& voters = parsed.value();
    if (voters.size() != 1) return invalid("'" + std::string(item) + "' is not of the form id@host:port");
    const auto& v = voters.front();
    if (!ids.insert(v.id).second) return invalid("voter id " + std::to_string(v.id) + " appears twice");
    out.push_back({v.id, directory_id.value_or(uuid{}), std::string(listener_name), {v.host, v.port}});
  }
  if (out.empty()) return invalid("no controllers");
  return out;
}

}  // namespace mala::raft
