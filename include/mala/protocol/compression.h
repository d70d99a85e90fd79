// Compression codecs of Kafka record batches (attribute bits 0-2): the byte formats Apache Kafka's Java
// client and librdkafka write and read, so a batch compressed here can be read by any client and a client's
// batch can be decompressed by the broker (to validate and count records, to convert, or to recompress for
// compression.type).
//
//   gzip    a gzip stream (RFC 1952). Concatenated members are read one after the other, as Java's
//           GZIPInputStream does.
//   snappy  the Java client writes xerial snappy-java framing: magic 0x82 "SNAPPY" 0x00, int32 version and
//           int32 minimum compatible version, then chunks of [int32 big-endian length][raw snappy block];
//           librdkafka writes one raw snappy block. Both are accepted here; compress() writes xerial framing,
//           which both clients read.
//   lz4     the LZ4 frame format with independent 64 KiB blocks, no block or content checksum, like the Java
//           client's Lz4BlockOutputStream. Magic v0/v1 messages had a wrong frame-descriptor checksum
//           (KAFKA-3160); v2 batches always carry the correct one, which is verified.
//   zstd    standard zstd frames (KIP-110), decompressed as a stream since producers do not always state the
//           content size.
//
// Decompression is bounded: output past `max_output_bytes` fails with message_too_large before more memory is
// allocated, so a small "decompression bomb" cannot exhaust the broker. The zstd window is capped as well
// (see compression.cc). Malformed or truncated input fails with corrupt_message (Kafka's CORRUPT_MESSAGE for
// a batch that does not decompress). Nothing here throws or aborts on bad input.
//
// All functions are pure; they keep no state between calls and may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "mala/common/result.h"
#include "mala/protocol/record_batch.h"

namespace mala::protocol {

// default_max_decompressed_bytes (record_batch.h) bounds the output unless the caller says otherwise.

// Compresses `data` with `codec` (a copy for none). Compressing cannot fail for valid codecs; an out-of-range
// codec value yields an empty vector.
std::vector<uint8_t> compress(compression_codec codec, std::span<const uint8_t> data);

// Decompresses `data`. Errors: corrupt_message (malformed, truncated, trailing garbage, unknown codec),
// message_too_large (the output would exceed max_output_bytes).
result<std::vector<uint8_t>> decompress(compression_codec codec, std::span<const uint8_t> data,
                                        size_t max_output_bytes = default_max_decompressed_bytes);

// As decompress(), into a caller-owned buffer that is cleared first and may be reused across batches to keep
// its capacity. On error the buffer's contents are unspecified (but never larger than max_output_bytes + 1).
status decompress_into(compression_codec codec, std::span<const uint8_t> data, size_t max_output_bytes,
                       std::vector<uint8_t>& out);

}  // namespace mala::protocol
