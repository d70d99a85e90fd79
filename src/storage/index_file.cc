#include "index_file.h"

#include "file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

namespace mala::storage::detail {

namespace {

// Closes a descriptor on every path out of a function.
class fd_guard {
 public:
  explicit fd_guard(int fd) : _fd(fd) {}
  ~fd_guard() {
    if (_fd >= 0) ::close(_fd);
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const { return _fd; }

 private:
  int _fd;
};

int64_t round_down(int64_t bytes, int32_t entry_size) {
  return bytes / entry_size * entry_size;
}

// Index pages are reserved this much at a time (a few thousand entries).
constexpr int64_t reserve_step = 64 * 1024;
constexpr int64_t page_size = 4096;

}  // namespace

index_file::~index_file() {
  unmap();
}

void index_file::unmap() {
  if (_data != nullptr) ::munmap(_data, static_cast<size_t>(_mapped_length));
  _data = nullptr;
  _mapped_length = 0;
}

status index_file::map(int fd, int64_t length) {
  unmap();
  _length = length;
  _max_entries = static_cast<int32_t>(length / _entry_size);
  // A shrunk file lost its blocks past the new end.
  set_reserved(std::min(reserved(), length), true);
  if (length == 0) return status::success();  // mmap cannot map nothing; an empty index needs no bytes
  void* p = ::mmap(nullptr, static_cast<size_t>(length), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    _length = 0;
    _max_entries = 0;
    return detail::io_error("cannot map index", _path, errno);
  }
  _data = static_cast<uint8_t*>(p);
  _mapped_length = length;
  // Lookups are binary searches and appends touch one page at a time: read-ahead on a fault would only zero
  // or read pages nobody asked for (it showed as several percent of append time on a freshly preallocated
  // index).
  (void)::madvise(_data, static_cast<size_t>(length), MADV_RANDOM);
  return status::success();
}

status index_file::open(const std::filesystem::path& path, int32_t entry_size, int32_t max_index_size,
                        bool preallocate) {
  _path = path.string();
  _entry_size = entry_size;
  _max_index_size = max_index_size;
  if (max_index_size < entry_size) {
    return status::error(error_code::invalid_config, "segment.index.bytes " + std::to_string(max_index_size) +
                                                         " is smaller than one index entry for " +
                                                         path.string());
  }
  bool created = true;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) {
    created = false;
    fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  }
  if (fd < 0) return detail::io_error("cannot open index", path, errno);
  fd_guard guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return detail::io_error("cannot stat index", path, errno);
  if (st.st_size > std::numeric_limits<int32_t>::max()) {
    return status::error(error_code::corrupt_message, "index " + path.string() + " is larger than 2 GiB (" +
                                                          std::to_string(st.st_size) + ")");
  }
  _misaligned_on_open = st.st_size % entry_size != 0;
  if (auto s = map(fd, st.st_size); !s.ok()) return s;

  // The entry count: after the last byte that is not zero. A trimmed index ends with its last entry; a
  // preallocated one left by a crash ends with zeros. Only entry 0 can be all zero ((relative offset 0,
  // position 0) or (timestamp 0, relative offset 0)), so a file of exactly one zero entry was trimmed to one
  // entry.
  const int64_t usable = round_down(_length, entry_size);
  int64_t end = usable;
  // Entries are written from the start, so they all lie before the file's first hole; the scan starts there.
  // Reading a hole through a shared mapping allocates a page on tmpfs, which raises SIGBUS when it is full
  // (a restart on a full disk), and costs memory anyway. Without SEEK_HOLE support the whole file counts.
  if (const off_t hole = ::lseek(fd, 0, SEEK_HOLE); hole >= 0 && hole < end) end = hole;
  while (end >= 8) {
    uint64_t word = 0;
    std::memcpy(&word, _data + end - 8, sizeof word);
    if (word != 0) break;
    end -= 8;
  }
  while (end > 0 && _data[end - 1] == 0) --end;
  if (end == 0) {
    _entries = usable == entry_size ? 1 : 0;
  } else {
    _entries = static_cast<int32_t>((end - 1) / entry_size + 1);
  }
  // Bytes holding entries were written, so they have blocks; the zeros after them may be sparse.
  set_reserved(int64_t{_entries} * entry_size, true);
  _device = st.st_dev;
  _inode = st.st_ino;

