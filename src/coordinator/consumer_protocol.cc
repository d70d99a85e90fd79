#include "mala/coordinator/consumer_protocol.h"

#include <algorithm>

#include "mala/protocol/messages/consumer_protocol_assignment.h"
#include "mala/protocol/messages/consumer_protocol_subscription.h"
#include "mala/protocol/versioned_message.h"
#include "mala/protocol/wire.h"

namespace mala::coordinator {

namespace proto = mala::protocol;

namespace {

constexpr int16_t newest_version = 3;

template <typename M>
std::optional<M> decode_embedded(std::span<const uint8_t> bytes, int16_t& version) {
  proto::wire_reader r(bytes);
  version = r.read_int16();
  if (!r.ok() || version < 0) return std::nullopt;
  M m;
  if (m.decode(r, std::min(version, newest_version)) != proto::decode_status::ok || !r.ok())
    return std::nullopt;
  return m;
}

}  // namespace

std::optional<std::set<std::string>> subscription_topics(std::span<const uint8_t> metadata) {
  proto::wire_reader r(metadata);
  const int16_t version = r.read_int16();
  if (!r.ok() || version < 0) return std::nullopt;
  const int32_t count = r.read_array_length(/*compact=*/false);
  if (!r.ok() || count < 0) return std::nullopt;
  std::set<std::string> topics;
  for (int32_t i = 0; i < count; ++i) {
    std::string topic = r.read_string(/*compact=*/false);
    if (!r.ok()) return std::nullopt;
    topics.insert(std::move(topic));
  }
  return topics;
}

std::optional<consumer_subscription> decode_subscription(std::span<const uint8_t> metadata) {
  int16_t version = 0;
  auto m = decode_embedded<proto::consumer_protocol_subscription>(metadata, version);
  if (!m) return std::nullopt;
  consumer_subscription s;
  s.version = version;
  s.topics = std::move(m->topics);
  for (const auto& tp : m->owned_partitions) {
    if (!tp.partitions.empty()) s.owned[tp.topic].insert(tp.partitions.begin(), tp.partitions.end());
  }
  s.rack_id = m->rack_id;
  return s;
}

std::optional<int16_t> embedded_version(std::span<const uint8_t> bytes) {
  proto::wire_reader r(bytes);
  const int16_t version = r.read_int16();
  if (!r.ok() || version < 0) return std::nullopt;
  return version;
}

std::vector<uint8_t> encode_assignment(const named_partitions& partitions, int16_t version) {
  proto::consumer_protocol_assignment a;
  for (const auto& [topic, ps] : partitions) {
    auto& e = a.assigned_partitions.emplace_back();
    e.topic = topic;
    e.partitions.assign(ps.begin(), ps.end());
  }
  a.user_data = std::nullopt;
  return proto::encode_versioned(a, std::clamp<int16_t>(version, 0, newest_version));
}

std::optional<named_partitions> decode_assignment(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return named_partitions{};
  int16_t version = 0;
  auto m = decode_embedded<proto::consumer_protocol_assignment>(bytes, version);
  if (!m) return std::nullopt;
  named_partitions out;
  for (const auto& tp : m->assigned_partitions) {
    if (!tp.partitions.empty()) out[tp.topic].insert(tp.partitions.begin(), tp.partitions.end());
  }
  return out;
}

}  // namespace mala::coordinator
