#include "mala/protocol/record_batch.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "mala/common/crc32c.h"
#include "mala/protocol/compression.h"
#include "mala/protocol/wire.h"

namespace mala::protocol {

namespace {

template <typename T>
T load_be(std::span<const uint8_t> data, size_t offset) {
  using unsigned_type = std::make_unsigned_t<T>;
  unsigned_type v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v = static_cast<unsigned_type>((v << 8) | data[offset + i]);
  return static_cast<T>(v);
}

template <typename T>
void store_be(std::span<uint8_t> data, size_t offset, T value) {
  auto v = static_cast<std::make_unsigned_t<T>>(value);
  for (size_t i = sizeof(T); i > 0; --i) {
    data[offset + i - 1] = static_cast<uint8_t>(v & 0xffu);
    v = static_cast<std::make_unsigned_t<T>>(v >> 8);
  }
}

constexpr int32_t min_batch_length =
    static_cast<int32_t>(batch_layout::header_size - batch_layout::log_overhead);
// The highest codec id Kafka defines (zstd, KIP-110).
constexpr uint8_t max_codec_id = static_cast<uint8_t>(compression_codec::zstd);
// Smallest record body: attributes, timestampDelta, offsetDelta, key length, value length, header count.
constexpr int32_t min_record_body = 6;
// Smallest header: key length and value length.
constexpr size_t min_header_size = 2;

// Reads a varint length that may be -1 (null) and must fit in what is left; nullopt for null. Fails the
// reader on anything else.
std::optional<std::span<const uint8_t>> read_nullable_span(wire_reader& r) {
  int32_t len = r.read_varint();
  if (!r.ok()) return std::nullopt;
  if (len < -1 || (len >= 0 && static_cast<size_t>(len) > r.remaining())) {
    r.fail(decode_status::invalid_length);
    return std::nullopt;
  }
  if (len == -1) return std::nullopt;
  return r.read_span(static_cast<size_t>(len));
}

}  // namespace

std::optional<record_batch_header> parse_batch_header(std::span<const uint8_t> data) {
  if (data.size() < batch_layout::header_size) return std::nullopt;
  record_batch_header h;
  h.base_offset = load_be<int64_t>(data, batch_layout::base_offset);
  h.batch_length = load_be<int32_t>(data, batch_layout::batch_length);
  h.partition_leader_epoch = load_be<int32_t>(data, batch_layout::partition_leader_epoch);
  h.magic = load_be<int8_t>(data, batch_layout::magic);
  h.crc = load_be<uint32_t>(data, batch_layout::crc);
  h.attributes = load_be<int16_t>(data, batch_layout::attributes);
  h.last_offset_delta = load_be<int32_t>(data, batch_layout::last_offset_delta);
  h.base_timestamp = load_be<int64_t>(data, batch_layout::base_timestamp);
  h.max_timestamp = load_be<int64_t>(data, batch_layout::max_timestamp);
  h.producer_id = load_be<int64_t>(data, batch_layout::producer_id);
  h.producer_epoch = load_be<int16_t>(data, batch_layout::producer_epoch);
  h.base_sequence = load_be<int32_t>(data, batch_layout::base_sequence);
  h.record_count = load_be<int32_t>(data, batch_layout::record_count);
  return h;
}

std::string_view batch_status_name(batch_status status) {
  switch (status) {
    case batch_status::ok:
      return "ok";
    case batch_status::too_short:
      return "batch too short";
    case batch_status::length_mismatch:
      return "batch length does not match the bytes available";
    case batch_status::partial_batch:
      return "partial trailing batch";
    case batch_status::bad_magic:
      return "unsupported magic (message format v2 expected)";
    case batch_status::crc_mismatch:
      return "CRC-32C mismatch";
    case batch_status::negative_record_count:
      return "negative record count";
    case batch_status::unknown_compression:
      return "unknown compression codec";
    case batch_status::compressed:
      return "records are compressed";
    case batch_status::malformed_record:
      return "malformed record";
    case batch_status::record_count_mismatch:
      return "record count does not match the records";
    case batch_status::decompression_failed:
      return "compressed records do not decompress";
    case batch_status::decompressed_too_large:
      return "decompressed records exceed the bound";
  }
  return "unknown";
}

uint32_t compute_batch_crc(std::span<const uint8_t> batch) {
  if (batch.size() < batch_layout::header_size) return 0;
  return crc32c(batch.subspan(batch_layout::attributes));
}

batch_status validate_batch(std::span<const uint8_t> batch, crc_check crc) {
  if (batch.size() < batch_layout::header_size) return batch_status::too_short;
  const int32_t length = load_be<int32_t>(batch, batch_layout::batch_length);
  if (length < min_batch_length) return batch_status::too_short;
  if (static_cast<uint64_t>(length) + batch_layout::log_overhead != batch.size()) {
    return batch_status::length_mismatch;
  }
  if (load_be<int8_t>(batch, batch_layout::magic) != current_magic) return batch_status::bad_magic;
  if (crc == crc_check::verify && compute_batch_crc(batch) != load_be<uint32_t>(batch, batch_layout::crc)) {
    return batch_status::crc_mismatch;
  }
  const int32_t count = load_be<int32_t>(batch, batch_layout::record_count);
  if (count < 0) return batch_status::negative_record_count;
  const auto codec = static_cast<uint8_t>(load_be<int16_t>(batch, batch_layout::attributes) &
                                          batch_attributes::compression_mask);
  if (codec > max_codec_id) return batch_status::unknown_compression;
  if (codec == 0 && static_cast<uint64_t>(count) >
                        (batch.size() - batch_layout::header_size) / batch_layout::min_record_size) {
    return batch_status::record_count_mismatch;
  }
  return batch_status::ok;
}

// ---------------------------------------------------------------------------------------------------------------
// Headers and records.

record_header_range::iterator::iterator(std::span<const uint8_t> data, int32_t count)
    : _data(data), _remaining(count) {
  if (_remaining > 0) load();
}

void record_header_range::iterator::load() {
  // The record reader validated these bytes, so the reads below cannot fail.
  wire_reader r(_data.subspan(_pos));
  auto key = r.read_span(static_cast<size_t>(r.read_varint()));
  _current.key = std::string_view(reinterpret_cast<const char*>(key.data()), key.size());
  _current.value = read_nullable_span(r);
  _pos += r.position();
}

record_header_range::iterator& record_header_range::iterator::operator++() {
  if (--_remaining > 0) load();
  return *this;
}

record_reader::record_reader(std::span<const uint8_t> records, int32_t count, batch_status initial)
    : _data(records), _remaining(count), _status(initial) {
  if (_status != batch_status::ok) {
    _remaining = 0;
  } else if (count < 0) {
    _status = batch_status::negative_record_count;
    _remaining = 0;
  } else if (static_cast<uint64_t>(count) > records.size() / batch_layout::min_record_size) {
    _status = batch_status::record_count_mismatch;
    _remaining = 0;
  }
}

std::optional<record_view> record_reader::next() {
  if (_status != batch_status::ok) return std::nullopt;
  if (_remaining == 0) {
    // Kafka: "Incorrect declared batch size, records still remaining in file".
    if (_pos != _data.size()) _status = batch_status::record_count_mismatch;
    return std::nullopt;
  }
  auto fail = [this](batch_status status) -> std::optional<record_view> {
    _status = status;
    _remaining = 0;
    return std::nullopt;
  };
  // Kafka: "Incorrect declared batch size, premature EOF reached".
  if (_pos == _data.size()) return fail(batch_status::record_count_mismatch);

  wire_reader outer(_data.subspan(_pos));
  const int32_t length = outer.read_varint();
  if (!outer.ok() || length < min_record_body || static_cast<size_t>(length) > outer.remaining()) {
    return fail(batch_status::malformed_record);
  }
  const size_t prefix = outer.position();
  wire_reader r(outer.read_span(static_cast<size_t>(length)));

  record_view rec;
  rec.attributes = r.read_int8();
  rec.timestamp_delta = r.read_varlong();
  rec.offset_delta = r.read_varint();
  rec.key = read_nullable_span(r);
  rec.value = read_nullable_span(r);
  const int32_t header_count = r.read_varint();
  if (!r.ok() || header_count < 0 || static_cast<size_t>(header_count) > r.remaining() / min_header_size) {
    return fail(batch_status::malformed_record);
  }
  const size_t headers_start = r.position();
  for (int32_t i = 0; i < header_count; ++i) {
    // Kafka rejects a null header key ("Invalid null header key found in headers").
    const int32_t key_length = r.read_varint();
    if (!r.ok() || key_length < 0 || static_cast<size_t>(key_length) > r.remaining()) {
      return fail(batch_status::malformed_record);
    }
    r.skip(static_cast<size_t>(key_length));
    read_nullable_span(r);
    if (!r.ok()) return fail(batch_status::malformed_record);
  }
  // The body must be exactly `length` bytes (Kafka: "Invalid record size: expected to read N bytes").
  if (!r.ok() || r.remaining() != 0) return fail(batch_status::malformed_record);

  const auto body = _data.subspan(_pos + prefix, static_cast<size_t>(length));
  rec.headers = record_header_range(body.subspan(headers_start), header_count);
  rec.encoded = _data.subspan(_pos, prefix + static_cast<size_t>(length));
  _pos += prefix + static_cast<size_t>(length);
  --_remaining;
  return rec;
}

namespace {

// Varints as wire_reader reads them (same limits: 5 bytes for 32 bits, 10 for 64), inlined for the scan.
// Return false on a truncated or overlong varint.
inline bool scan_uvarint(const uint8_t*& p, const uint8_t* end, uint32_t& out) {
  if (p < end && (*p & 0x80) == 0) {
    out = *p++;
    return true;
  }
  uint32_t value = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (p == end) return false;
    const uint8_t b = *p++;
    if (shift == 28 && (b & 0xf0) != 0) return false;
    value |= static_cast<uint32_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      out = value;
      return true;
    }
  }
  return false;
}
inline bool scan_varint(const uint8_t*& p, const uint8_t* end, int32_t& out) {
  uint32_t raw = 0;
  if (!scan_uvarint(p, end, raw)) return false;
  out = static_cast<int32_t>((raw >> 1) ^ (~(raw & 1) + 1));
  return true;
}
inline bool scan_varlong(const uint8_t*& p, const uint8_t* end, int64_t& out) {
  uint64_t value = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (p == end) return false;
    const uint8_t b = *p++;
    if (shift == 63 && (b & 0xfe) != 0) return false;
    value |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      out = static_cast<int64_t>((value >> 1) ^ (~(value & 1) + 1));
      return true;
    }
  }
  return false;
}
// A nullable length-prefixed field: -1 is null, otherwise it must fit; skips it.
inline bool scan_nullable(const uint8_t*& p, const uint8_t* end, bool& null) {
  int32_t len = 0;
  if (!scan_varint(p, end, len) || len < -1) return false;
  null = len == -1;
  if (len > 0) {
    if (static_cast<size_t>(len) > static_cast<size_t>(end - p)) return false;
    p += len;
  }
  return true;
}

}  // namespace

