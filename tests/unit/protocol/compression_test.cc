// Record batch compression: round trips for every codec, the decompression bound, malformed input, compressed
// batches built and read back, and batches captured from real producers (compressed_batch_vectors.h).
#include "mala/protocol/compression.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compressed_batch_vectors.h"
#include "mala/protocol/record_batch.h"

namespace mala::protocol {
namespace {

using bytes = std::vector<uint8_t>;

constexpr compression_codec all_codecs[] = {compression_codec::gzip, compression_codec::snappy,
                                            compression_codec::lz4, compression_codec::zstd};

std::string codec_name(compression_codec c) {
  switch (c) {
    case compression_codec::none:
      return "none";
    case compression_codec::gzip:
      return "gzip";
    case compression_codec::snappy:
      return "snappy";
    case compression_codec::lz4:
      return "lz4";
    case compression_codec::zstd:
      return "zstd";
  }
  return "?";
}

bytes as_bytes(std::string_view s) {
  return {s.begin(), s.end()};
}
std::string as_string(std::span<const uint8_t> b) {
  return {b.begin(), b.end()};
}

bytes random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  bytes out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

// Text-like data that every codec shrinks a lot.
bytes compressible_bytes(size_t n) {
  bytes out;
  out.reserve(n);
  for (size_t i = 0; out.size() < n; ++i) {
    const std::string line = "record " + std::to_string(i % 977) + " of the compressible sample;\n";
    for (char c : line) {
      if (out.size() == n) break;
      out.push_back(static_cast<uint8_t>(c));
    }
  }
  return out;
}

bytes from_hex(std::string_view hex) {
  bytes out;
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  }
  return out;
}

bytes concat(const bytes& a, const bytes& b) {
  bytes out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

void expect_round_trip(compression_codec codec, const bytes& input) {
  const auto compressed = compress(codec, input);
  ASSERT_FALSE(compressed.empty()) << codec_name(codec);
  auto out = decompress(codec, compressed);
  ASSERT_TRUE(out.ok()) << codec_name(codec) << ": " << out.error().message;
  EXPECT_EQ(*out, input) << codec_name(codec);
}

// ---------------------------------------------------------------------------------------------------------------
// Codecs.

TEST(compression, round_trips_every_codec) {
  const bytes empty;
  const bytes small = as_bytes("hello, kafka");
  const bytes random = random_bytes(size_t{1} << 20, 7);
  const bytes text = compressible_bytes(size_t{1} << 20);
  for (auto codec : all_codecs) {
    SCOPED_TRACE(codec_name(codec));
    expect_round_trip(codec, empty);
    expect_round_trip(codec, small);
    expect_round_trip(codec, random);
    expect_round_trip(codec, text);
    EXPECT_LT(compress(codec, text).size(), text.size() / 4);
  }
  expect_round_trip(compression_codec::none, text);
}

TEST(compression, writes_the_formats_kafka_clients_write) {
  const bytes text = compressible_bytes(100000);
  // gzip: a gzip member (magic 1f 8b, deflate).
  const auto gz = compress(compression_codec::gzip, text);
  ASSERT_GE(gz.size(), 3u);
  EXPECT_EQ(gz[0], 0x1f);
  EXPECT_EQ(gz[1], 0x8b);
  EXPECT_EQ(gz[2], 0x08);
  // snappy: xerial framing, version 1, minimum compatible version 1, then 32 KiB chunks with int32 lengths.
  const auto sn = compress(compression_codec::snappy, text);
  const bytes xerial_header = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1};
  ASSERT_GE(sn.size(), xerial_header.size());
  EXPECT_TRUE(std::equal(xerial_header.begin(), xerial_header.end(), sn.begin()));
  size_t chunks = 0;
  for (size_t pos = xerial_header.size(); pos < sn.size(); ++chunks) {
    ASSERT_LE(pos + 4, sn.size());
    pos += 4 + (size_t{sn[pos]} << 24 | size_t{sn[pos + 1]} << 16 | size_t{sn[pos + 2]} << 8 | sn[pos + 3]);
    ASSERT_LE(pos, sn.size());
  }
  EXPECT_EQ(chunks, 4u);  // 100000 bytes in 32 KiB chunks
  // lz4: frame magic, FLG 0x60 (version 1, independent blocks, no checksums, no size), BD 0x40 (64 KiB), as
  // both the Java client and librdkafka write (see compressed_batch_vectors.h).
  const auto lz = compress(compression_codec::lz4, text);
  const bytes lz4_header = {0x04, 0x22, 0x4d, 0x18, 0x60, 0x40};
  ASSERT_GE(lz.size(), lz4_header.size());
  EXPECT_TRUE(std::equal(lz4_header.begin(), lz4_header.end(), lz.begin()));
  // zstd: frame magic.
  const auto zs = compress(compression_codec::zstd, text);
  const bytes zstd_magic = {0x28, 0xb5, 0x2f, 0xfd};
  ASSERT_GE(zs.size(), zstd_magic.size());
  EXPECT_TRUE(std::equal(zstd_magic.begin(), zstd_magic.end(), zs.begin()));
}

TEST(compression, reads_raw_snappy_as_librdkafka_writes_it) {
  // One raw snappy block: uncompressed length varint 5, literal tag (length - 1) << 2, the bytes.
  const bytes raw = {0x05, 0x10, 'h', 'e', 'l', 'l', 'o'};
  auto out = decompress(compression_codec::snappy, raw);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(as_string(*out), "hello");
}

TEST(compression, reads_concatenated_members_frames_and_streams) {
  const bytes a = as_bytes("first part, ");
  const bytes b = compressible_bytes(70000);
  for (auto codec : all_codecs) {
    SCOPED_TRACE(codec_name(codec));
    auto out = decompress(codec, concat(compress(codec, a), compress(codec, b)));
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, concat(a, b));
  }
}

