// Deterministic, fully populated instances of every generated message, for round-trip tests and fuzz seeds.
// Lives in the test-support library mala_protocol_samples, not in the broker.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace mala::protocol {

// Fills every field present at `version` with values derived from `seed` and encodes the message into `out`.
// Returns false for an unknown message name or if encoded_size() disagreed with the bytes written.
bool encode_sample(std::string_view message_name, int16_t version, uint32_t seed, std::vector<uint8_t>& out);

}  // namespace mala::protocol
