#include "mala/common/json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace mala::json {

const value* value::find(std::string_view key) const {
  const auto* members = as_object();
  if (members == nullptr) return nullptr;
  for (const auto& [name, v] : *members) {
    if (name == key) return &v;
  }
  return nullptr;
}

std::optional<int64_t> value::as_int64() const {
  const auto* n = as_number();
  if (n == nullptr) return std::nullopt;
  int64_t out = 0;
  const char* end = n->text.data() + n->text.size();
  auto [ptr, ec] = std::from_chars(n->text.data(), end, out);
  if (ec == std::errc() && ptr == end) return out;
  // 1.0, 1e3: integral values written another way.
  if (std::isfinite(n->as_double) && std::trunc(n->as_double) == n->as_double &&
      std::fabs(n->as_double) < 9.2e18) {
    return static_cast<int64_t>(n->as_double);
  }
  return std::nullopt;
}

namespace {

class parser {
 public:
  parser(std::string_view text, const limits& bounds) : _text(text), _limits(bounds) {}

  result<value> document() {
    if (_text.size() > _limits.max_bytes)
      return fail("document larger than " + std::to_string(_limits.max_bytes));
    value out;
    if (!parse_value(out, 0)) return fail(_error);
    skip_space();
    if (_pos != _text.size()) return fail("trailing characters");
    return out;
  }

 private:
  status fail(const std::string& why) const {
    return status::error(error_code::invalid_request, "JSON at byte " + std::to_string(_pos) + ": " + why);
  }
  bool error(std::string why) {
    if (_error.empty()) _error = std::move(why);
    return false;
  }
  void skip_space() {
    while (_pos < _text.size() &&
           (_text[_pos] == ' ' || _text[_pos] == '\t' || _text[_pos] == '\n' || _text[_pos] == '\r')) {
      ++_pos;
    }
  }
  bool literal(std::string_view word) {
    if (_text.substr(_pos, word.size()) != word) return error("invalid literal");
    _pos += word.size();
    return true;
  }

  bool parse_value(value& out, size_t depth) {
    if (depth > _limits.max_depth) return error("nested deeper than " + std::to_string(_limits.max_depth));
    if (++_elements > _limits.max_elements)
      return error("more than " + std::to_string(_limits.max_elements) + " values");
    skip_space();
    if (_pos >= _text.size()) return error("unexpected end");
    switch (_text[_pos]) {
      case '{':
        return parse_object(out, depth);
      case '[':
        return parse_array(out, depth);
      case '"': {
        std::string s;
        if (!parse_string(s)) return false;
        out.data = std::move(s);
        return true;
      }
      case 't':
        out.data = true;
        return literal("true");
      case 'f':
        out.data = false;
        return literal("false");
      case 'n':
        out.data = nullptr;
        return literal("null");
      default:
        return parse_number(out);
    }
  }

  bool parse_object(value& out, size_t depth) {
    ++_pos;  // '{'
    object members;
    skip_space();
    if (_pos < _text.size() && _text[_pos] == '}') {
      ++_pos;
      out.data = std::move(members);
      return true;
    }
    while (true) {
      skip_space();
      if (_pos >= _text.size() || _text[_pos] != '"') return error("expected a member name");
      std::string name;
      if (!parse_string(name)) return false;
      for (const auto& m : members) {
        if (m.first == name) return error("duplicate member name");
      }
      skip_space();
      if (_pos >= _text.size() || _text[_pos] != ':') return error("expected ':'");
      ++_pos;
      value v;
      if (!parse_value(v, depth + 1)) return false;
      members.emplace_back(std::move(name), std::move(v));
      skip_space();
      if (_pos < _text.size() && _text[_pos] == ',') {
        ++_pos;
        continue;
      }
      if (_pos < _text.size() && _text[_pos] == '}') {
        ++_pos;
        out.data = std::move(members);
        return true;
      }
      return error("expected ',' or '}'");
    }
  }

  bool parse_array(value& out, size_t depth) {
    ++_pos;  // '['
    array items;
    skip_space();
    if (_pos < _text.size() && _text[_pos] == ']') {
      ++_pos;
      out.data = std::move(items);
      return true;
    }
    while (true) {
      value v;
      if (!parse_value(v, depth + 1)) return false;
      items.push_back(std::move(v));
      skip_space();
      if (_pos < _text.size() && _text[_pos] == ',') {
        ++_pos;
        continue;
      }
      if (_pos < _text.size() && _text[_pos] == ']') {
        ++_pos;
        out.data = std::move(items);
        return true;
      }
      return error("expected ',' or ']'");
    }
  }

  bool hex4(uint32_t& out) {
    if (_text.size() - _pos < 4) return error("short \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = _text[_pos++];
      out <<= 4;
      if (c >= '0' && c <= '9') {
        out |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        out |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        out |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return error("bad \\u escape");
      }
    }
    return true;
  }

  static void append_utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool parse_string(std::string& out) {
    ++_pos;  // '"'
    while (true) {
      if (_pos >= _text.size()) return error("unterminated string");
      const char c = _text[_pos++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return error("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (_pos >= _text.size()) return error("unterminated escape");
      const char e = _text[_pos++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t low = 0;
            if (_text.substr(_pos, 2) != "\\u") return error("lone high surrogate");
            _pos += 2;
            if (!hex4(low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) return error("bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return error("lone low surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          return error("bad escape");
      }
    }
  }

  bool parse_number(value& out) {
    const size_t start = _pos;
    auto digits = [&] {
      const size_t from = _pos;
      while (_pos < _text.size() && _text[_pos] >= '0' && _text[_pos] <= '9') ++_pos;
      return _pos - from;
    };
    if (_pos < _text.size() && _text[_pos] == '-') ++_pos;
    if (_pos < _text.size() && _text[_pos] == '0') {
      ++_pos;
    } else if (digits() == 0) {
      return error("unexpected character");
    }
    if (_pos < _text.size() && _text[_pos] == '.') {
      ++_pos;
      if (digits() == 0) return error("digits expected after '.'");
    }
    if (_pos < _text.size() && (_text[_pos] == 'e' || _text[_pos] == 'E')) {
      ++_pos;
      if (_pos < _text.size() && (_text[_pos] == '+' || _text[_pos] == '-')) ++_pos;
      if (digits() == 0) return error("digits expected in the exponent");
    }
    number n;
    n.text = std::string(_text.substr(start, _pos - start));
    n.as_double = std::strtod(n.text.c_str(), nullptr);
    out.data = std::move(n);
    return true;
  }

  std::string_view _text;
  const limits& _limits;
  size_t _pos = 0;
  size_t _elements = 0;
  std::string _error;
};

}  // namespace

result<value> parse(std::string_view text, const limits& bounds) {
  return parser(text, bounds).document();
}

}  // namespace mala::json