record_scan scan_records(std::span<const uint8_t> records, int32_t count, int64_t base_timestamp) {
  record_scan out;
  if (count < 0) {
    out.status = batch_status::negative_record_count;
    return out;
  }
  if (static_cast<uint64_t>(count) > records.size() / batch_layout::min_record_size) {
    out.status = batch_status::record_count_mismatch;
    return out;
  }
  const uint8_t* p = records.data();
  const uint8_t* const end = p + records.size();
  for (int32_t i = 0; i < count; ++i) {
    if (p == end) {
      out.status = batch_status::record_count_mismatch;
      return out;
    }
    int32_t length = 0;
    if (!scan_varint(p, end, length) || length < min_record_body ||
        static_cast<size_t>(length) > static_cast<size_t>(end - p)) {
      out.status = batch_status::malformed_record;
      return out;
    }
    const uint8_t* const body_end = p + length;
    ++p;  // attributes
    int64_t ts_delta = 0;
    int32_t offset_delta = 0;
    int32_t header_count = 0;
    bool key_null = false;
    bool value_null = false;
    if (!scan_varlong(p, body_end, ts_delta) || !scan_varint(p, body_end, offset_delta) ||
        !scan_nullable(p, body_end, key_null) || !scan_nullable(p, body_end, value_null) ||
        !scan_varint(p, body_end, header_count) || header_count < 0 ||
        static_cast<size_t>(header_count) > static_cast<size_t>(body_end - p) / min_header_size) {
      out.status = batch_status::malformed_record;
      return out;
    }
    for (int32_t h = 0; h < header_count; ++h) {
      int32_t key_length = 0;
      bool header_value_null = false;
      if (!scan_varint(p, body_end, key_length) || key_length < 0 ||
          static_cast<size_t>(key_length) > static_cast<size_t>(body_end - p)) {
        out.status = batch_status::malformed_record;
        return out;
      }
      p += key_length;
      if (!scan_nullable(p, body_end, header_value_null)) {
        out.status = batch_status::malformed_record;
        return out;
      }
    }
    if (p != body_end) {
      out.status = batch_status::malformed_record;
      return out;
    }
    if (offset_delta != i && out.consecutive_offset_deltas) {
      out.consecutive_offset_deltas = false;
      out.first_wrong_offset_delta = offset_delta;
      out.first_wrong_index = i;
    }
    const auto ts =
        static_cast<int64_t>(static_cast<uint64_t>(base_timestamp) + static_cast<uint64_t>(ts_delta));
    if (i == 0 || ts > out.max_timestamp) {
      out.max_timestamp = ts;
      out.offset_delta_of_max_timestamp = i;
    }
    if (i == 0 || ts < out.min_timestamp) out.min_timestamp = ts;
    out.null_key = out.null_key || key_null;
    ++out.records;
  }
  if (p != end) out.status = batch_status::record_count_mismatch;
  return out;
}

