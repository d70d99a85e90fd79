// The records of __consumer_offsets, byte for byte as Apache Kafka 4.x writes them, so that a log written by
// Mala can be read by Kafka's tools (kafka-dump-log --offsets-decoder, kafka-console-consumer with the
// offsets formatter) and the other way round. Each record's key and value start with an int16 version,
// followed by the schema of that version (proto/OffsetCommitKey.msg, OffsetCommitValue, GroupMetadataKey,
// GroupMetadataValue; Kafka's group-coordinator/src/main/resources/common/message/*.json). The key version
// says what the record is: 0 and 1 an offset commit, 2 a classic group's metadata; Kafka 4.x writes key
// version 1 and 2 and values OffsetCommitValue v3 (v1 when the commit carries an explicit expire timestamp,
// OffsetCommit v2-v4's retention time) and GroupMetadataValue v3 (MetadataVersion.offsetCommitValueVersion /
// groupMetadataValueVersion). A null value is a tombstone: the offset or the group is gone. Key versions 3
// and up are the KIP-848 consumer group records (ConsumerGroupMetadataKey, ...); they are recognised and
// skipped until the consumer protocol is served.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "mala/common/result.h"
#include "mala/protocol/messages/group_metadata_key.h"
#include "mala/protocol/messages/group_metadata_value.h"
#include "mala/protocol/messages/offset_commit_key.h"
#include "mala/protocol/messages/offset_commit_value.h"

namespace mala::coordinator {

inline constexpr int16_t offset_commit_key_version = 1;
inline constexpr int16_t group_metadata_key_version = 2;
inline constexpr int16_t offset_commit_value_version = 3;
inline constexpr int16_t offset_commit_value_version_with_expiry = 1;
inline constexpr int16_t group_metadata_value_version = 3;

// A record to append: key, and value (nullopt: tombstone).
struct coordinator_record {
  std::vector<uint8_t> key;
  std::optional<std::vector<uint8_t>> value;
};

coordinator_record offset_commit_record(const std::string& group, const std::string& topic, int32_t partition,
                                        const protocol::offset_commit_value& value);
coordinator_record offset_commit_tombstone(const std::string& group, const std::string& topic,
                                           int32_t partition);
coordinator_record group_metadata_record(const std::string& group,
                                         const protocol::group_metadata_value& value);
coordinator_record group_metadata_tombstone(const std::string& group);

// A record read back. `value` is nullopt for a tombstone.
struct offset_commit_entry {
  protocol::offset_commit_key key;
  std::optional<protocol::offset_commit_value> value;
  int16_t value_version = -1;
};
struct group_metadata_entry {
  protocol::group_metadata_key key;
  std::optional<protocol::group_metadata_value> value;
};
// A key version this coordinator does not apply (KIP-848 and share group records).
struct other_entry {
  int16_t key_version = -1;
};
using decoded_record = std::variant<offset_commit_entry, group_metadata_entry, other_entry>;

// Decodes one record of __consumer_offsets; CORRUPT_MESSAGE for a key or value that does not parse (or a
// value version the schema does not know).
result<decoded_record> decode_record(std::span<const uint8_t> key,
                                     std::optional<std::span<const uint8_t>> value);

}  // namespace mala::coordinator
