// The embedded "consumer" protocol that Kafka consumers put into JoinGroup metadata
// (ConsumerProtocolSubscription) and that the coordinator reads only to learn which topics a classic group
// subscribes to: that decides which committed offsets may expire while the group is Stable, and which offsets
// OffsetDelete refuses (GROUP_SUBSCRIBED_TO_TOPIC). As Kafka does, only the version-0 prefix is read (version
// int16, then Topics as an array of strings), which every later version starts with.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>

namespace mala::coordinator {

// ConsumerProtocol.PROTOCOL_TYPE.
inline constexpr std::string_view consumer_protocol_type = "consumer";

// The topics of a ConsumerProtocolSubscription; nullopt when the bytes are not one.
std::optional<std::set<std::string>> subscription_topics(std::span<const uint8_t> metadata);

}  // namespace mala::coordinator