record_batch_view::record_batch_view(std::span<const uint8_t> batch, crc_check crc)
    : _data(batch), _status(validate_batch(batch, crc)) {
  if (auto h = parse_batch_header(batch)) _header = *h;
}

std::span<const uint8_t> record_batch_view::records_bytes() const {
  if (_data.size() < batch_layout::header_size) return {};
  return _data.subspan(batch_layout::records);
}

int64_t record_batch_view::timestamp_of(const record_view& r) const {
  if (_header.timestamp_kind() == timestamp_type::log_append_time) return _header.max_timestamp;
  return static_cast<int64_t>(static_cast<uint64_t>(_header.base_timestamp) +
                              static_cast<uint64_t>(r.timestamp_delta));
}

record_reader record_batch_view::records() const {
  batch_status initial = _status;
  if (initial == batch_status::ok && is_compressed()) initial = batch_status::compressed;
  return record_reader(records_bytes(), _header.record_count, initial);
}

batch_status record_batch_view::check_records() const {
  auto reader = records();
  while (reader.next()) {
  }
  return reader.status();
}

record_reader record_batch_view::records(std::vector<uint8_t>& buffer, size_t max_decompressed_bytes) const {
  if (_status != batch_status::ok || !is_compressed()) return records();
  const auto st = decompress_into(compression(), records_bytes(), max_decompressed_bytes, buffer);
  if (!st.ok()) {
    buffer.clear();
    return record_reader({}, 0,
                         st.code == error_code::message_too_large ? batch_status::decompressed_too_large
                                                                  : batch_status::decompression_failed);
  }
  return record_reader(buffer, _header.record_count);
}

