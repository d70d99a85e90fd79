#include "mala/protocol/record_batch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/crc32c.h"
#include "mala/protocol/wire.h"

namespace mala::protocol {
namespace {

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string string_of(std::span<const uint8_t> s) {
  return {reinterpret_cast<const char*>(s.data()), s.size()};
}

// A batch with a mix of the edge cases: null key, null value, empty value, headers with null and empty
// values.
std::vector<uint8_t> sample_batch() {
  const record_header_input h1[] = {
      {"trace", bytes_of("abc")}, {"null-value", std::nullopt}, {"", bytes_of("")}};
  record_batch_builder b;
  b.base_offset(1000).partition_leader_epoch(7).producer(4242, 3, 17);
  b.add(1'700'000'000'000, bytes_of("k1"), bytes_of("v1"));
  b.add(1'700'000'000'005, std::nullopt, bytes_of("value-without-key"), h1);
  b.add(1'699'999'999'990, bytes_of("tombstone"), std::nullopt);
  b.add(1'700'000'000'002, bytes_of(""), bytes_of(""));
  return b.build();
}

// Replaces the records of `batch` with raw bytes and a declared count, fixing batchLength and the CRC, so
// that record-level checks are reached.
std::vector<uint8_t> with_raw_records(std::vector<uint8_t> batch, const std::vector<uint8_t>& records,
                                      int32_t count) {
  batch.resize(batch_layout::header_size);
  batch.insert(batch.end(), records.begin(), records.end());
  std::vector<uint8_t> be;
  wire_writer w(be);
  w.write_int32(static_cast<int32_t>(batch.size() - batch_layout::log_overhead));
  w.write_int32(count);
  std::copy(be.begin(), be.begin() + 4, batch.begin() + batch_layout::batch_length);
  std::copy(be.begin() + 4, be.end(), batch.begin() + batch_layout::record_count);
  EXPECT_TRUE(rewrite_batch_crc(batch));
  return batch;
}

batch_status read_all(std::span<const uint8_t> batch) {
  record_batch_view view(batch);
  if (!view.ok()) return view.status();
  return view.check_records();
}

TEST(record_batch, header_round_trip) {
  auto batch = sample_batch();
  ASSERT_EQ(validate_batch(batch), batch_status::ok);
  auto h = parse_batch_header(batch);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->base_offset, 1000);
  EXPECT_EQ(h->size_in_bytes(), static_cast<int64_t>(batch.size()));
  EXPECT_EQ(h->partition_leader_epoch, 7);
  EXPECT_EQ(h->magic, 2);
  EXPECT_EQ(h->crc, crc32c(std::span<const uint8_t>(batch).subspan(21)));
  EXPECT_EQ(h->attributes, 0);
  EXPECT_EQ(h->last_offset_delta, 3);
  EXPECT_EQ(h->base_timestamp, 1'700'000'000'000);
  EXPECT_EQ(h->max_timestamp, 1'700'000'000'005);
  EXPECT_EQ(h->producer_id, 4242);
  EXPECT_EQ(h->producer_epoch, 3);
  EXPECT_EQ(h->base_sequence, 17);
  EXPECT_EQ(h->record_count, 4);
  EXPECT_EQ(h->last_offset(), 1003);
  EXPECT_EQ(h->next_offset(), 1004);
  EXPECT_EQ(h->compression(), compression_codec::none);
  EXPECT_FALSE(h->is_transactional());
  EXPECT_FALSE(h->is_control());
  EXPECT_EQ(h->timestamp_kind(), timestamp_type::create_time);
  EXPECT_FALSE(parse_batch_header(std::span<const uint8_t>(batch).first(60)));
}

TEST(record_batch, records_round_trip) {
  auto batch = sample_batch();
  record_batch_view view(batch);
  ASSERT_TRUE(view.ok());
  std::vector<record_view> records;
  auto reader = view.records();
  for (const auto& r : reader) records.push_back(r);
  ASSERT_EQ(reader.status(), batch_status::ok);
  ASSERT_EQ(records.size(), 4u);

  EXPECT_EQ(string_of(*records[0].key), "k1");
  EXPECT_EQ(string_of(*records[0].value), "v1");
  EXPECT_TRUE(records[0].headers.empty());
  EXPECT_EQ(view.offset_of(records[0]), 1000);
  EXPECT_EQ(view.timestamp_of(records[0]), 1'700'000'000'000);

  EXPECT_FALSE(records[1].key.has_value());
  EXPECT_EQ(string_of(*records[1].value), "value-without-key");
  EXPECT_EQ(view.timestamp_of(records[1]), 1'700'000'000'005);
  ASSERT_EQ(records[1].headers.size(), 3);
  std::vector<record_header_view> headers(records[1].headers.begin(), records[1].headers.end());
  ASSERT_EQ(headers.size(), 3u);
  EXPECT_EQ(headers[0].key, "trace");
  EXPECT_EQ(string_of(*headers[0].value), "abc");
  EXPECT_EQ(headers[1].key, "null-value");
  EXPECT_FALSE(headers[1].value.has_value());
  EXPECT_EQ(headers[2].key, "");
  ASSERT_TRUE(headers[2].value.has_value());
  EXPECT_TRUE(headers[2].value->empty());

  EXPECT_EQ(string_of(*records[2].key), "tombstone");
  EXPECT_FALSE(records[2].value.has_value());
  EXPECT_EQ(records[2].timestamp_delta, -10);  // timestamps need not be monotonic

  ASSERT_TRUE(records[3].key.has_value());
  EXPECT_TRUE(records[3].key->empty());
  ASSERT_TRUE(records[3].value.has_value());
  EXPECT_TRUE(records[3].value->empty());
  EXPECT_EQ(view.offset_of(records[3]), 1003);

  // The encoded records tile the records region exactly.
  size_t total = 0;
  for (const auto& r : records) total += r.encoded.size();
  EXPECT_EQ(total, view.records_bytes().size());
}

TEST(record_batch, empty_batch) {
  auto batch = record_batch_builder().base_offset(5).build();
  EXPECT_EQ(batch.size(), batch_layout::header_size);
  record_batch_view view(batch);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view.record_count(), 0);
  EXPECT_EQ(view.header().max_timestamp, no_timestamp);
  EXPECT_EQ(view.check_records(), batch_status::ok);
}