TEST(compression, output_bound_is_exact) {
  const bytes text = compressible_bytes(100000);
  for (auto codec : all_codecs) {
    SCOPED_TRACE(codec_name(codec));
    const auto compressed = compress(codec, text);
    EXPECT_TRUE(decompress(codec, compressed, text.size()).ok());
    auto over = decompress(codec, compressed, text.size() - 1);
    ASSERT_FALSE(over.ok());
    EXPECT_EQ(over.error().code, error_code::message_too_large);
  }
  EXPECT_TRUE(decompress(compression_codec::none, text, text.size()).ok());
  EXPECT_EQ(decompress(compression_codec::none, text, 10).error().code, error_code::message_too_large);
}

TEST(compression, decompression_bomb_fails_without_allocating_past_the_bound) {
  const bytes zeros(size_t{64} << 20, 0);
  constexpr size_t bound = size_t{1} << 20;
  for (auto codec : all_codecs) {
    SCOPED_TRACE(codec_name(codec));
    const auto bomb = compress(codec, zeros);
    ASSERT_LT(bomb.size(), size_t{4} << 20);  // a small input...
    bytes out;
    const auto st = decompress_into(codec, bomb, bound, out);  // ...that would expand 64 times past the bound
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code, error_code::message_too_large);
    EXPECT_LE(out.capacity(), bound + 1);
  }
}

TEST(compression, raw_snappy_declaring_a_huge_length_is_refused_before_allocating) {
  // Uncompressed length varint 0xffffffff, then a few bytes.
  const bytes raw = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x10, 'x'};
  bytes out;
  const auto st = decompress_into(compression_codec::snappy, raw, size_t{1} << 20, out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code, error_code::message_too_large);
  EXPECT_LE(out.capacity(), (size_t{1} << 20) + 1);
}

TEST(compression, truncated_input_is_an_error) {
  const bytes text = compressible_bytes(200000);
  for (auto codec : all_codecs) {
    SCOPED_TRACE(codec_name(codec));
    const auto compressed = compress(codec, text);
    for (size_t keep : {size_t{0}, size_t{1}, size_t{5}, compressed.size() / 2, compressed.size() - 1}) {
      SCOPED_TRACE(keep);
      auto out = decompress(codec, std::span(compressed).first(keep));
      ASSERT_FALSE(out.ok());
      EXPECT_EQ(out.error().code, error_code::corrupt_message);
    }
  }
}

TEST(compression, garbage_and_trailing_garbage_are_errors) {
  const bytes garbage = random_bytes(4096, 11);
  const bytes text = compressible_bytes(5000);
  for (auto codec : all_codecs) {
    SCOPED_TRACE(codec_name(codec));
    auto out = decompress(codec, garbage);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error().code, error_code::corrupt_message);
    auto trailing = decompress(codec, concat(compress(codec, text), as_bytes("junk after the data")));
    ASSERT_FALSE(trailing.ok());
    EXPECT_EQ(trailing.error().code, error_code::corrupt_message);
  }
  // The xerial header alone is an empty stream; a header cut short or a chunk longer than the data is not.
  const bytes xerial_header = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1};
  EXPECT_TRUE(decompress(compression_codec::snappy, xerial_header).ok());
  EXPECT_FALSE(decompress(compression_codec::snappy, std::span(xerial_header).first(12)).ok());
  EXPECT_FALSE(decompress(compression_codec::snappy, concat(xerial_header, {0, 0, 0, 9, 1, 2})).ok());
  EXPECT_FALSE(decompress(static_cast<compression_codec>(5), text).ok());
}

