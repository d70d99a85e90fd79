#include "mala/protocol/wire.h"

#include <bit>
#include <cstring>

namespace mala::protocol {

std::string_view decode_status_name(decode_status status) {
  switch (status) {
    case decode_status::ok:
      return "ok";
    case decode_status::truncated:
      return "truncated";
    case decode_status::invalid_length:
      return "invalid length";
    case decode_status::too_many_elements:
      return "too many elements";
    case decode_status::invalid_varint:
      return "invalid varint";
    case decode_status::too_many_tagged_fields:
      return "too many tagged fields";
    case decode_status::invalid_value:
      return "invalid value";
  }
  return "unknown";
}

namespace {
template <typename T>
T byte_swap(T v) {
  if constexpr (sizeof(T) == 2) {
    return static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(v)));
  } else if constexpr (sizeof(T) == 4) {
    return static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(v)));
  } else {
    return static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(v)));
  }
}
template <typename T>
T load_be(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  if constexpr (std::endian::native == std::endian::little && sizeof(T) > 1) v = byte_swap(v);
  return v;
}
template <typename T>
void store_be(std::vector<uint8_t>& out, T v) {
  if constexpr (std::endian::native == std::endian::little && sizeof(T) > 1) v = byte_swap(v);
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}
}  // namespace

bool wire_reader::read_bool() {
  return read_int8() != 0;
}

int8_t wire_reader::read_int8() {
  if (!need(1)) return 0;
  return static_cast<int8_t>(_data[_pos++]);
}
int16_t wire_reader::read_int16() {
  if (!need(2)) return 0;
  auto v = load_be<int16_t>(_data.data() + _pos);
  _pos += 2;
  return v;
}
uint16_t wire_reader::read_uint16() {
  return static_cast<uint16_t>(read_int16());
}
int32_t wire_reader::read_int32() {
  if (!need(4)) return 0;
  auto v = load_be<int32_t>(_data.data() + _pos);
  _pos += 4;
  return v;
}
uint32_t wire_reader::read_uint32() {
  return static_cast<uint32_t>(read_int32());
}
int64_t wire_reader::read_int64() {
  if (!need(8)) return 0;
  auto v = load_be<int64_t>(_data.data() + _pos);
  _pos += 8;
  return v;
}
double wire_reader::read_float64() {
  return std::bit_cast<double>(read_int64());
}

uuid wire_reader::read_uuid() {
  uuid id;
  if (!need(16)) return id;
  std::memcpy(id.bytes.data(), _data.data() + _pos, 16);
  _pos += 16;
  return id;
}

uint64_t wire_reader::read_uvarlong() {
  uint64_t value = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (!need(1)) return 0;
    uint8_t b = _data[_pos++];
    if (shift == 63 && (b & 0xfe) != 0) break;
    value |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return value;
  }
  fail(decode_status::invalid_varint);
  return 0;
}

uint32_t wire_reader::read_uvarint() {
  uint32_t value = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (!need(1)) return 0;
    uint8_t b = _data[_pos++];
    if (shift == 28 && (b & 0xf0) != 0) break;
    value |= static_cast<uint32_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return value;
  }
  fail(decode_status::invalid_varint);
  return 0;
}

int32_t wire_reader::read_varint() {
  uint32_t raw = read_uvarint();
  return static_cast<int32_t>((raw >> 1) ^ (~(raw & 1) + 1));
}
int64_t wire_reader::read_varlong() {
  uint64_t raw = read_uvarlong();
  return static_cast<int64_t>((raw >> 1) ^ (~(raw & 1) + 1));
}

std::span<const uint8_t> wire_reader::read_span(size_t n) {
  if (!need(n)) return {};
  auto s = _data.subspan(_pos, n);
  _pos += n;
  return s;
}

int32_t wire_reader::read_string_length(bool compact) {
  int64_t len = compact ? static_cast<int64_t>(read_uvarint()) - 1 : read_int16();
  if (!ok()) return -1;
  if (len < -1) {
    fail(decode_status::invalid_length);
    return -1;
  }
  if (len > static_cast<int64_t>(remaining())) {
    fail(decode_status::invalid_length);
    return -1;
  }
  return static_cast<int32_t>(len);
}

int32_t wire_reader::read_bytes_length(bool compact) {
  int64_t len = compact ? static_cast<int64_t>(read_uvarint()) - 1 : read_int32();
  if (!ok()) return -1;
  if (len < -1 || len > static_cast<int64_t>(remaining())) {
    fail(decode_status::invalid_length);
    return -1;
  }
  return static_cast<int32_t>(len);
}

int32_t wire_reader::read_array_length(bool compact) {
  int64_t len = compact ? static_cast<int64_t>(read_uvarint()) - 1 : read_int32();
  if (!ok()) return -1;
  if (len < -1) {
    fail(decode_status::invalid_length);
    return -1;
  }
  if (len > static_cast<int64_t>(remaining()) || len > static_cast<int64_t>(max_array_elements)) {
    fail(decode_status::too_many_elements);
    return -1;
  }
  return static_cast<int32_t>(len);
}