TEST(record_batch, flags_and_producer_fields) {
  auto batch = record_batch_builder()
                   .producer(99, 1, 0)
                   .transactional()
                   .control()
                   .add(10, bytes_of("\0\0\0\0"), bytes_of("\0\0\0\0\0\0"))
                   .build();
  record_batch_view view(batch);
  ASSERT_TRUE(view.ok());
  EXPECT_TRUE(view.is_transactional());
  EXPECT_TRUE(view.is_control());
  EXPECT_EQ(view.header().attributes, batch_attributes::transactional | batch_attributes::control);
  EXPECT_EQ(view.header().producer_id, 99);
  EXPECT_EQ(view.check_records(), batch_status::ok);
}

TEST(record_batch, explicit_offset_deltas_and_timestamps) {
  record_input a;
  a.timestamp = 50;
  a.value = bytes_of("a");
  a.offset_delta = 0;
  record_input c = a;
  c.offset_delta = 2;  // as after compaction removed offset 1
  auto batch =
      record_batch_builder().base_timestamp(40).max_timestamp(60).last_offset_delta(5).add(a).add(c).build();
  record_batch_view view(batch);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view.header().base_timestamp, 40);
  EXPECT_EQ(view.header().max_timestamp, 60);
  EXPECT_EQ(view.last_offset(), 5);
  auto reader = view.records();
  auto r0 = reader.next();
  auto r1 = reader.next();
  ASSERT_TRUE(r0 && r1);
  EXPECT_EQ(r0->timestamp_delta, 10);
  EXPECT_EQ(r1->offset_delta, 2);
  EXPECT_FALSE(reader.next());
  EXPECT_TRUE(reader.ok());
}

