#include "mala/protocol/otlp_metrics.h"

#include <bit>
#include <charconv>
#include <cstring>
#include <optional>
#include <string_view>

namespace mala::protocol {

namespace {

// Protobuf wire types.
constexpr uint32_t wire_varint = 0;
constexpr uint32_t wire_fixed64 = 1;
constexpr uint32_t wire_length = 2;
constexpr uint32_t wire_fixed32 = 5;

// One field of a message: its number, wire type and value (a varint or fixed number, or a byte range).
struct pb_field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t number_value = 0;
  std::span<const uint8_t> bytes;
};

status malformed(std::string_view what) {
  return status::error(error_code::invalid_record, "malformed OTLP metrics: " + std::string(what));
}

// Reads the fields of one message in order.
class pb_reader {
 public:
  explicit pb_reader(std::span<const uint8_t> data) : _data(data) {}

  // The next field, nullopt at the end; a malformed field sets error().
  std::optional<pb_field> next() {
    if (_pos >= _data.size() || !_error.ok()) return std::nullopt;
    const auto tag = varint();
    if (!tag) return fail("truncated tag");
    pb_field f;
    f.number = static_cast<uint32_t>(*tag >> 3);
    f.wire = static_cast<uint32_t>(*tag & 7);
    if (f.number == 0 || *tag > UINT32_MAX) return fail("bad field number");
    switch (f.wire) {
      case wire_varint: {
        const auto v = varint();
        if (!v) return fail("truncated varint");
        f.number_value = *v;
        break;
      }
      case wire_fixed64:
      case wire_fixed32: {
        const size_t n = f.wire == wire_fixed64 ? 8 : 4;
        if (_data.size() - _pos < n) return fail("truncated fixed field");
        uint64_t v = 0;
        for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(_data[_pos + i]) << (8 * i);
        _pos += n;
        f.number_value = v;
        break;
      }
      case wire_length: {
        const auto len = varint();
        if (!len) return fail("truncated length");
        if (*len > _data.size() - _pos) return fail("length past the end");
        f.bytes = _data.subspan(_pos, static_cast<size_t>(*len));
        _pos += static_cast<size_t>(*len);
        break;
      }
      default:
        return fail("unsupported wire type");  // groups (3, 4) and reserved types
    }
    return f;
  }
  const status& error() const { return _error; }

 private:
  std::optional<uint64_t> varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (_pos >= _data.size()) return std::nullopt;
      const uint8_t b = _data[_pos++];
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return std::nullopt;  // more than 10 bytes
  }
  std::nullopt_t fail(std::string_view what) {
    _error = malformed(what);
    return std::nullopt;
  }

  std::span<const uint8_t> _data;
  size_t _pos = 0;
  status _error;
};

class otlp_decoder {
 public:
  explicit otlp_decoder(const otlp_limits& limits) : _limits(limits) {}

  status metrics_data(std::span<const uint8_t> data) {
    pb_reader r(data);
    while (auto f = r.next()) {
      if (f->number == 1 && f->wire == wire_length) {
        if (auto st = resource_metrics(f->bytes); !st.ok()) return st;
      }
    }
    return r.error();
  }

  otlp_metrics_data take() { return std::move(_out); }

 private:
  status string_field(const pb_field& f, std::string& out) const {
    if (f.wire != wire_length) return malformed("string field of another wire type");
    if (f.bytes.size() > _limits.max_string_bytes) return malformed("string longer than allowed");
    out.assign(reinterpret_cast<const char*>(f.bytes.data()), f.bytes.size());
    if (!valid_utf8(out)) return malformed("string not UTF-8");
    return status::success();
  }

  // AnyValue, rendered as text; nullopt for an array or key-value list (not descended into).
  result<std::optional<std::string>> any_value(std::span<const uint8_t> data) const {
    std::optional<std::string> value;
    pb_reader r(data);
    while (auto f = r.next()) {
      switch (f->number) {
        case 1: {
          std::string s;
          if (auto st = string_field(*f, s); !st.ok()) return st;
          value = std::move(s);
          break;
        }
        case 2:
          value = f->number_value ? "true" : "false";
          break;
        case 3:
          value = std::to_string(static_cast<int64_t>(f->number_value));
          break;
        case 4: {
          if (f->wire != wire_fixed64) return malformed("double value of another wire type");
          char text[32];
          const auto [end, ec] =
              std::to_chars(text, text + sizeof text, std::bit_cast<double>(f->number_value));
          value = ec == std::errc{} ? std::string(text, end) : "NaN";
          break;
        }
        case 7: {
          if (f->wire != wire_length || f->bytes.size() * 2 > _limits.max_string_bytes)
            return malformed("bytes value");
          static constexpr char hex[] = "0123456789abcdef";
          std::string s;
          for (uint8_t b : f->bytes) {
            s += hex[b >> 4];
            s += hex[b & 15];
          }
          value = std::move(s);
          break;
        }
        default:
          value.reset();  // array_value (5), kvlist_value (6), or a field this reader does not know
      }
    }
    if (!r.error().ok()) return r.error();
    return value;
  }