std::string wire_reader::read_string(bool compact) {
  int32_t len = read_string_length(compact);
  if (len < 0) {
    fail(decode_status::invalid_length);
    return {};
  }
  auto s = read_span(static_cast<size_t>(len));
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

std::optional<std::string> wire_reader::read_nullable_string(bool compact) {
  int32_t len = read_string_length(compact);
  if (len < 0) return std::nullopt;
  auto s = read_span(static_cast<size_t>(len));
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

std::vector<uint8_t> wire_reader::read_bytes(bool compact) {
  int32_t len = read_bytes_length(compact);
  if (len < 0) {
    fail(decode_status::invalid_length);
    return {};
  }
  auto s = read_span(static_cast<size_t>(len));
  return {s.begin(), s.end()};
}

std::optional<std::vector<uint8_t>> wire_reader::read_nullable_bytes(bool compact) {
  int32_t len = read_bytes_length(compact);
  if (len < 0) return std::nullopt;
  auto s = read_span(static_cast<size_t>(len));
  return std::vector<uint8_t>(s.begin(), s.end());
}

records_view wire_reader::read_records(bool compact) {
  int32_t len = read_bytes_length(compact);
  if (len < 0) return {};
  return records_view::of(read_span(static_cast<size_t>(len)));
}

uint32_t wire_reader::read_tag_count() {
  uint32_t n = read_uvarint();
  if (n > max_tagged_fields || n > remaining()) {
    fail(decode_status::too_many_tagged_fields);
    return 0;
  }
  return n;
}

void wire_writer::write_int16(int16_t v) {
  store_be(_out, v);
}
void wire_writer::write_uint16(uint16_t v) {
  store_be(_out, v);
}
void wire_writer::write_int32(int32_t v) {
  store_be(_out, v);
}
void wire_writer::write_uint32(uint32_t v) {
  store_be(_out, v);
}
void wire_writer::write_int64(int64_t v) {
  store_be(_out, v);
}
void wire_writer::write_float64(double v) {
  store_be(_out, std::bit_cast<int64_t>(v));
}
void wire_writer::write_uuid(const uuid& v) {
  _out.insert(_out.end(), v.bytes.begin(), v.bytes.end());
}

void wire_writer::write_uvarlong(uint64_t v) {
  while (v >= 0x80) {
    _out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  _out.push_back(static_cast<uint8_t>(v));
}
void wire_writer::write_uvarint(uint32_t v) {
  write_uvarlong(v);
}
void wire_writer::write_varint(int32_t v) {
  write_uvarint((static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31));
}
void wire_writer::write_varlong(int64_t v) {
  write_uvarlong((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}
void wire_writer::write_raw(std::span<const uint8_t> bytes) {
  _out.insert(_out.end(), bytes.begin(), bytes.end());
}

void wire_writer::write_string(std::string_view s, bool compact) {
  if (compact) {
    write_uvarint(static_cast<uint32_t>(s.size() + 1));
  } else {
    write_int16(static_cast<int16_t>(s.size()));
  }
  _out.insert(_out.end(), s.begin(), s.end());
}
void wire_writer::write_nullable_string(const std::optional<std::string>& s, bool compact) {
  if (!s) {
    if (compact) {
      write_uvarint(0);
    } else {
      write_int16(-1);
    }
    return;
  }
  write_string(*s, compact);
}
void wire_writer::write_bytes(std::span<const uint8_t> b, bool compact) {
  if (compact) {
    write_uvarint(static_cast<uint32_t>(b.size() + 1));
  } else {
    write_int32(static_cast<int32_t>(b.size()));
  }
  write_raw(b);
}
void wire_writer::write_nullable_bytes(const std::optional<std::vector<uint8_t>>& b, bool compact) {
  if (!b) {
    if (compact) {
      write_uvarint(0);
    } else {
      write_int32(-1);
    }
    return;
  }
  write_bytes(*b, compact);
}
void wire_writer::write_records(const records_view& r, bool compact) {
  if (r.null) {
    if (compact) {
      write_uvarint(0);
    } else {
      write_int32(-1);
    }
    return;
  }
  if (r.is_external()) {
    if (compact) {
      write_uvarint(r.external_size + 1);
    } else {
      write_int32(static_cast<int32_t>(r.external_size));
    }
    _gaps.push_back({_out.size(), r.external_id, r.external_size});
    return;
  }
  write_bytes(r.bytes, compact);
}
void wire_writer::write_array_length(int32_t n, bool compact) {
  if (compact) {
    write_uvarint(static_cast<uint32_t>(n + 1));
  } else {
    write_int32(n);
  }
}

size_t uvarlong_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
size_t uvarint_size(uint32_t v) {
  return uvarlong_size(v);
}
size_t varint_size(int32_t v) {
  return uvarint_size((static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31));
}
size_t varlong_size(int64_t v) {
  return uvarlong_size((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}

}  // namespace mala::protocol
