// Primitive readers and writers for Kafka's wire format (big-endian integers, varints, strings, compact
// forms).
//
// wire_reader never throws and never reads past its span: the first failure is sticky, every later read
// returns a zero value, and callers check status() once at the end. Lengths and counts are checked against
// the bytes that remain before anything is allocated. Neither type is thread-safe; each is used by one
// request at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/uuid.h"

namespace mala::protocol {

enum class decode_status : uint8_t {
  ok,
  truncated,          // fewer bytes than a field needs
  invalid_length,     // a negative length where null is not allowed, or a length past the end
  too_many_elements,  // an array count past the bytes left or past max_array_elements
  invalid_varint,     // a varint longer than its type allows
  too_many_tagged_fields,
  invalid_value,
};

std::string_view decode_status_name(decode_status status);

// Kafka 4.x bounds (MessageUtil / ByteBufferAccessor): no array may claim more elements than this, and no
// message more tagged fields than max_tagged_fields, whatever the bytes left.
inline constexpr uint32_t max_array_elements = 1'000'000;
inline constexpr uint32_t max_tagged_fields = 10'000;

// A records field, kept as a view into the request buffer (decode) or into storage the caller keeps alive
// until the message is encoded. `null` is a null records field (distinct from an empty one).
//
// An external records field has no bytes in memory: zero-copy Fetch sends them from the segment file with
// sendfile(2). The encoder writes its length prefix, then leaves a gap of external_size bytes in the output
// and records it in wire_writer::gaps() for the caller to fill; external_id is the caller's tag for the gap.
// Sizes (encoded_size) count the gap, so a size prefix computed from them is the size on the wire.
struct records_view {
  std::span<const uint8_t> bytes;
  bool null = true;
  int32_t external_id = -1;  // >= 0: external records
  uint32_t external_size = 0;

  static records_view of(std::span<const uint8_t> b) { return {b, false}; }
  static records_view external(int32_t id, uint32_t size) { return {{}, false, id, size}; }
  bool is_external() const { return external_id >= 0; }
  size_t size() const { return is_external() ? external_size : bytes.size(); }
  friend bool operator==(const records_view& a, const records_view& b) {
    return a.null == b.null && a.external_id == b.external_id && a.external_size == b.external_size &&
           std::equal(a.bytes.begin(), a.bytes.end(), b.bytes.begin(), b.bytes.end());
  }
};

// Where an external records field's bytes belong in a wire_writer's output.
struct records_gap {
  size_t position = 0;  // bytes written before the gap
  int32_t external_id = -1;
  uint32_t size = 0;
};

class wire_reader {
 public:
  explicit wire_reader(std::span<const uint8_t> data) : _data(data) {}

  size_t remaining() const { return _data.size() - _pos; }
  size_t position() const { return _pos; }
  bool ok() const { return _status == decode_status::ok; }
  decode_status status() const { return _status; }
  void fail(decode_status status) {
    if (_status == decode_status::ok) _status = status;
    _pos = _data.size();
  }
  std::span<const uint8_t> rest() const { return _data.subspan(_pos); }

  bool read_bool();
  int8_t read_int8();
  int16_t read_int16();
  uint16_t read_uint16();
  int32_t read_int32();
  uint32_t read_uint32();
  int64_t read_int64();
  double read_float64();
  uuid read_uuid();
  uint32_t read_uvarint();
  int32_t read_varint();   // zig-zag
  int64_t read_varlong();  // zig-zag
  uint64_t read_uvarlong();

  // A view of the next n bytes; fails (truncated) if fewer remain.
  std::span<const uint8_t> read_span(size_t n);
  void skip(size_t n) { read_span(n); }

  // Length prefixes. Return -1 for null. Fail if the length is past the bytes left.
  int32_t read_string_length(bool compact);
  int32_t read_bytes_length(bool compact);
  // Array count; -1 for null. Fails if the count exceeds the bytes left or max_array_elements.
  int32_t read_array_length(bool compact);

  std::string read_string(bool compact);  // null is an error (invalid_length)
  std::optional<std::string> read_nullable_string(bool compact);
  std::vector<uint8_t> read_bytes(bool compact);  // null is an error
  std::optional<std::vector<uint8_t>> read_nullable_bytes(bool compact);
  records_view read_records(bool compact);

  // Number of tagged fields that follow; fails past max_tagged_fields.
  uint32_t read_tag_count();

 private:
  bool need(size_t n) {
    if (remaining() < n) {
      fail(decode_status::truncated);
      return false;
    }
    return true;
  }
  std::span<const uint8_t> _data;
  size_t _pos = 0;
  decode_status _status = decode_status::ok;
};

// Appends to a byte vector. Sizes are computed beforehand by the generated encoded_size(), so one reserve()
// is enough.
class wire_writer {
 public:
  explicit wire_writer(std::vector<uint8_t>& out) : _out(out) {}

  void write_bool(bool v) { _out.push_back(v ? 1 : 0); }
  void write_int8(int8_t v) { _out.push_back(static_cast<uint8_t>(v)); }
  void write_int16(int16_t v);
  void write_uint16(uint16_t v);
  void write_int32(int32_t v);
  void write_uint32(uint32_t v);
  void write_int64(int64_t v);
  void write_float64(double v);
  void write_uuid(const uuid& v);
  void write_uvarint(uint32_t v);
  void write_varint(int32_t v);
  void write_varlong(int64_t v);
  void write_uvarlong(uint64_t v);
  void write_raw(std::span<const uint8_t> bytes);

  void write_string(std::string_view s, bool compact);
  void write_nullable_string(const std::optional<std::string>& s, bool compact);
  void write_bytes(std::span<const uint8_t> b, bool compact);
  void write_nullable_bytes(const std::optional<std::vector<uint8_t>>& b, bool compact);
  // External records: the length prefix only, and a gap in gaps().
  void write_records(const records_view& r, bool compact);
  void write_array_length(int32_t n, bool compact);  // -1 for null

  size_t size() const { return _out.size(); }
  std::vector<uint8_t>& buffer() { return _out; }
  // The external records written, in output order.
  const std::vector<records_gap>& gaps() const { return _gaps; }

 private:
  std::vector<uint8_t>& _out;
  std::vector<records_gap> _gaps;
};

// Sizes of the primitive encodings, for encoded_size().
size_t uvarint_size(uint32_t v);
size_t uvarlong_size(uint64_t v);
size_t varint_size(int32_t v);
size_t varlong_size(int64_t v);
inline size_t string_size(size_t len, bool compact) {
  return compact ? uvarint_size(static_cast<uint32_t>(len + 1)) + len : 2 + len;
}
inline size_t bytes_size(size_t len, bool compact) {
  return compact ? uvarint_size(static_cast<uint32_t>(len + 1)) + len : 4 + len;
}
inline size_t null_string_size(bool compact) {
  return compact ? 1 : 2;
}
inline size_t null_bytes_size(bool compact) {
  return compact ? 1 : 4;
}
inline size_t array_length_size(int32_t n, bool compact) {
  return compact ? uvarint_size(static_cast<uint32_t>(n + 1)) : 4;
}

}  // namespace mala::protocol
