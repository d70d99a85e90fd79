#include "file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace mala::storage {

namespace {
io_fault_injector& fault_injector() {
  static io_fault_injector injector;
  return injector;
}
}  // namespace

void set_io_fault_injector(io_fault_injector injector) {
  fault_injector() = std::move(injector);
}

namespace detail {

status io_error(std::string_view what, const std::filesystem::path& path, int err) {
  return status::error(error_code::kafka_storage_error,
                       std::string(what) + " " + path.string() + ": " + std::strerror(err));
}

io_fault injected_fault(io_operation operation, const std::filesystem::path& path, size_t bytes) {
  const auto& injector = fault_injector();
  if (!injector) return {};
  return injector(operation, path, bytes);
}

namespace {

// Writes the part of a faulty write that the injector lets through, then fails with its errno.
template <typename Write>
bool fail_write(const io_fault& fault, size_t n, Write write) {
  if (size_t part = std::min(fault.written_before, n); part > 0) write(part);
  errno = fault.error;
  return false;
}

}  // namespace

bool write_all(int fd, std::string_view data, const std::filesystem::path& path) {
  if (auto fault = injected_fault(io_operation::write, path, data.size()); fault.error != 0) {
    return fail_write(fault, data.size(), [&](size_t part) { (void)::write(fd, data.data(), part); });
  }
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

int64_t pread_full(int fd, uint8_t* data, size_t n, int64_t position) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r =
        ::pread(fd, data + done, n - done, static_cast<off_t>(position + static_cast<int64_t>(done)));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return static_cast<int64_t>(done);
}

bool pwrite_all(int fd, const uint8_t* data, size_t n, int64_t position, const std::filesystem::path& path) {
  if (auto fault = injected_fault(io_operation::write, path, n); fault.error != 0) {
    return fail_write(fault, n,
                      [&](size_t part) { (void)::pwrite(fd, data, part, static_cast<off_t>(position)); });
  }
  size_t done = 0;
  while (done < n) {
    const ssize_t r =
        ::pwrite(fd, data + done, n - done, static_cast<off_t>(position + static_cast<int64_t>(done)));
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(r);
  }
  return true;
}

int truncate_file(int fd, int64_t length, const std::filesystem::path& path) {
  if (auto fault = injected_fault(io_operation::truncate, path); fault.error != 0) {
    errno = fault.error;
    return -1;
  }
  return ::ftruncate(fd, static_cast<off_t>(length));
}

int sync_file(int fd, const std::filesystem::path& path, bool data_only) {
  if (auto fault = injected_fault(io_operation::sync, path); fault.error != 0) {
    errno = fault.error;
    return -1;
  }
  return data_only ? ::fdatasync(fd) : ::fsync(fd);
}

int reserve_blocks(int fd, int64_t offset, int64_t length, const std::filesystem::path& path) {
  if (length <= 0) return 0;
  if (auto fault = injected_fault(io_operation::allocate, path); fault.error != 0) {
    errno = fault.error;
    return -1;
  }
  int r;
  do {
    r = ::fallocate(fd, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset), static_cast<off_t>(length));
  } while (r != 0 && errno == EINTR);
  // A file system without fallocate keeps the old behaviour (sparse pages filled on first write).
  if (r != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) return 0;
  return r;
}

status fsync_dir(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open directory", dir, errno);
  bool ok = sync_file(fd, dir) == 0;
  int err = errno;
  ::close(fd);
  if (!ok) return io_error("cannot fsync directory", dir, err);
  return status::success();
}

status sync_file_system(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open directory", dir, errno);
  int err = 0;
  if (auto fault = injected_fault(io_operation::sync, dir); fault.error != 0) {
    err = fault.error;
  } else if (::syncfs(fd) != 0) {
    err = errno;
  }
  ::close(fd);
  if (err != 0) return io_error("cannot sync the file system of", dir, err);
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

}  // namespace detail
}  // namespace mala::storage
