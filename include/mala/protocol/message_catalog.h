// The list of every generated message (from proto/), with its versions and a decode/re-encode entry point.
// Used by the round-trip tests, the fuzz target and diagnostics; the broker's handler table is separate (it
// declares what is served, this lists what can be parsed).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "mala/protocol/wire.h"

namespace mala::protocol {

// `metadata`: a KRaft metadata log record (api_key is its record type; see mala/metadata/metadata_records.h).
enum class message_kind : uint8_t { request, response, header, data, metadata };

struct message_info {
  std::string_view name;
  message_kind kind;
  int16_t api_key;  // -1 for data messages; the record type for metadata records
  int16_t min_version;
  int16_t max_version;
  int16_t kafka4_min_version;  // oldest version Kafka 4.x serves in full (older ones: compatibility extras)
  int16_t first_flexible_version;  // -1 if never flexible
  bool latest_version_unstable;
  // Decodes `in` as this message at `version`; on success, and if `out` is given, re-encodes it into *out.
  decode_status (*round_trip)(std::span<const uint8_t> in, int16_t version, std::vector<uint8_t>* out);
  // Responses only (null otherwise): decodes `in` (the body, without the response header) at `version` and
  // appends every ErrorCode it holds, at any depth, to `out` (Kafka's AbstractResponse.errorCounts).
  decode_status (*error_codes)(std::span<const uint8_t> in, int16_t version, std::vector<int16_t>& out);
};

std::span<const message_info> message_catalog();

// The request or response definition for an API key, or nullptr.
const message_info* find_message(int16_t api_key, message_kind kind);

inline bool is_flexible_version(const message_info& info, int16_t version) {
  return info.first_flexible_version >= 0 && version >= info.first_flexible_version;
}

}  // namespace mala::protocol