batch_status record_batch_view::check_records(std::vector<uint8_t>& buffer,
                                              size_t max_decompressed_bytes) const {
  auto reader = records(buffer, max_decompressed_bytes);
  while (reader.next()) {
  }
  return reader.status();
}

// ---------------------------------------------------------------------------------------------------------------
// Splitting and stamping.

std::optional<std::span<const uint8_t>> batch_splitter::next() {
  if (_status != batch_status::ok || _pos == _data.size()) return std::nullopt;
  const size_t left = _data.size() - _pos;
  if (left < batch_layout::log_overhead) {
    _status = batch_status::partial_batch;
    return std::nullopt;
  }
  const int32_t length = load_be<int32_t>(_data, _pos + batch_layout::batch_length);
  if (length < min_batch_length) {
    _status = batch_status::too_short;
    return std::nullopt;
  }
  const uint64_t size = static_cast<uint64_t>(length) + batch_layout::log_overhead;
  if (left < size) {
    _status = batch_status::partial_batch;
    return std::nullopt;
  }
  auto batch = _data.subspan(_pos, static_cast<size_t>(size));
  _pos += static_cast<size_t>(size);
  return batch;
}

bool stamp_base_offset(std::span<uint8_t> batch, int64_t base_offset) {
  if (batch.size() < batch_layout::header_size) return false;
  store_be(batch, batch_layout::base_offset, base_offset);
  return true;
}

bool stamp_partition_leader_epoch(std::span<uint8_t> batch, int32_t epoch) {
  if (batch.size() < batch_layout::header_size) return false;
  store_be(batch, batch_layout::partition_leader_epoch, epoch);
  return true;
}

bool rewrite_batch_crc(std::span<uint8_t> batch) {
  if (batch.size() < batch_layout::header_size) return false;
  store_be(batch, batch_layout::crc, compute_batch_crc(batch));
  return true;
}