TEST(compression, corrupted_input_never_crashes) {
  // Flipped bytes may or may not be detected (lz4 and snappy carry no checksum here); decoding must stay in
  // bounds and within the output bound either way (the sanitizer build checks the former).
  const bytes text = compressible_bytes(50000);
  std::mt19937 rng(3);
  for (auto codec : all_codecs) {
    const auto compressed = compress(codec, text);
    for (int round = 0; round < 200; ++round) {
      bytes damaged = compressed;
      for (int flips = 0; flips < 3; ++flips)
        damaged[rng() % damaged.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      bytes out;
      const auto st = decompress_into(codec, damaged, text.size() * 2, out);
      if (st.ok()) {
        EXPECT_LE(out.size(), text.size() * 2);
      } else {
        EXPECT_TRUE(st.code == error_code::corrupt_message || st.code == error_code::message_too_large);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Compressed batches.

struct expected_record {
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::string>> headers;
};

void expect_records(const record_batch_view& view, std::vector<uint8_t>& buffer,
                    const std::vector<expected_record>& expected) {
  auto reader = view.records(buffer);
  size_t i = 0;
  for (const auto& r : reader) {
    ASSERT_LT(i, expected.size());
    const auto& e = expected[i];
    EXPECT_EQ(r.offset_delta, static_cast<int32_t>(i));
    EXPECT_EQ(r.key ? std::optional(as_string(*r.key)) : std::nullopt, e.key) << "record " << i;
    EXPECT_EQ(r.value ? std::optional(as_string(*r.value)) : std::nullopt, e.value) << "record " << i;
    std::vector<std::pair<std::string, std::string>> headers;
    for (const auto& h : r.headers)
      headers.emplace_back(std::string(h.key), h.value ? as_string(*h.value) : "");
    EXPECT_EQ(headers, e.headers) << "record " << i;
    ++i;
  }
  EXPECT_EQ(reader.status(), batch_status::ok) << batch_status_name(reader.status());
  EXPECT_EQ(i, expected.size());
}

std::vector<expected_record> sample_records() {
  std::vector<expected_record> records;
  records.push_back({"key-0", "first value", {{"trace", "abc"}, {"empty", ""}}});
  records.push_back({std::nullopt, "no key", {}});
  records.push_back({"tombstone", std::nullopt, {}});
  const auto text = compressible_bytes(300000);  // several codec blocks
  records.push_back({"big", as_string(text), {}});
  return records;
}

bytes build_sample(compression_codec codec, const std::vector<expected_record>& records) {
  record_batch_builder builder;
  builder.base_offset(100).producer(42, 1, 7).compression(codec);
  int64_t ts = 1700000000000;
  for (const auto& r : records) {
    std::vector<bytes> storage;
    storage.reserve(2 + r.headers.size());
    auto span_of = [&](const std::optional<std::string>& s) -> std::optional<std::span<const uint8_t>> {
      if (!s) return std::nullopt;
      return std::span<const uint8_t>(storage.emplace_back(as_bytes(*s)));
    };
    std::vector<record_header_input> headers;
    for (const auto& [k, v] : r.headers)
      headers.push_back({k, std::span<const uint8_t>(storage.emplace_back(as_bytes(v)))});
    const auto key = span_of(r.key);
    const auto value = span_of(r.value);
    builder.add(ts++, key, value, headers);
  }
  return builder.build();
}

TEST(compressed_batch, build_validate_and_read_back) {
  const auto records = sample_records();
  const auto plain = build_sample(compression_codec::none, records);
  for (auto codec : all_codecs) {
    SCOPED_TRACE(codec_name(codec));
    const auto batch = build_sample(codec, records);
    EXPECT_LT(batch.size(), plain.size() / 4);
    record_batch_view view(batch);
    ASSERT_TRUE(view.ok()) << batch_status_name(view.status());
    EXPECT_EQ(view.compression(), codec);
    EXPECT_EQ(view.header().attributes & batch_attributes::compression_mask, static_cast<int16_t>(codec));
    EXPECT_EQ(view.record_count(), 4);
    EXPECT_EQ(view.last_offset(), 103);
    EXPECT_EQ(view.header().producer_id, 42);
    EXPECT_EQ(view.header().max_timestamp, 1700000000003);
    // Callers that refuse to decompress still get `compressed`.
    EXPECT_EQ(view.check_records(), batch_status::compressed);
    std::vector<uint8_t> buffer;
    EXPECT_EQ(view.check_records(buffer), batch_status::ok);
    expect_records(view, buffer, records);
    // The decompressed records are byte for byte those of the uncompressed batch.
    EXPECT_TRUE(std::equal(buffer.begin(), buffer.end(), plain.begin() + batch_layout::records, plain.end()));
  }
}

TEST(compressed_batch, uncompressed_batches_are_read_in_place) {
  const auto batch = build_sample(compression_codec::none, sample_records());
  record_batch_view view(batch);
  std::vector<uint8_t> buffer = {1, 2, 3};
  auto reader = view.records(buffer);
  auto first = reader.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->encoded.data(), batch.data() + batch_layout::records);
  EXPECT_EQ(buffer, (bytes{1, 2, 3}));
  EXPECT_EQ(view.check_records(buffer), batch_status::ok);
}

TEST(compressed_batch, decompression_bound_and_bad_data) {
  const auto records = sample_records();
  for (auto codec : all_codecs) {
    SCOPED_TRACE(codec_name(codec));
    auto batch = build_sample(codec, records);
    record_batch_view view(batch);
    std::vector<uint8_t> buffer;
    EXPECT_EQ(view.check_records(buffer, 1000), batch_status::decompressed_too_large);
    EXPECT_LE(buffer.capacity(), size_t{1001});

    // Damage the compressed bytes (and fix the CRC so that only decompression can notice): cut the data
    // short.
    auto cut = batch;
    cut.resize(cut.size() - 3);
    stamp_base_offset(cut, 100);
    const auto length = static_cast<int32_t>(cut.size() - batch_layout::log_overhead);
    for (int i = 0; i < 4; ++i)
      cut[batch_layout::batch_length + i] = static_cast<uint8_t>(length >> (24 - 8 * i));
    ASSERT_TRUE(rewrite_batch_crc(cut));
    record_batch_view cut_view(cut);
    ASSERT_TRUE(cut_view.ok());
    EXPECT_EQ(cut_view.check_records(buffer), batch_status::decompression_failed);
  }
}

TEST(compressed_batch, record_count_is_checked_against_the_header) {
  const auto records = sample_records();
  for (auto codec : all_codecs) {
    SCOPED_TRACE(codec_name(codec));
    for (uint8_t count : {3, 5}) {
      auto batch = build_sample(codec, records);
      batch[batch_layout::record_count + 3] = count;
      ASSERT_TRUE(rewrite_batch_crc(batch));
      record_batch_view view(batch);
      ASSERT_TRUE(view.ok());
      std::vector<uint8_t> buffer;
      EXPECT_EQ(view.check_records(buffer), batch_status::record_count_mismatch) << int{count};
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Batches from real producers.

std::vector<expected_record> expected_client_records(const test_vectors::client_batch& v) {
  const std::string client = v.client;
  const std::string codec = codec_name(v.codec);
  if (v.large) {
    std::string value;
    for (int i = 0; i < 20000; ++i) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "%05d,", i % 100);
      value += buf;
    }
    return {{"big", value, {}}};
  }
  if (client.starts_with("kcat")) {
    const std::vector<std::pair<std::string, std::string>> trace = {{"trace", "kcat-" + codec}};
    return {{"k1", "kcat " + codec + " one one one one one one one", trace},
            {"k2", "kcat " + codec + " two two two two two two two", trace},
            // kcat -K: sends an empty key, not a null one, for a line starting with the delimiter.
            {"", "kcat " + codec + " three, no key", trace}};
  }
  if (client.starts_with("confluent")) {
    return {{"k1", "confluent " + codec + " one one one one one one one", {{"trace", "ck-" + codec}}},
            {"k2", "confluent " + codec + " two two two two two two two", {}},
            {std::nullopt, "confluent " + codec + " three, no key", {}}};
  }
  const std::vector<std::pair<std::string, std::string>> trace = {{"trace", "java-" + codec}};
  return {{"k1", "java " + codec + " one one one one one one one", trace},
          {"k2", "java " + codec + " two two two two two two two", trace}};
}

TEST(client_batches, decode_batches_real_producers_sent) {
  for (const auto& v : test_vectors::client_batches) {
    SCOPED_TRACE(std::string(v.client) + " " + codec_name(v.codec) + (v.large ? " large" : ""));
    const auto batch = from_hex(v.hex);
    record_batch_view view(batch);
    ASSERT_TRUE(view.ok()) << batch_status_name(view.status());
    EXPECT_EQ(view.compression(), v.codec);
    std::vector<uint8_t> buffer;
    expect_records(view, buffer, expected_client_records(v));

    // Our own compression of the same records reads back the same way.
    const auto recompressed = compress(v.codec, buffer);
    auto again = decompress(v.codec, recompressed);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, buffer);
  }
}

TEST(client_batches, snappy_framing_differs_by_client) {
  for (const auto& v : test_vectors::client_batches) {
    if (v.codec != compression_codec::snappy) continue;
    const auto batch = from_hex(v.hex);
    const bool xerial = batch[batch_layout::records] == 0x82;
    EXPECT_EQ(xerial, std::string_view(v.client).starts_with("Apache Kafka")) << v.client;
  }
}

}  // namespace
}  // namespace mala::protocol