TEST(record_batch, large_values_and_many_headers) {
  std::vector<uint8_t> big(200'000, 0x5a);
  std::vector<std::string> keys;
  std::vector<record_header_input> headers;
  for (int i = 0; i < 300; ++i) keys.push_back("h" + std::to_string(i));
  for (const auto& k : keys) headers.push_back({k, bytes_of(k)});
  record_batch_builder b;
  for (int i = 0; i < 50; ++i) b.add(i, bytes_of(keys[static_cast<size_t>(i)]), big, headers);
  auto batch = b.build();
  record_batch_view view(batch);
  ASSERT_TRUE(view.ok());
  int n = 0;
  auto reader = view.records();
  for (const auto& r : reader) {
    EXPECT_EQ(r.value->size(), big.size());
    EXPECT_EQ(r.headers.size(), 300);
    int h = 0;
    for (const auto& hdr : r.headers) {
      EXPECT_EQ(hdr.key, keys[static_cast<size_t>(h)]);
      EXPECT_EQ(string_of(*hdr.value), keys[static_cast<size_t>(h)]);
      ++h;
    }
    EXPECT_EQ(h, 300);
    ++n;
  }
  EXPECT_TRUE(reader.ok());
  EXPECT_EQ(n, 50);
}

TEST(record_batch, crc_covers_attributes_to_end) {
  const auto original = sample_batch();
  for (size_t i = 0; i < original.size(); ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}}) {
      auto batch = original;
      batch[i] ^= flip;
      const auto status = validate_batch(batch);
      if (i >= batch_layout::crc) {
        EXPECT_EQ(status, batch_status::crc_mismatch) << "byte " << i;
        EXPECT_NE(validate_batch(batch, crc_check::skip), batch_status::crc_mismatch);
      } else if (i == batch_layout::magic) {
        EXPECT_EQ(status, batch_status::bad_magic);
      } else if (i >= batch_layout::batch_length && i < batch_layout::partition_leader_epoch) {
        EXPECT_TRUE(status == batch_status::length_mismatch || status == batch_status::too_short)
            << "byte " << i;
      } else {
        EXPECT_EQ(status, batch_status::ok) << "byte " << i << " is not CRC-covered";
      }
    }
  }
}

TEST(record_batch, truncated_at_every_length) {
  const auto batch = sample_batch();
  for (size_t n = 0; n < batch.size(); ++n) {
    std::vector<uint8_t> prefix(batch.begin(), batch.begin() + static_cast<ptrdiff_t>(n));
    const auto status = validate_batch(prefix);
    EXPECT_TRUE(status == batch_status::too_short || status == batch_status::length_mismatch)
        << n << ": " << batch_status_name(status);
    record_batch_view view(prefix);
    EXPECT_FALSE(view.ok());
    EXPECT_FALSE(view.records().next());

    batch_splitter splitter(prefix);
    EXPECT_FALSE(splitter.next());
    EXPECT_EQ(splitter.status(), n == 0 ? batch_status::ok : batch_status::partial_batch) << n;
  }
  EXPECT_EQ(validate_batch(batch), batch_status::ok);
}

TEST(record_batch, trailing_byte_is_length_mismatch) {
  auto batch = sample_batch();
  batch.push_back(0);
  EXPECT_EQ(validate_batch(batch), batch_status::length_mismatch);
}

TEST(record_batch, bad_magic) {
  auto batch = sample_batch();
  batch[batch_layout::magic] = 1;
  EXPECT_EQ(validate_batch(batch), batch_status::bad_magic);
  batch[batch_layout::magic] = 3;
  EXPECT_EQ(validate_batch(batch), batch_status::bad_magic);
}

