// Writes a small partition log for the kafka-dump-log compatibility test
// (tests/integration/test_dump_log.py): batches uncompressed and compressed with each of Kafka's codecs
// (gzip, snappy in xerial framing, lz4 frame, zstd), appended through partition_log so that Mala itself lays
// out the segments (several, small segment.bytes) and the offset/time indexes (small index.interval.bytes, so
// every segment has entries), then closed cleanly. Prints a JSON manifest of what it wrote (segments, and per
// batch: offsets, codec, records with keys, values, headers and timestamps) for the test to compare with
// DumpLogSegments' output.
//
// The compressed batches are built here (record_batch_builder only makes uncompressed ones): the records
// section of an uncompressed batch, compressed, behind the same header with the codec bits set and the CRC
// recomputed. Single-threaded command-line tool.
//
// Usage: mala_write_test_segments <partition dir (created; must not hold a log)>
#include <lz4frame.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "mala/common/logging.h"
#include "mala/protocol/record_batch.h"
#include "mala/storage/partition_log.h"

namespace {

namespace proto = mala::protocol;
using bytes = std::vector<uint8_t>;

void put_be32(bytes& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

bool gzip_compress(std::span<const uint8_t> in, bytes& out) {
  z_stream zs{};
  // windowBits 15 + 16: a gzip stream (header and trailer), which Kafka's GZIPInputStream expects.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return false;
  out.resize(deflateBound(&zs, in.size()) + 32);
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END;
}

// snappy-java's SnappyOutputStream framing, which Kafka's producer writes: magic, version 1, compatible
// version 1, then blocks of (int32 BE compressed length, raw snappy).
bool snappy_compress(std::span<const uint8_t> in, bytes& out) {
  const uint8_t magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
  out.assign(magic, magic + 8);
  put_be32(out, 1);
  put_be32(out, 1);
  constexpr size_t block = 32 * 1024;
  for (size_t pos = 0; pos < in.size(); pos += block) {
    size_t n = std::min(block, in.size() - pos);
    std::string compressed;
    snappy::Compress(reinterpret_cast<const char*>(in.data() + pos), n, &compressed);
    put_be32(out, static_cast<uint32_t>(compressed.size()));
    out.insert(out.end(), compressed.begin(), compressed.end());
  }
  return true;
}

// LZ4 frame format with independent 64 KiB blocks, as Kafka's producer (and librdkafka) write it.
bool lz4_compress(std::span<const uint8_t> in, bytes& out) {
  LZ4F_preferences_t prefs{};
  prefs.frameInfo.blockMode = LZ4F_blockIndependent;
  prefs.frameInfo.blockSizeID = LZ4F_max64KB;
  out.resize(LZ4F_compressFrameBound(in.size(), &prefs));
  size_t n = LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), &prefs);
  if (LZ4F_isError(n)) return false;
  out.resize(n);
  return true;
}

bool zstd_compress(std::span<const uint8_t> in, bytes& out) {
  out.resize(ZSTD_compressBound(in.size()));
  size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  if (ZSTD_isError(n)) return false;
  out.resize(n);
  return true;
}

const char* codec_name(proto::compression_codec c) {
  switch (c) {
    case proto::compression_codec::none:
      return "none";
    case proto::compression_codec::gzip:
      return "gzip";
    case proto::compression_codec::snappy:
      return "snappy";
    case proto::compression_codec::lz4:
      return "lz4";
    case proto::compression_codec::zstd:
      return "zstd";
  }
  return "?";
}

