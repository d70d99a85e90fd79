// The head of an HTTP/1.x request (RFC 9112), as the metrics and health endpoint reads it: request line and
// header fields, bounded before anything is kept. Parsing only; net/http_server.h does the I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "mala/common/result.h"

namespace mala {

// The longest request head accepted (request line and every header field); a longer one is refused unread.
inline constexpr size_t http_max_head_bytes = 8192;
// The most header fields accepted.
inline constexpr size_t http_max_header_fields = 64;

struct http_request_head {
  std::string method;     // "GET", "HEAD", ...: a token, as sent
  std::string path;       // the origin-form target without its query: "/metrics"
  std::string query;      // after '?', without it; may be empty
  int minor_version = 1;  // HTTP/1.<minor_version>
  // HTTP/1.1 keeps the connection open unless "Connection: close"; HTTP/1.0 closes unless "keep-alive".
  bool keep_alive = true;
  int64_t content_length = 0;  // a request body this server does not read: non-zero closes after answering
};

// `head` is the request up to and including the empty line that ends its header fields ("\r\n\r\n"; a bare
// "\n" line end is accepted, as RFC 9112 allows recipients to). invalid_request, with why, when it is not a
// well-formed HTTP/1.0 or 1.1 request head within the bounds above.
result<http_request_head> parse_http_request_head(std::string_view head);

// Where the request head ends in `buffer` (the offset just past its empty line), or npos when it has not
// ended yet.
size_t http_head_end(std::string_view buffer);

}  // namespace mala