TEST(record_batch, batch_length_smaller_than_header) {
  auto batch = record_batch_builder().build();
  batch[batch_layout::batch_length + 3] = 48;
  EXPECT_EQ(validate_batch(batch), batch_status::too_short);
  batch[batch_layout::batch_length] = 0x80;  // negative
  EXPECT_EQ(validate_batch(batch), batch_status::too_short);
}

TEST(record_batch, negative_and_huge_counts) {
  const auto base = sample_batch();
  std::vector<uint8_t> records(base.begin() + batch_layout::header_size, base.end());
  EXPECT_EQ(read_all(with_raw_records(base, records, 4)), batch_status::ok);
  EXPECT_EQ(read_all(with_raw_records(base, records, -1)), batch_status::negative_record_count);
  EXPECT_EQ(read_all(with_raw_records(base, records, INT32_MIN)), batch_status::negative_record_count);
  EXPECT_EQ(read_all(with_raw_records(base, records, INT32_MAX)), batch_status::record_count_mismatch);
  EXPECT_EQ(validate_batch(with_raw_records(base, records, INT32_MAX)), batch_status::record_count_mismatch);
  // Fewer declared than present: bytes left over.
  EXPECT_EQ(read_all(with_raw_records(base, records, 3)), batch_status::record_count_mismatch);
  EXPECT_EQ(read_all(with_raw_records(base, records, 0)), batch_status::record_count_mismatch);
  // More declared than present (but plausible for the size): the reader runs out of records.
  EXPECT_EQ(read_all(with_raw_records(base, records, 5)), batch_status::record_count_mismatch);
}

// Encodes a record from raw fields so individual fields can be made invalid.
struct raw_record {
  std::vector<uint8_t> body;
  raw_record& i8(int8_t v) {
    wire_writer(body).write_int8(v);
    return *this;
  }
  raw_record& varint(int32_t v) {
    wire_writer(body).write_varint(v);
    return *this;
  }
  raw_record& varlong(int64_t v) {
    wire_writer(body).write_varlong(v);
    return *this;
  }
  raw_record& raw(std::vector<uint8_t> b) {
    body.insert(body.end(), b.begin(), b.end());
    return *this;
  }
  raw_record& str(std::string_view s) {
    varint(static_cast<int32_t>(s.size()));
    body.insert(body.end(), s.begin(), s.end());
    return *this;
  }
  // Length-prefixed record; `length_adjust` lies about the length.
  std::vector<uint8_t> encode(int32_t length_adjust = 0) const {
    std::vector<uint8_t> out;
    wire_writer(out).write_varint(static_cast<int32_t>(body.size()) + length_adjust);
    out.insert(out.end(), body.begin(), body.end());
    return out;
  }
};

raw_record valid_prefix() {
  return raw_record().i8(0).varlong(0).varint(0);
}

batch_status read_one(const std::vector<uint8_t>& record) {
  return read_all(with_raw_records(record_batch_builder().build(), record, 1));
}

TEST(record_batch, raw_record_encoder_matches_builder) {
  const record_header_input hs[] = {{"h", std::nullopt}};
  auto built = record_batch_builder().add(0, bytes_of("k"), std::nullopt, hs).build();
  auto raw = valid_prefix().str("k").varint(-1).varint(1).str("h").varint(-1).encode();
  auto rebuilt = with_raw_records(built, raw, 1);
  EXPECT_EQ(rebuilt, built);
  EXPECT_EQ(read_one(raw), batch_status::ok);
}

