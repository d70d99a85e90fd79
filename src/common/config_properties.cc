// Java properties text, as java.util.Properties.load reads it: Kafka's server.properties and meta.properties.
#include <string>

#include "mala/common/config.h"

namespace mala {

namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\f';
}

void append_utf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xe0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3f)));
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Resolves \t \n \r \f \uXXXX; any other escaped character stands for itself (so "\:" is ':' and "\\" is
// '\').
std::string unescape(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c != '\\' || i + 1 == raw.size()) {
      if (c != '\\') out.push_back(c);
      continue;
    }
    char e = raw[++i];
    switch (e) {
      case 't':
        out.push_back('\t');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'u': {
        uint32_t code = 0;
        size_t digits = 0;
        while (digits < 4 && i + 1 < raw.size() && hex_value(raw[i + 1]) >= 0) {
          code = code * 16 + static_cast<uint32_t>(hex_value(raw[++i]));
          ++digits;
        }
        if (digits == 4) {
          append_utf8(out, code);
        } else {
          out.push_back('u');  // malformed: keep what was written rather than fail, unlike Java
          out.append(raw.substr(i + 1 - digits, digits));
        }
        break;
      }
      default:
        out.push_back(e);
    }
  }
  return out;
}

// Number of backslashes ending `s`: an odd count means the line continues.
size_t trailing_backslashes(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && s[s.size() - 1 - n] == '\\') ++n;
  return n;
}

std::vector<std::string_view> natural_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' || text[i] == '\r') {
      lines.push_back(text.substr(start, i - start));
      if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

std::string_view skip_blanks(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  return s;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_java_properties(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  auto lines = natural_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    auto first = skip_blanks(lines[i]);
    if (first.empty() || first.front() == '#' || first.front() == '!') continue;
    // Join continuation lines; leading blanks of a continuation line are dropped, and a continuation line is
    // never a comment.
    std::string logical(first);
    while (trailing_backslashes(logical) % 2 == 1) {
      logical.pop_back();
      if (i + 1 >= lines.size()) break;
      logical += skip_blanks(lines[++i]);
    }
    // The key ends at the first unescaped '=', ':' or blank.
    size_t pos = 0;
    bool escaped = false;
    for (; pos < logical.size(); ++pos) {
      char c = logical[pos];
      if (escaped) {
        escaped = false;
        continue;
      }
      if (c == '\\') {
        escaped = true;
        continue;
      }
      if (c == '=' || c == ':' || is_blank(c)) break;
    }
    std::string_view line(logical);
    auto key = line.substr(0, pos);
    auto rest = skip_blanks(line.substr(pos));
    if (!rest.empty() && (rest.front() == '=' || rest.front() == ':')) rest = skip_blanks(rest.substr(1));
    out.emplace_back(unescape(key), unescape(rest));
  }
  return out;
}

}  // namespace mala