  status key_value(std::span<const uint8_t> data, std::vector<otlp_attribute>& out) const {
    if (out.size() >= _limits.max_attributes) return malformed("more attributes than allowed");
    otlp_attribute a;
    std::optional<std::string> value;
    pb_reader r(data);
    while (auto f = r.next()) {
      if (f->number == 1) {
        if (auto st = string_field(*f, a.key); !st.ok()) return st;
      } else if (f->number == 2) {
        if (f->wire != wire_length) return malformed("attribute value of another wire type");
        auto v = any_value(f->bytes);
        if (!v) return v.error();
        value = std::move(*v);
      }
    }
    if (!r.error().ok()) return r.error();
    if (value) {
      a.value = std::move(*value);
      out.push_back(std::move(a));
    }
    return status::success();
  }

  status resource_metrics(std::span<const uint8_t> data) {
    // The resource may follow its scopes on the wire: its attributes are read first.
    std::vector<otlp_attribute> resource_attributes;
    pb_reader first(data);
    while (auto f = first.next()) {
      if (f->number != 1 || f->wire != wire_length) continue;
      pb_reader resource(f->bytes);
      while (auto a = resource.next()) {
        if (a->number != 1 || a->wire != wire_length) continue;
        if (auto st = key_value(a->bytes, resource_attributes); !st.ok()) return st;
      }
      if (!resource.error().ok()) return resource.error();
    }
    if (!first.error().ok()) return first.error();
    if (_out.resources.size() >= _limits.max_resources) return malformed("more resources than allowed");
    _resource = _out.resources.size();
    _out.resources.push_back(std::move(resource_attributes));
    pb_reader r(data);
    while (auto f = r.next()) {
      if (f->number != 2 || f->wire != wire_length) continue;
      pb_reader scope(f->bytes);
      while (auto m = scope.next()) {
        if (m->number != 2 || m->wire != wire_length) continue;
        if (auto st = metric(m->bytes); !st.ok()) return st;
      }
      if (!scope.error().ok()) return scope.error();
    }
    return r.error();
  }

  status metric(std::span<const uint8_t> data) {
    otlp_metric shape;
    std::optional<pb_field> body;
    pb_reader r(data);
    while (auto f = r.next()) {
      switch (f->number) {
        case 1:
          if (auto st = string_field(*f, shape.name); !st.ok()) return st;
          break;
        case 2:
          if (auto st = string_field(*f, shape.description); !st.ok()) return st;
          break;
        case 3:
          if (auto st = string_field(*f, shape.unit); !st.ok()) return st;
          break;
        case 5:
        case 7:
        case 9:
        case 10:
        case 11:
          if (f->wire != wire_length) return malformed("metric data of another wire type");
          body = *f;
          break;
        default:
          break;
      }
    }
    if (!r.error().ok()) return r.error();
    if (!body) return status::success();
    if (body->number != 5 && body->number != 7) return count_skipped(body->bytes);
    shape.kind = body->number == 5 ? otlp_metric_kind::gauge : otlp_metric_kind::sum;
    if (shape.kind == otlp_metric_kind::sum) {
      pb_reader sum(body->bytes);
      while (auto f = sum.next()) {
        if (f->number == 2 && f->wire == wire_varint && f->number_value <= 2)
          shape.temporality = static_cast<otlp_temporality>(f->number_value);
        else if (f->number == 3 && f->wire == wire_varint)
          shape.monotonic = f->number_value != 0;
      }
      if (!sum.error().ok()) return sum.error();
    }
    // The metric is kept once, with its first point.
    std::optional<size_t> index;
    pb_reader points(body->bytes);
    while (auto f = points.next()) {
      if (f->number != 1 || f->wire != wire_length) continue;
      if (auto st = number_point(f->bytes, shape, index); !st.ok()) return st;
    }
    return points.error();
  }

  status count_skipped(std::span<const uint8_t> data) {
    pb_reader r(data);
    while (auto f = r.next()) {
      if (f->number == 1 && f->wire == wire_length) ++_out.skipped_points;
    }
    return r.error();
  }