TEST(record_batch, malformed_records) {
  // Lengths.
  EXPECT_EQ(read_one(valid_prefix().varint(-1).varint(-1).varint(0).encode(1)),
            batch_status::malformed_record);
  EXPECT_EQ(read_one(valid_prefix().varint(-1).varint(-1).varint(0).raw({0}).encode()),
            batch_status::malformed_record);  // body longer than its fields
  EXPECT_EQ(read_one(valid_prefix().varint(-1).varint(-1).varint(0).encode(-1)),
            batch_status::malformed_record);
  EXPECT_EQ(read_one(raw_record().raw({0, 0, 0, 0, 0, 0, 0}).encode(-100)), batch_status::malformed_record);
  // Key and value lengths.
  EXPECT_EQ(read_one(valid_prefix().varint(-2).varint(-1).varint(0).encode()),
            batch_status::malformed_record);
  EXPECT_EQ(read_one(valid_prefix().varint(50).varint(-1).varint(0).encode()),
            batch_status::malformed_record);
  EXPECT_EQ(read_one(valid_prefix().varint(-1).varint(INT32_MAX).varint(0).encode()),
            batch_status::malformed_record);
  EXPECT_EQ(read_one(valid_prefix().varint(-1).varint(INT32_MIN).varint(0).encode()),
            batch_status::malformed_record);
  // Header counts and header fields.
  EXPECT_EQ(read_one(valid_prefix().varint(-1).varint(-1).varint(-1).encode()),
            batch_status::malformed_record);
  EXPECT_EQ(read_one(valid_prefix().varint(-1).varint(-1).varint(INT32_MAX).encode()),
            batch_status::malformed_record);
  EXPECT_EQ(read_one(valid_prefix().varint(-1).varint(-1).varint(2).str("a").varint(-1).encode()),
            batch_status::malformed_record);  // second header missing
  EXPECT_EQ(read_one(valid_prefix().varint(-1).varint(-1).varint(1).varint(-1).varint(-1).encode()),
            batch_status::malformed_record);  // null header key
  EXPECT_EQ(read_one(valid_prefix().varint(-1).varint(-1).varint(1).varint(9).raw({'a'}).varint(-1).encode()),
            batch_status::malformed_record);
  EXPECT_EQ(read_one(valid_prefix().varint(-1).varint(-1).varint(1).str("a").varint(-3).encode()),
            batch_status::malformed_record);
  EXPECT_EQ(read_one(valid_prefix().varint(-1).varint(-1).varint(1).str("a").varint(5).raw({1}).encode()),
            batch_status::malformed_record);
}