// The uncompressed batch's header with the records section compressed and the CRC recomputed.
bool compress_batch(const bytes& plain, proto::compression_codec codec, bytes& out) {
  auto records = std::span<const uint8_t>(plain).subspan(proto::batch_layout::records);
  bytes compressed;
  bool ok = false;
  switch (codec) {
    case proto::compression_codec::none:
      out = plain;
      return true;
    case proto::compression_codec::gzip:
      ok = gzip_compress(records, compressed);
      break;
    case proto::compression_codec::snappy:
      ok = snappy_compress(records, compressed);
      break;
    case proto::compression_codec::lz4:
      ok = lz4_compress(records, compressed);
      break;
    case proto::compression_codec::zstd:
      ok = zstd_compress(records, compressed);
      break;
  }
  if (!ok) return false;
  out.assign(plain.begin(), plain.begin() + proto::batch_layout::records);
  out.insert(out.end(), compressed.begin(), compressed.end());
  const uint32_t length = static_cast<uint32_t>(out.size() - proto::batch_layout::log_overhead);
  for (int i = 0; i < 4; ++i)
    out[proto::batch_layout::batch_length + i] = static_cast<uint8_t>(length >> (24 - 8 * i));
  const int16_t attributes = static_cast<int16_t>((out[proto::batch_layout::attributes] << 8) |
                                                  out[proto::batch_layout::attributes + 1]) |
                             static_cast<int16_t>(codec);
  out[proto::batch_layout::attributes] = static_cast<uint8_t>(static_cast<uint16_t>(attributes) >> 8);
  out[proto::batch_layout::attributes + 1] = static_cast<uint8_t>(attributes & 0xff);
  return proto::rewrite_batch_crc(out);
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Printable, somewhat compressible text (DumpLogSegments prints payloads as UTF-8 strings).
std::string value_text(int64_t offset) {
  static const char words[][8] = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"};
  std::string v = "value-" + std::to_string(offset);
  uint64_t h = mix(static_cast<uint64_t>(offset));
  size_t n = 10 + h % 40;
  for (size_t i = 0; i < n; ++i) {
    v += '_';
    v += words[mix(h + i) % 8];
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mala::storage;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <partition dir>\n", argv[0]);
    return 2;
  }
  mala::set_log_level("warn");
  const std::filesystem::path dir = argv[1];
  std::error_code ec;
  if (std::filesystem::exists(dir / "00000000000000000000.log", ec)) {
    std::fprintf(stderr, "%s already holds a log\n", dir.c_str());
    return 2;
  }
  log_config config;
  config.segment_bytes = 8 * 1024;
  config.index_interval_bytes = 512;
  config.segment_index_bytes = 4096;
  log_open_options options;
  options.clean_shutdown = true;
  auto opened = partition_log::open(dir, {"dump", 0}, config, options);
  if (!opened) {
    std::fprintf(stderr, "open failed: %s\n", opened.error().message.c_str());
    return 1;
  }
  auto& log = **opened;

  const proto::compression_codec codecs[] = {proto::compression_codec::none, proto::compression_codec::gzip,
                                             proto::compression_codec::snappy, proto::compression_codec::lz4,
                                             proto::compression_codec::zstd};
  constexpr int64_t base_ts = 1'700'000'000'000;
  std::string json = "{\"batches\": [";
  for (int i = 0; i < 40; ++i) {
    const auto codec = codecs[i % 5];
    const int64_t base = log.log_end_offset();
    const int count = 1 + static_cast<int>(mix(static_cast<uint64_t>(i) + 99) % 12);
    proto::record_batch_builder builder;
    std::string records_json;
    for (int r = 0; r < count; ++r) {
      const int64_t offset = base + r;
      const std::string key = "key-" + std::to_string(offset);
      const std::string value = value_text(offset);
      const std::string header_value = "h" + std::to_string(offset);
      const int64_t ts = base_ts + offset * 10;
      proto::record_header_input header{
          "origin", std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(header_value.data()),
                                             header_value.size())};
      // Every third record has a null key, to cover keySize -1 too.
      std::optional<std::span<const uint8_t>> key_span;
      if (offset % 3 != 2)
        key_span = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(key.data()), key.size());
      builder.add(ts, key_span,
                  std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()),
                  std::span<const proto::record_header_input>(&header, 1));
      records_json += std::string(r ? ", " : "") + "{\"offset\": " + std::to_string(offset) +
                      ", \"timestamp\": " + std::to_string(ts) +
                      ", \"key\": " + (key_span ? "\"" + key + "\"" : "null") + ", \"value\": \"" + value +
                      "\", \"headers\": {\"origin\": \"" + header_value + "\"}}";
    }
    bytes batch;
    if (!compress_batch(builder.build(), codec, batch)) {
      std::fprintf(stderr, "cannot compress batch %d with %s\n", i, codec_name(codec));
      return 1;
    }
    auto appended = log.append_as_leader(batch, 3);
    if (!appended) {
      std::fprintf(stderr, "append failed: %s\n", appended.error().message.c_str());
      return 1;
    }
    json += std::string(i ? ", " : "") + "{\"base_offset\": " + std::to_string(appended->first_offset) +
            ", \"last_offset\": " + std::to_string(appended->last_offset) +
            ", \"count\": " + std::to_string(count) + ", \"codec\": \"" + codec_name(codec) +
            "\", \"size\": " + std::to_string(batch.size()) + ", \"records\": [" + records_json + "]}";
  }
  const int64_t end = log.log_end_offset();
  const size_t segments = log.segment_count();
  if (auto st = log.close(); !st.ok()) {
    std::fprintf(stderr, "close failed: %s\n", st.message.c_str());
    return 1;
  }
  json += "], \"end_offset\": " + std::to_string(end) + ", \"segments\": " + std::to_string(segments) + "}\n";
  std::fputs(json.c_str(), stdout);
  return 0;
}