  if (created || preallocate) {
    int64_t target = std::max(round_down(max_index_size, entry_size), int64_t{_entries} * entry_size);
    if (target != _length) {
      unmap();
      if (detail::truncate_file(fd, target, path) != 0) {
        const int err = errno;
        (void)map(fd, _length);
        return detail::io_error("cannot resize index", path, err);
      }
      if (auto s = map(fd, target); !s.ok()) return s;
    }
  }
  return status::success();
}

// Raises the reserved count to `to`, unless the index moved to another generation meanwhile.
void index_file::raise_reserved(reservation_state& state, uint64_t generation, int64_t to) {
  uint64_t word = state.word.load();
  while ((word >> 32) == generation && static_cast<int64_t>(word & 0xffffffffu) < to &&
         !state.word.compare_exchange_weak(word, (generation << 32) | static_cast<uint64_t>(to))) {
  }
}

void index_file::set_reserved(int64_t bytes, bool new_generation) {
  uint64_t word = _reservation->word.load();
  for (;;) {
    const uint64_t generation = (word >> 32) + (new_generation ? 1 : 0);
    const uint64_t next = (generation << 32) | static_cast<uint64_t>(std::max<int64_t>(bytes, 0));
    if (_reservation->word.compare_exchange_weak(word, next)) return;
  }
}

status index_file::reserve(int32_t n) {
  const int64_t needed = std::min<int64_t>(int64_t{n} * _entry_size, _length);
  const int64_t reserved_now = reserved();
  if (needed <= reserved_now) return status::success();
  const int64_t from = reserved_now / page_size * page_size;
  const int64_t to = std::min(_length, (needed + reserve_step - 1) / reserve_step * reserve_step);
  int fd = ::open(_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return detail::io_error("cannot open index", _path, errno);
  fd_guard guard(fd);
  if (detail::reserve_blocks(fd, from, to - from, _path) != 0)
    return detail::io_error("cannot allocate space for index", _path, errno);
  // A job of reservation_ahead() may have counted more meanwhile: the count only grows here.
  raise_reserved(*_reservation, _reservation->word.load() >> 32, to);
  return status::success();
}

std::function<void()> index_file::reservation_ahead() {
  const int64_t reserved_now = reserved();
  if (reserved_now >= _length || reserved_now - int64_t{_entries} * _entry_size >= reserve_step / 2)
    return {};
  if (_reservation->job_pending.exchange(true)) return {};
  const uint64_t generation = _reservation->word.load() >> 32;
  const int64_t from = reserved_now / page_size * page_size;
  const int64_t to = std::min(_length, (reserved_now + reserve_step) / reserve_step * reserve_step);
  return [state = _reservation, path = _path, from, to, generation, device = _device, inode = _inode] {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      fd_guard guard(fd);
      struct stat st {};
      if (::fstat(fd, &st) == 0 && st.st_dev == device && st.st_ino == inode &&
          detail::reserve_blocks(fd, from, to - from, path) == 0) {
        raise_reserved(*state, generation, to);
      }
    }
    state->job_pending.store(false);
  };
}

void index_file::truncate_to_entries(int32_t n) {
  if (n < 0) n = 0;
  if (n >= _entries) return;
  std::memset(slot(n), 0, static_cast<size_t>(_entries - n) * static_cast<size_t>(_entry_size));
  _entries = n;
}

int64_t index_file::resized_length(int64_t bytes) const {
  return std::max(round_down(std::max<int64_t>(bytes, 0), _entry_size), int64_t{_entries} * _entry_size);
}

bool index_file::sized_for(int64_t bytes) const {
  return resized_length(bytes) == _length;
}

status index_file::resize(int64_t bytes) {
  const int64_t target = resized_length(bytes);
  if (target == _length) return status::success();
  int fd = ::open(_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return detail::io_error("cannot open index", _path, errno);
  fd_guard guard(fd);
  const int64_t old_length = _length;
  unmap();
  if (detail::truncate_file(fd, target, _path) != 0) {
    const int err = errno;
    (void)map(fd, old_length);
    return detail::io_error("cannot resize index", _path, err);
  }
  return map(fd, target);
}

int64_t index_file::trim_later() {
  _length = int64_t{_entries} * _entry_size;
  _max_entries = _entries;
  set_reserved(std::min(reserved(), _length), true);
  return _length;
}

status index_file::flush() const {
  if (_data != nullptr) {
    if (auto fault = detail::injected_fault(io_operation::sync, _path); fault.error != 0)
      return detail::io_error("cannot msync index", _path, fault.error);
    if (::msync(_data, static_cast<size_t>(_length), MS_SYNC) != 0)
      return detail::io_error("cannot msync index", _path, errno);
  }
  // The length changes on trim and resize; fsync makes it durable along with the entries.
  int fd = ::open(_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return detail::io_error("cannot open index", _path, errno);
  fd_guard guard(fd);
  if (detail::sync_file(fd, _path) != 0) return detail::io_error("cannot fsync index", _path, errno);
  return status::success();
}

status index_file::rename_to(const std::filesystem::path& path) {
  if (::rename(_path.c_str(), path.c_str()) != 0)
    return detail::io_error("cannot rename index", _path, errno);
  _path = path.string();
  return status::success();
}

status index_file::close_and_delete() {
  unmap();
  _length = 0;
  _entries = 0;
  _max_entries = 0;
  if (::unlink(_path.c_str()) != 0 && errno != ENOENT)
    return detail::io_error("cannot delete index", _path, errno);
  return status::success();
}

}  // namespace mala::storage::detail