TEST(record_batch, malformed_varints) {
  // Record length: a varint longer than five bytes, and one cut off by the end of the batch.
  EXPECT_EQ(read_one({0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0, 0, 0, 0, 0}), batch_status::malformed_record);
  EXPECT_EQ(read_one({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}), batch_status::malformed_record);
  EXPECT_EQ(read_one({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}),
            batch_status::malformed_record);
  // timestampDelta: an eleven-byte varlong.
  EXPECT_EQ(read_one(raw_record()
                         .i8(0)
                         .raw({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
                         .varint(0)
                         .varint(-1)
                         .varint(-1)
                         .varint(0)
                         .encode()),
            batch_status::malformed_record);
  // offsetDelta: six bytes.
  EXPECT_EQ(read_one(raw_record()
                         .i8(0)
                         .varlong(0)
                         .raw({0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
                         .varint(-1)
                         .varint(-1)
                         .varint(0)
                         .encode()),
            batch_status::malformed_record);
  // Header count varint cut off at the end of the record body.
  EXPECT_EQ(read_one(valid_prefix().varint(-1).varint(-1).raw({0x80}).encode()),
            batch_status::malformed_record);
}

TEST(record_batch, compressed_batches_need_decompression) {
  auto batch = sample_batch();
  for (uint8_t codec = 1; codec <= 4; ++codec) {
    batch[batch_layout::attributes + 1] = codec;
    ASSERT_TRUE(rewrite_batch_crc(batch));
    record_batch_view view(batch);
    ASSERT_TRUE(view.ok());
    EXPECT_TRUE(view.is_compressed());
    EXPECT_EQ(view.compression(), static_cast<compression_codec>(codec));
    auto reader = view.records();
    EXPECT_FALSE(reader.next());
    EXPECT_EQ(reader.status(), batch_status::compressed);
    EXPECT_EQ(view.check_records(), batch_status::compressed);
  }
  // A compressed batch may declare more records than its bytes could hold uncompressed.
  batch[batch_layout::attributes + 1] = 4;
  batch[batch_layout::record_count] = 0x01;
  ASSERT_TRUE(rewrite_batch_crc(batch));
  EXPECT_EQ(validate_batch(batch), batch_status::ok);
  for (uint8_t codec = 5; codec <= 7; ++codec) {
    batch[batch_layout::attributes + 1] = codec;
    ASSERT_TRUE(rewrite_batch_crc(batch));
    EXPECT_EQ(validate_batch(batch), batch_status::unknown_compression);
  }
}

TEST(record_batch, stamping_keeps_crc_valid) {
  auto batch = sample_batch();
  const uint32_t crc_before = parse_batch_header(batch)->crc;
  ASSERT_TRUE(stamp_base_offset(batch, 0x0123456789abcdefLL));
  ASSERT_TRUE(stamp_partition_leader_epoch(batch, 123456));
  EXPECT_EQ(validate_batch(batch), batch_status::ok);
  record_batch_view view(batch);
  EXPECT_EQ(view.header().crc, crc_before);
  EXPECT_EQ(view.base_offset(), 0x0123456789abcdefLL);
  EXPECT_EQ(view.header().partition_leader_epoch, 123456);
  auto reader = view.records();
  auto first = reader.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(view.offset_of(*first), 0x0123456789abcdefLL);

  std::vector<uint8_t> tiny(60);
  EXPECT_FALSE(stamp_base_offset(tiny, 1));
  EXPECT_FALSE(stamp_partition_leader_epoch(tiny, 1));
  EXPECT_FALSE(stamp_log_append_time(tiny, 1));
}

TEST(record_batch, log_append_time_stamp) {
  auto batch = sample_batch();
  ASSERT_TRUE(stamp_log_append_time(batch, 1'800'000'000'000));
  record_batch_view view(batch);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view.timestamp_kind(), timestamp_type::log_append_time);
  EXPECT_EQ(view.header().max_timestamp, 1'800'000'000'000);
  auto reader = view.records();
  for (const auto& r : reader) EXPECT_EQ(view.timestamp_of(r), 1'800'000'000'000);
  EXPECT_TRUE(reader.ok());
}

TEST(record_batch, splitter_walks_concatenated_batches) {
  auto a = sample_batch();
  auto b = record_batch_builder().base_offset(4).add(1, std::nullopt, bytes_of("x")).build();
  auto c = record_batch_builder().build();
  std::vector<uint8_t> all;
  for (const auto* part : {&a, &b, &c}) all.insert(all.end(), part->begin(), part->end());

  batch_splitter splitter(all);
  std::vector<std::span<const uint8_t>> spans;
  while (auto s = splitter.next()) spans.push_back(*s);
  ASSERT_TRUE(splitter.ok());
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_TRUE(std::equal(spans[0].begin(), spans[0].end(), a.begin(), a.end()));
  EXPECT_TRUE(std::equal(spans[1].begin(), spans[1].end(), b.begin(), b.end()));
  EXPECT_TRUE(std::equal(spans[2].begin(), spans[2].end(), c.begin(), c.end()));
  for (auto s : spans) EXPECT_EQ(validate_batch(s), batch_status::ok);
  EXPECT_EQ(splitter.position(), all.size());

  // Every cut inside the last two batches yields the whole batches before it and then partial_batch.
  for (size_t cut = a.size() + 1; cut < all.size(); ++cut) {
    batch_splitter partial(std::span<const uint8_t>(all).first(cut));
    size_t whole = 0;
    while (partial.next()) ++whole;
    const bool on_boundary = cut == a.size() + b.size();
    EXPECT_EQ(partial.status(), on_boundary ? batch_status::ok : batch_status::partial_batch) << cut;
    EXPECT_EQ(whole, cut < a.size() + b.size() ? 1u : 2u) << cut;
  }

  batch_splitter empty(std::span<const uint8_t>{});
  EXPECT_FALSE(empty.next());
  EXPECT_TRUE(empty.ok());

  auto bad = all;
  bad[a.size() + batch_layout::batch_length + 3] = 10;
  bad[a.size() + batch_layout::batch_length + 2] = 0;
  batch_splitter corrupt(bad);
  EXPECT_TRUE(corrupt.next());
  EXPECT_FALSE(corrupt.next());
  EXPECT_EQ(corrupt.status(), batch_status::too_short);
}

// Random corruption of the records region (with the CRC fixed up so the record reader is reached) must end in
// ok or an error, never an out-of-bounds read (run under ASan/UBSan in the sanitizer build).
TEST(record_batch, random_record_corruption_is_bounded) {
  const auto original = sample_batch();
  std::mt19937 rng(7);
  int failures = 0;
  for (int i = 0; i < 20000; ++i) {
    auto batch = original;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      size_t pos = batch_layout::record_count + rng() % (batch.size() - batch_layout::record_count);
      batch[pos] = static_cast<uint8_t>(rng());
    }
    ASSERT_TRUE(rewrite_batch_crc(batch));
    record_batch_view view(batch);
    if (!view.ok()) {
      ++failures;
      continue;
    }
    auto reader = view.records();
    int n = 0;
    for (const auto& r : reader) {
      for (const auto& h : r.headers) (void)h;
      ++n;
    }
    EXPECT_LE(n, view.record_count());
    if (!reader.ok()) ++failures;
  }
  EXPECT_GT(failures, 0);
}

// scan_records (the leader's one-pass check) accepts and refuses exactly what record_reader does, and agrees
// with it on offset deltas, timestamps and null keys, over the same random corruptions.
TEST(record_batch, scan_agrees_with_the_record_reader) {
  const auto original = sample_batch();
  std::mt19937 rng(11);
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    auto batch = original;
    if (i > 0) {
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        size_t pos = batch_layout::header_size + rng() % (batch.size() - batch_layout::header_size);
        batch[pos] = static_cast<uint8_t>(rng());
      }
    }
    record_batch_view view(batch, crc_check::skip);
    ASSERT_TRUE(view.ok());
    auto reader = view.records();
    int32_t n = 0;
    bool consecutive = true;
    bool null_key = false;
    int64_t min_ts = 0;
    int64_t max_ts = 0;
    int32_t index_of_max = 0;
    for (const auto& r : reader) {
      if (r.offset_delta != n) consecutive = false;
      const int64_t ts = view.timestamp_of(r);
      if (n == 0 || ts > max_ts) {
        max_ts = ts;
        index_of_max = n;
      }
      if (n == 0 || ts < min_ts) min_ts = ts;
      null_key = null_key || !r.key;
      ++n;
    }
    const auto scan = scan_records(view.records_bytes(), view.record_count(), view.header().base_timestamp);
    ASSERT_EQ(scan.status, reader.status()) << i;
    if (!reader.ok()) {
      ++refused;
      continue;
    }
    EXPECT_EQ(scan.records, n) << i;
    EXPECT_EQ(scan.consecutive_offset_deltas, consecutive) << i;
    EXPECT_EQ(scan.null_key, null_key) << i;
    EXPECT_EQ(scan.min_timestamp, min_ts) << i;
    EXPECT_EQ(scan.max_timestamp, max_ts) << i;
    EXPECT_EQ(scan.offset_delta_of_max_timestamp, index_of_max) << i;
  }
  EXPECT_GT(refused, 1000);
  EXPECT_LT(refused, 20000);
}

TEST(record_batch, status_names) {
  EXPECT_EQ(batch_status_name(batch_status::ok), "ok");
  EXPECT_EQ(batch_status_name(batch_status::crc_mismatch), "CRC-32C mismatch");
}

}  // namespace
}  // namespace mala::protocol
