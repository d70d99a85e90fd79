#include <cerrno>
#include <cstring>
#include <string>

#include <unistd.h>

#include "mala/net/request_dispatcher.h"

namespace mala::net {

size_t dispatch_result::response_size() const {
  if (pieces.empty()) return response.size();
  size_t n = 0;
  for (const auto& piece : pieces) {
    if (const auto* bytes = std::get_if<std::vector<uint8_t>>(&piece)) {
      n += bytes->size();
    } else {
      n += std::get<file_range>(piece).size;
    }
  }
  return n;
}

status dispatch_result::materialize() {
  if (pieces.empty()) return status::success();
  std::vector<uint8_t> out;
  out.reserve(response_size());
  for (const auto& piece : pieces) {
    if (const auto* bytes = std::get_if<std::vector<uint8_t>>(&piece)) {
      out.insert(out.end(), bytes->begin(), bytes->end());
      continue;
    }
    const auto& range = std::get<file_range>(piece);
    const size_t start = out.size();
    out.resize(start + range.size);
    size_t done = 0;
    while (done < range.size) {
      const ssize_t n = ::pread(range.fd, out.data() + start + done, range.size - done,
                                static_cast<off_t>(range.offset + static_cast<int64_t>(done)));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        return status::error(error_code::kafka_storage_error,
                             "cannot read " + std::to_string(range.size) + " bytes at " +
                                 std::to_string(range.offset) + ": " + std::strerror(errno));
      }
      if (n == 0) {
        // The size prefix and the records length are already encoded: a short range cannot be sent.
        return status::error(error_code::kafka_storage_error,
                             "file range of " + std::to_string(range.size) + " bytes at " +
                                 std::to_string(range.offset) + " ends after " + std::to_string(done) +
                                 " bytes: the file was truncated since the range was taken");
      }
      done += static_cast<size_t>(n);
    }
  }
  response = std::move(out);
  pieces.clear();
  return status::success();
}

}  // namespace mala::net
