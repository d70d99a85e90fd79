#include "mala/coordinator/group_records.h"

#include <string>

#include "mala/protocol/versioned_message.h"
#include "mala/protocol/wire.h"

namespace mala::coordinator {

namespace {

// Decodes a schema body of `version` that must fill the bytes exactly.
template <typename M>
result<M> decode_body(protocol::wire_reader& r, int16_t version, const char* what) {
  if (version < M::min_version || version > M::max_version) {
    return status::error(error_code::corrupt_message,
                         std::string(what) + " version " + std::to_string(version) + " is not known");
  }
  M m;
  if (m.decode(r, version) != protocol::decode_status::ok || !r.ok()) {
    return status::error(error_code::corrupt_message, std::string(what) + " does not parse");
  }
  return m;
}

}  // namespace

coordinator_record offset_commit_record(const std::string& group, const std::string& topic, int32_t partition,
                                        const protocol::offset_commit_value& value) {
  protocol::offset_commit_key key;
  key.group = group;
  key.topic = topic;
  key.partition = partition;
  // Version 1 is the one with expireTimestamp: Kafka writes it only when the commit asked for a retention
  // time.
  const int16_t version =
      value.expire_timestamp >= 0 ? offset_commit_value_version_with_expiry : offset_commit_value_version;
  return {protocol::encode_versioned(key, offset_commit_key_version),
          protocol::encode_versioned(value, version)};
}

coordinator_record offset_commit_tombstone(const std::string& group, const std::string& topic,
                                           int32_t partition) {
  protocol::offset_commit_key key;
  key.group = group;
  key.topic = topic;
  key.partition = partition;
  return {protocol::encode_versioned(key, offset_commit_key_version), std::nullopt};
}

coordinator_record group_metadata_record(const std::string& group,
                                         const protocol::group_metadata_value& value) {
  protocol::group_metadata_key key;
  key.group = group;
  return {protocol::encode_versioned(key, group_metadata_key_version),
          protocol::encode_versioned(value, group_metadata_value_version)};
}

coordinator_record group_metadata_tombstone(const std::string& group) {
  protocol::group_metadata_key key;
  key.group = group;
  return {protocol::encode_versioned(key, group_metadata_key_version), std::nullopt};
}

result<decoded_record> decode_record(std::span<const uint8_t> key,
                                     std::optional<std::span<const uint8_t>> value) {
  protocol::wire_reader kr(key);
  const int16_t key_version = kr.read_int16();
  if (!kr.ok()) return status::error(error_code::corrupt_message, "record key shorter than its version");

  int16_t value_version = -1;
  std::optional<protocol::wire_reader> vr;
  if (value) {
    vr.emplace(*value);
    value_version = vr->read_int16();
    if (!vr->ok()) return status::error(error_code::corrupt_message, "record value shorter than its version");
  }

  if (key_version == 0 || key_version == 1) {
    auto k = decode_body<protocol::offset_commit_key>(kr, key_version, "OffsetCommitKey");
    if (!k) return k.error();
    offset_commit_entry e{std::move(*k), std::nullopt, value_version};
    if (vr) {
      auto v = decode_body<protocol::offset_commit_value>(*vr, value_version, "OffsetCommitValue");
      if (!v) return v.error();
      e.value = std::move(*v);
    }
    return decoded_record(std::move(e));
  }
  if (key_version == 2) {
    auto k = decode_body<protocol::group_metadata_key>(kr, key_version, "GroupMetadataKey");
    if (!k) return k.error();
    group_metadata_entry e{std::move(*k), std::nullopt};
    if (vr) {
      auto v = decode_body<protocol::group_metadata_value>(*vr, value_version, "GroupMetadataValue");
      if (!v) return v.error();
      e.value = std::move(*v);
    }
    return decoded_record(std::move(e));
  }
  if (key_version < 0) {
    return status::error(error_code::corrupt_message, "negative record key version");
  }
  return decoded_record(other_entry{key_version});
}

}  // namespace mala::coordinator
