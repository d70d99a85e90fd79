#include "mala/protocol/request_header.h"

namespace mala::protocol {

decode_status decode_request_header_prefix(wire_reader& r, request_header& out) {
  out.api_key = r.read_int16();
  out.api_version = r.read_int16();
  out.correlation_id = r.read_int32();
  return r.status();
}

decode_status decode_request_header_rest(wire_reader& r, request_header& out, int16_t header_version) {
  if (header_version >= 1) out.client_id = r.read_nullable_string(false);
  if (header_version >= 2) {
    const uint32_t tags = r.read_tag_count();
    for (uint32_t i = 0; i < tags && r.ok(); ++i) {
      r.read_uvarint();
      const uint32_t size = r.read_uvarint();
      r.skip(size);
    }
  }
  return r.status();
}

void encode_response_header(wire_writer& w, int32_t correlation_id, int16_t header_version) {
  w.write_int32(correlation_id);
  if (header_version >= 1) w.write_uvarint(0);
}

void encode_request_header(wire_writer& w, const request_header& header, int16_t header_version) {
  w.write_int16(header.api_key);
  w.write_int16(header.api_version);
  w.write_int32(header.correlation_id);
  if (header_version >= 1) w.write_nullable_string(header.client_id, false);
  if (header_version >= 2) w.write_uvarint(0);
}

}  // namespace mala::protocol