bool stamp_log_append_time(std::span<uint8_t> batch, int64_t timestamp_ms) {
  if (batch.size() < batch_layout::header_size) return false;
  const auto attributes = load_be<int16_t>(batch, batch_layout::attributes);
  store_be(batch, batch_layout::attributes,
           static_cast<int16_t>(attributes | batch_attributes::log_append_time));
  store_be(batch, batch_layout::max_timestamp, timestamp_ms);
  return rewrite_batch_crc(batch);
}

// ---------------------------------------------------------------------------------------------------------------
// Builder.

record_batch_builder& record_batch_builder::add(const record_input& record) {
  auto copy =
      [](const std::optional<std::span<const uint8_t>>& bytes) -> std::optional<std::vector<uint8_t>> {
    if (!bytes) return std::nullopt;
    return std::vector<uint8_t>(bytes->begin(), bytes->end());
  };
  auto& r = _records.emplace_back();
  r.timestamp = record.timestamp;
  r.key = copy(record.key);
  r.value = copy(record.value);
  r.headers.reserve(record.headers.size());
  for (const auto& h : record.headers) r.headers.push_back({std::string(h.key), copy(h.value)});
  r.offset_delta = record.offset_delta.value_or(static_cast<int32_t>(_records.size() - 1));
  return *this;
}

record_batch_builder& record_batch_builder::add(int64_t timestamp,
                                                std::optional<std::span<const uint8_t>> key,
                                                std::optional<std::span<const uint8_t>> value,
                                                std::span<const record_header_input> headers) {
  record_input in;
  in.timestamp = timestamp;
  in.key = key;
  in.value = value;
  in.headers = headers;
  return add(in);
}

std::vector<uint8_t> record_batch_builder::build() const {
  record_batch_header h = _header;
  h.magic = current_magic;
  h.record_count = static_cast<int32_t>(_records.size());
  h.base_timestamp = _base_timestamp.value_or(_records.empty() ? no_timestamp : _records.front().timestamp);
  if (_max_timestamp) {
    h.max_timestamp = *_max_timestamp;
  } else {
    h.max_timestamp = no_timestamp;
    for (const auto& r : _records) h.max_timestamp = std::max(h.max_timestamp, r.timestamp);
  }
  h.last_offset_delta = _last_offset_delta.value_or(_records.empty() ? 0 : _records.back().offset_delta);

  std::vector<uint8_t> out;
  wire_writer w(out);
  w.write_int64(h.base_offset);
  w.write_int32(0);  // batchLength, patched below
  w.write_int32(h.partition_leader_epoch);
  w.write_int8(h.magic);
  w.write_uint32(0);  // crc, patched below
  w.write_int16(h.attributes);
  w.write_int32(h.last_offset_delta);
  w.write_int64(h.base_timestamp);
  w.write_int64(h.max_timestamp);
  w.write_int64(h.producer_id);
  w.write_int16(h.producer_epoch);
  w.write_int32(h.base_sequence);
  w.write_int32(h.record_count);

  std::vector<uint8_t> records;
  wire_writer rw(records);
  auto write_nullable = [](wire_writer& to, const std::optional<std::vector<uint8_t>>& bytes) {
    if (!bytes) {
      to.write_varint(-1);
      return;
    }
    to.write_varint(static_cast<int32_t>(bytes->size()));
    to.write_raw(*bytes);
  };
  std::vector<uint8_t> body;
  for (const auto& r : _records) {
    body.clear();
    wire_writer b(body);
    b.write_int8(0);  // record attributes: unused in v2
    b.write_varlong(
        static_cast<int64_t>(static_cast<uint64_t>(r.timestamp) - static_cast<uint64_t>(h.base_timestamp)));
    b.write_varint(r.offset_delta);
    write_nullable(b, r.key);
    write_nullable(b, r.value);
    b.write_varint(static_cast<int32_t>(r.headers.size()));
    for (const auto& hdr : r.headers) {
      b.write_varint(static_cast<int32_t>(hdr.key.size()));
      b.write_raw({reinterpret_cast<const uint8_t*>(hdr.key.data()), hdr.key.size()});
      write_nullable(b, hdr.value);
    }
    rw.write_varint(static_cast<int32_t>(body.size()));
    rw.write_raw(body);
  }
  if (h.compression() == compression_codec::none) {
    w.write_raw(records);
  } else {
    w.write_raw(compress(h.compression(), records));
  }

  std::span<uint8_t> batch(out);
  store_be(batch, batch_layout::batch_length, static_cast<int32_t>(out.size() - batch_layout::log_overhead));
  rewrite_batch_crc(batch);
  return out;
}

}  // namespace mala::protocol
