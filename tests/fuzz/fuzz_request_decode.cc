// libFuzzer target: arbitrary bytes as a Kafka request frame body (header + message). The first two bytes pick the
// API key and version the way a real header does, then every request definition that key has is decoded at that
// version and, when the decode succeeds, re-encoded and decoded again, which must give the same bytes. Any crash,
// sanitizer report, out-of-bounds read or unbounded allocation is a bug: decoders must bound every length and count
// by the bytes left.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "mala/protocol/message_catalog.h"
#include "mala/protocol/request_header.h"

using namespace mala::protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> input(data, size);
  wire_reader r(input);
  request_header header;
  if (decode_request_header_prefix(r, header) != decode_status::ok) return 0;
  const message_info* info = find_message(header.api_key, message_kind::request);
  if (!info) {
    // Still exercise the header decoder's tail on arbitrary bytes.
    decode_request_header_rest(r, header, 2);
    return 0;
  }
  const int16_t span = static_cast<int16_t>(info->max_version - info->min_version + 1);
  const int16_t version = static_cast<int16_t>(info->min_version + (header.api_version & 0x7fff) % span);
  const bool flexible = is_flexible_version(*info, version);
  if (decode_request_header_rest(r, header, request_header_version(flexible)) != decode_status::ok) return 0;
  std::vector<uint8_t> first;
  if (info->round_trip(r.rest(), version, &first) != decode_status::ok) return 0;
  std::vector<uint8_t> second;
  if (info->round_trip(first, version, &second) != decode_status::ok || first != second) std::abort();
  return 0;
}
