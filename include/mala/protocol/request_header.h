// Kafka request header (v1, v2) and response header (v0, v1). Hand-written rather than generated: the request
// header's ClientId stays a non-compact nullable string even in the flexible v2 header (Kafka's
// RequestHeader.json marks that field flexibleVersions "none").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mala/protocol/wire.h"

namespace mala::protocol {

struct request_header {
  int16_t api_key = 0;
  int16_t api_version = 0;
  int32_t correlation_id = 0;
  std::optional<std::string> client_id;
};

// Reads api key, version and correlation id (the part every header version shares).
decode_status decode_request_header_prefix(wire_reader& r, request_header& out);

// Reads the rest of the header after the prefix: ClientId (header v1+) and, for header v2, the tagged fields.
decode_status decode_request_header_rest(wire_reader& r, request_header& out, int16_t header_version);

// Request header version for an API version: 2 if that request version is flexible, else 1.
inline int16_t request_header_version(bool flexible_request) {
  return flexible_request ? 2 : 1;
}

// Writes a response header: v0 is the correlation id; v1 adds an empty tagged-field section. ApiVersions
// responses always use v0 (KIP-511), whatever the request version.
void encode_response_header(wire_writer& w, int32_t correlation_id, int16_t header_version);

void encode_request_header(wire_writer& w, const request_header& header, int16_t header_version);

}  // namespace mala::protocol
