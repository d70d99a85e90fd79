#include "mala/common/http_request.h"

#include <fmt/format.h>

namespace mala {

namespace {

status bad(std::string why) {
  return status::error(error_code::invalid_request, std::move(why));
}

bool is_token_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_token_char(c)) return false;
  }
  return true;
}

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool equals_ignore_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view trim_whitespace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The next line of `rest` without its end ("\r\n" or "\n"); false when no line end is left.
bool next_line(std::string_view& rest, std::string_view& line) {
  const size_t nl = rest.find('\n');
  if (nl == std::string_view::npos) return false;
  line = rest.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  rest.remove_prefix(nl + 1);
  return true;
}

// Applies one "Connection" field's comma-separated options.
void apply_connection_options(std::string_view value, http_request_head& head) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view option = trim_whitespace(value.substr(0, comma));
    if (equals_ignore_case(option, "close")) head.keep_alive = false;
    if (equals_ignore_case(option, "keep-alive") && head.minor_version == 0) head.keep_alive = true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

}  // namespace

size_t http_head_end(std::string_view buffer) {
  // The empty line: "\n\n" or "\n\r\n" (a line end after a line end, with the CR optional).
  for (size_t i = buffer.find('\n'); i != std::string_view::npos; i = buffer.find('\n', i + 1)) {
    if (i + 1 < buffer.size() && buffer[i + 1] == '\n') return i + 2;
    if (i + 2 < buffer.size() && buffer[i + 1] == '\r' && buffer[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

result<http_request_head> parse_http_request_head(std::string_view text) {
  if (text.size() > http_max_head_bytes) {
    return bad(fmt::format("request head of {} bytes is over {}", text.size(), http_max_head_bytes));
  }
  std::string_view rest = text;
  std::string_view line;
  if (!next_line(rest, line)) return bad("no request line");

  http_request_head head;
  const size_t first_space = line.find(' ');
  const size_t last_space = line.rfind(' ');
  if (first_space == std::string_view::npos || first_space == last_space)
    return bad("malformed request line");
  const std::string_view method = line.substr(0, first_space);
  const std::string_view target = line.substr(first_space + 1, last_space - first_space - 1);
  const std::string_view version = line.substr(last_space + 1);
  if (!is_token(method) || method.size() > 16) return bad("malformed method");
  if (target.empty() || target.front() != '/') return bad("request target is not a path");
  for (char c : target) {
    if (c <= 0x20 || c >= 0x7f) return bad("request target holds a character outside visible ASCII");
  }
  if (version == "HTTP/1.1") {
    head.minor_version = 1;
    head.keep_alive = true;
  } else if (version == "HTTP/1.0") {
    head.minor_version = 0;
    head.keep_alive = false;
  } else {
    return bad("not HTTP/1.0 or HTTP/1.1");
  }
  head.method = method;
  const size_t question = target.find('?');
  head.path = target.substr(0, question);
  if (question != std::string_view::npos) head.query = target.substr(question + 1);

  size_t fields = 0;
  bool saw_length = false;
  while (true) {
    if (!next_line(rest, line)) return bad("header fields do not end with an empty line");
    if (line.empty()) break;
    if (++fields > http_max_header_fields)
      return bad(fmt::format("more than {} header fields", http_max_header_fields));
    if (line.front() == ' ' || line.front() == '\t') return bad("obsolete line folding");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return bad("header field without a colon");
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim_whitespace(line.substr(colon + 1));
    if (!is_token(name)) return bad("malformed header field name");
    for (char c : value) {
      if ((c < 0x20 && c != '\t') || c == 0x7f) return bad("control character in a header field value");
    }
    if (equals_ignore_case(name, "connection")) {
      apply_connection_options(value, head);
    } else if (equals_ignore_case(name, "content-length")) {
      if (value.empty() || value.size() > 18) return bad("malformed Content-Length");
      int64_t length = 0;
      for (char c : value) {
        if (c < '0' || c > '9') return bad("malformed Content-Length");
        length = length * 10 + (c - '0');
      }
      if (saw_length && length != head.content_length) return bad("conflicting Content-Length fields");
      saw_length = true;
      head.content_length = length;
    } else if (equals_ignore_case(name, "transfer-encoding")) {
      return bad("a request body (Transfer-Encoding) is not accepted");
    }
  }
  if (!rest.empty()) return bad("bytes after the request head");
  return head;
}

}  // namespace mala
