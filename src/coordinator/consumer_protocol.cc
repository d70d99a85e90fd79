#include "mala/coordinator/consumer_protocol.h"

#include "mala/protocol/wire.h"

namespace mala::coordinator {

std::optional<std::set<std::string>> subscription_topics(std::span<const uint8_t> metadata) {
  protocol::wire_reader r(metadata);
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

}  // namespace mala::coordinator
