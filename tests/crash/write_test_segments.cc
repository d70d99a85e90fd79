// Writes a small partition log for the kafka-dump-log compatibility test
// (tests/integration/test_dump_log.py): batches uncompressed and compressed with each of Kafka's codecs
// (gzip, snappy in xerial framing, lz4 frame, zstd), appended through partition_log so that Mala itself lays
// out the segments (several, small segment.bytes) and the offset/time indexes (small index.interval.bytes, so
// every segment has entries), then closed cleanly. Prints a JSON manifest of what it wrote (segments, and per
// batch: offsets, codec, records with keys, values, headers and timestamps) for the test to compare with
// DumpLogSegments' output.
//
// Batches are built with record_batch_builder, compressed as producers compress them
// (mala/protocol/compression.h). Single-threaded command-line tool.
//
// Usage: mala_write_test_segments <partition dir (created; must not hold a log)>

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
    bytes batch = builder.compression(codec).build();
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
