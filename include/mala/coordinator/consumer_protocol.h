// The embedded "consumer" protocol that Kafka consumers put into JoinGroup metadata
// (ConsumerProtocolSubscription) and SyncGroup assignments (ConsumerProtocolAssignment).
//
// The classic coordinator reads only the topics of a subscription, to learn which topics a classic group
// subscribes to: that decides which committed offsets may expire while the group is Stable, and which offsets
// OffsetDelete refuses (GROUP_SUBSCRIBED_TO_TOPIC). As Kafka does, only the version-0 prefix is read there
// (version int16, then Topics as an array of strings), which every later version starts with.
//
// Classic members of KIP-848 consumer groups need the whole of both: the subscription (topics, owned
// partitions, rack) from JoinGroup, and their assignment, computed by the server-side assignor, encoded for
// SyncGroup at the version the member's subscription used (Kafka's ConsumerProtocol.serializeAssignment).
// A version newer than the newest known (3) is read as the newest, as Kafka's clients do.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mala::coordinator {

// ConsumerProtocol.PROTOCOL_TYPE.
inline constexpr std::string_view consumer_protocol_type = "consumer";

// Partitions by topic name.
using named_partitions = std::map<std::string, std::set<int32_t>>;

// The topics of a ConsumerProtocolSubscription; nullopt when the bytes are not one.
std::optional<std::set<std::string>> subscription_topics(std::span<const uint8_t> metadata);

struct consumer_subscription {
  int16_t version = 0;
  std::vector<std::string> topics;
  named_partitions owned;              // version 1+
  std::optional<std::string> rack_id;  // version 3+
};

// A whole ConsumerProtocolSubscription; nullopt when the bytes are not one.
std::optional<consumer_subscription> decode_subscription(std::span<const uint8_t> metadata);

// The version prefix of embedded protocol bytes; nullopt when there is none.
std::optional<int16_t> embedded_version(std::span<const uint8_t> bytes);

// A ConsumerProtocolAssignment of `partitions` at `version` (clamped to 0..3), no user data.
std::vector<uint8_t> encode_assignment(const named_partitions& partitions, int16_t version);

// The partitions of a ConsumerProtocolAssignment; nullopt when the bytes are not one. Empty bytes (a member
// of a classic group that got no assignment yet) are no partitions.
std::optional<named_partitions> decode_assignment(std::span<const uint8_t> bytes);

}  // namespace mala::coordinator