  status number_point(std::span<const uint8_t> data, otlp_metric& shape, std::optional<size_t>& index) {
    if (_out.points.size() >= _limits.max_points) return malformed("more data points than allowed");
    otlp_number_point p;
    p.resource = _resource;
    bool has_value = false;
    bool no_recorded_value = false;
    pb_reader r(data);
    while (auto f = r.next()) {
      switch (f->number) {
        case 3:
          if (f->wire != wire_fixed64) return malformed("time of another wire type");
          p.time_unix_nano = f->number_value;
          break;
        case 4:
          if (f->wire != wire_fixed64) return malformed("double point of another wire type");
          p.value = std::bit_cast<double>(f->number_value);
          has_value = true;
          break;
        case 6:
          if (f->wire != wire_fixed64) return malformed("int point of another wire type");
          p.value = static_cast<double>(static_cast<int64_t>(f->number_value));
          has_value = true;
          break;
        case 8:  // flags: bit 0 is FLAG_NO_RECORDED_VALUE
          if (f->wire != wire_varint) return malformed("flags of another wire type");
          no_recorded_value = (f->number_value & 1) != 0;
          break;
        case 7:
          if (f->wire != wire_length) return malformed("attribute of another wire type");
          if (auto st = key_value(f->bytes, p.attributes); !st.ok()) return st;
          break;
        default:
          break;
      }
    }
    if (!r.error().ok()) return r.error();
    if (!has_value || no_recorded_value) {
      ++_out.skipped_points;
      return status::success();
    }
    if (!index) {
      index = _out.metrics.size();
      _out.metrics.push_back(std::move(shape));
    }
    p.metric = *index;
    _out.points.push_back(std::move(p));
    return status::success();
  }

  const otlp_limits& _limits;
  otlp_metrics_data _out;
  size_t _resource = 0;  // of the ResourceMetrics being read
};

// Encoding (tests and benchmarks).
void put_varint(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}
void put_tag(std::vector<uint8_t>& out, uint32_t number, uint32_t wire) {
  put_varint(out, (number << 3) | wire);
}
void put_bytes(std::vector<uint8_t>& out, uint32_t number, std::span<const uint8_t> bytes) {
  put_tag(out, number, wire_length);
  put_varint(out, bytes.size());
  out.insert(out.end(), bytes.begin(), bytes.end());
}
void put_string(std::vector<uint8_t>& out, uint32_t number, std::string_view s) {
  put_bytes(out, number, {reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}
void put_fixed64(std::vector<uint8_t>& out, uint32_t number, uint64_t v) {
  put_tag(out, number, wire_fixed64);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
std::vector<uint8_t> key_value_bytes(const otlp_attribute& a) {
  std::vector<uint8_t> value;
  put_string(value, 1, a.value);
  std::vector<uint8_t> kv;
  put_string(kv, 1, a.key);
  put_bytes(kv, 2, value);
  return kv;
}

}  // namespace

bool valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<uint8_t>(text[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    uint32_t cp = 0;
    uint32_t min = 0;
    if ((b & 0xe0) == 0xc0) {
      n = 1, cp = b & 0x1f, min = 0x80;
    } else if ((b & 0xf0) == 0xe0) {
      n = 2, cp = b & 0x0f, min = 0x800;
    } else if ((b & 0xf8) == 0xf0) {
      n = 3, cp = b & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (text.size() - i <= n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto c = static_cast<uint8_t>(text[i + k]);
      if ((c & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

result<otlp_metrics_data> decode_otlp_metrics(std::span<const uint8_t> data, const otlp_limits& limits) {
  otlp_decoder decoder(limits);
  if (auto st = decoder.metrics_data(data); !st.ok()) return st;
  return decoder.take();
}

std::vector<uint8_t> encode_otlp_metrics(const std::vector<otlp_attribute>& resource_attributes,
                                         const std::vector<otlp_metric>& metrics,
                                         const std::vector<otlp_number_point>& points) {
  std::vector<uint8_t> resource;
  for (const auto& a : resource_attributes) put_bytes(resource, 1, key_value_bytes(a));
  std::vector<uint8_t> scope;
  for (const auto& p : points) {
    const otlp_metric& m = metrics.at(p.metric);
    std::vector<uint8_t> point;
    for (const auto& a : p.attributes) put_bytes(point, 7, key_value_bytes(a));
    put_fixed64(point, 3, p.time_unix_nano);
    put_fixed64(point, 4, std::bit_cast<uint64_t>(p.value));
    std::vector<uint8_t> body;
    put_bytes(body, 1, point);
    if (m.kind == otlp_metric_kind::sum) {
      put_tag(body, 2, wire_varint);
      put_varint(body, static_cast<uint64_t>(m.temporality));
      put_tag(body, 3, wire_varint);
      put_varint(body, m.monotonic ? 1 : 0);
    }
    std::vector<uint8_t> metric;
    put_string(metric, 1, m.name);
    if (!m.description.empty()) put_string(metric, 2, m.description);
    if (!m.unit.empty()) put_string(metric, 3, m.unit);
    put_bytes(metric, m.kind == otlp_metric_kind::gauge ? 5 : 7, body);
    put_bytes(scope, 2, metric);
  }
  std::vector<uint8_t> resource_metrics;
  put_bytes(resource_metrics, 1, resource);
  put_bytes(resource_metrics, 2, scope);
  std::vector<uint8_t> out;
  put_bytes(out, 1, resource_metrics);
  return out;
}

}  // namespace mala::protocol
