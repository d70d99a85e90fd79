#include "file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mala::storage::detail {

status io_error(std::string_view what, const std::filesystem::path& path, int err) {
  return status::error(error_code::kafka_storage_error,
                       std::string(what) + " " + path.string() + ": " + std::strerror(err));
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    auto n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

status fsync_dir(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open directory", dir, errno);
  bool ok = ::fsync(fd) == 0;
  int err = errno;
  ::close(fd);
  if (!ok) return io_error("cannot fsync directory", dir, err);
  return status::success();
}

result<std::optional<std::string>> read_file_if_exists(const std::filesystem::path& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>{};
    return io_error("cannot open", path, errno);
  }
  std::string contents;
  char buffer[4096];
  while (contents.size() < max_bytes) {
    auto n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return io_error("cannot read", path, err);
    }
    if (n == 0) break;
    contents.append(buffer, std::min(static_cast<size_t>(n), max_bytes - contents.size()));
  }
  ::close(fd);
  return std::optional<std::string>{std::move(contents)};
}

}  // namespace mala::storage::detail
