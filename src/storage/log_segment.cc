#include "mala/storage/log_segment.h"

#include "file_io.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>

#include "mala/common/assert.h"
#include "mala/common/logging.h"
#include "mala/protocol/record_batch.h"
#include "mala/storage/segment_files.h"

namespace mala::storage {

namespace {

namespace fs = std::filesystem;
namespace layout = protocol::batch_layout;
using protocol::record_batch_header;

constexpr int64_t max_relative_offset = std::numeric_limits<int32_t>::max();
constexpr int64_t max_segment_position = std::numeric_limits<int32_t>::max();
// The smallest batchLength a v2 batch can have (its header minus the log overhead).
constexpr int32_t min_batch_length = static_cast<int32_t>(layout::header_size - layout::log_overhead);
// Header scans read this much at a time: a few index intervals of small batches per system call.
constexpr size_t scan_chunk = 16 * 1024;
// Recovery reads whole batches, this much at a time (more when a batch is larger).
constexpr size_t recovery_chunk = 1024 * 1024;

status invariant_error(const std::string& what, const fs::path& path) {
  return status::error(error_code::unknown_server_error, what + " (segment " + path.string() + ")");
}

int64_t system_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

status unlink_if_exists(const fs::path& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return detail::io_error("cannot delete", path, errno);
  return status::success();
}

fs::path with_suffix(fs::path path, std::string_view suffix) {
  path += suffix;
  return path;
}

struct located_batch {
  int64_t position = 0;
  record_batch_header header;
};

// Walks batch headers forward through [position, end) of a .log without reading the records: framing only
// (magic, a batchLength that fits). Stops at the end, at a batch cut short or implausible, or on a read
// error.
class header_scanner {
 public:
  header_scanner(int fd, int64_t position, int64_t end) : _fd(fd), _position(position), _end(end) {}

  std::optional<located_batch> next() {
    if (_end - _position < static_cast<int64_t>(layout::header_size)) return std::nullopt;
    const auto header_bytes = static_cast<int64_t>(layout::header_size);
    if (_position < _buffer_start || _position + header_bytes > _buffer_start + _buffer_length) {
      const auto want = static_cast<size_t>(std::min<int64_t>(scan_chunk, _end - _position));
      const int64_t got = detail::pread_full(_fd, _buffer, want, _position);
      if (got < header_bytes) return std::nullopt;
      _buffer_start = _position;
      _buffer_length = got;
    }
    const auto header = protocol::parse_batch_header(
        std::span<const uint8_t>(_buffer + (_position - _buffer_start), layout::header_size));
    if (!header || header->magic != protocol::current_magic || header->batch_length < min_batch_length ||
        header->size_in_bytes() > _end - _position) {
      return std::nullopt;
    }
    located_batch found{_position, *header};
    _position += header->size_in_bytes();
    return found;
  }

 private:
  int _fd;
  int64_t _position;
  int64_t _end;
  uint8_t _buffer[scan_chunk];
  int64_t _buffer_start = 0;
  int64_t _buffer_length = 0;
};

// The .log descriptors a thread keeps open, least recently used last. A segment opens its file when it is
// used and keeps it until the node has more open than its budget (half the open-files limit): an idle
// partition holds no descriptor, so a node serves more partitions than its open-files limit (20,000
// partitions would otherwise need 20,000 descriptors at once). The budget is one count for all threads; a
// thread over it closes its own least recently used files (a shard closes what it opened; a thread that only
// passes by, as the shutdown's, keeps hardly any). Handles already given out (file_slice, flush work) keep
// their descriptor. Only the thread that uses a segment moves or evicts its entry (a segment is used by its
// owning shard); each list has a mutex, uncontended but for segments closed from another thread (shutdown).
struct open_file_list;
struct open_file_entry {
  open_file_entry* prev = nullptr;
  open_file_entry* next = nullptr;
  open_file_list* list = nullptr;
  std::shared_ptr<segment_file>* file = nullptr;  // the segment's handle, reset on eviction
  int* carried_sync_error = nullptr;              // where a failed background fsync is remembered
};

size_t open_file_budget() {
  rlimit limit{};
  size_t soft = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) soft = limit.rlim_cur;
  // Half the limit for log segments; sockets, indexes being mapped or synced, checkpoints and the metadata
  // log take the rest.
  return std::max<size_t>(64, soft / 2);
}

// The .log descriptors open in all lists, and the most there may be.
std::atomic<size_t> open_file_count{0};
const size_t open_file_limit = open_file_budget();

struct open_file_list {
  std::mutex mutex;
  open_file_entry head;
  size_t count = 0;

  open_file_list() { head.prev = head.next = &head; }
  // A thread that ends closes the files it kept open (its segments may outlive it, used by other threads,
  // as at shutdown: they open them again, in their own lists, within the budget).
  ~open_file_list() {
    std::lock_guard guard(mutex);
    while (head.next != &head) close_locked(*head.next);
  }
  static open_file_list& of_this_thread() {
    thread_local open_file_list list;
    return list;
  }
  void unlink_locked(open_file_entry& e) {
    e.prev->next = e.next;
    e.next->prev = e.prev;
    e.prev = e.next = nullptr;
    e.list = nullptr;
    --count;
    open_file_count.fetch_sub(1, std::memory_order_relaxed);
  }
  void unlink(open_file_entry& e) {
    std::lock_guard guard(mutex);
    unlink_locked(e);
  }
  void push_front_locked(open_file_entry& e) {
    e.next = head.next;
    e.prev = &head;
    head.next->prev = &e;
    head.next = &e;
    e.list = this;
    ++count;
    open_file_count.fetch_add(1, std::memory_order_relaxed);
  }
  // `e` (already open) becomes the most recently used; a new entry may close others of this list while the
  // node is over its budget (never `e`'s).
  void touch(open_file_entry& e) {
    std::lock_guard guard(mutex);
    if (e.list == this) {
      if (head.next == &e) return;
      unlink_locked(e);
      push_front_locked(e);
      return;
    }
    push_front_locked(e);
    while (open_file_count.load(std::memory_order_relaxed) > open_file_limit && head.prev != &head &&
           head.prev != &e) {
      close_locked(*head.prev);
    }
  }
  // Closes the entry's file (handles given out keep theirs) and takes it out of the list.
  void close_locked(open_file_entry& e) {
    unlink_locked(e);
    if (*e.file && (*e.file)->sync_error() != 0) *e.carried_sync_error = (*e.file)->sync_error();
    e.file->reset();
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// segment_file

segment_file::~segment_file() {
  if (_fd >= 0) ::close(_fd);
}

result<std::vector<uint8_t>> segment_file::read(int64_t position, int32_t n) const {
  if (position < 0 || n < 0) {
    return status::error(error_code::unknown_server_error, "bad read of " + std::to_string(n) + " bytes at " +
                                                               std::to_string(position) + " from " + _path);
  }
  std::vector<uint8_t> data(static_cast<size_t>(n));
  const int64_t got = detail::pread_full(_fd, data.data(), data.size(), position);
  if (got < 0) return detail::io_error("cannot read", _path, errno);
  data.resize(static_cast<size_t>(got));
  return data;
}

std::shared_ptr<const segment_file> segment_file::by_path(std::filesystem::path path) {
  return std::shared_ptr<const segment_file>(new segment_file(-1, path.string()));
}

result<std::shared_ptr<const segment_file>> segment_file::open_for_reading(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return detail::io_error("cannot open segment", path, errno);
  return std::shared_ptr<const segment_file>(new segment_file(fd, path));
}

std::shared_ptr<const segment_file> segment_file::by_writer(std::filesystem::path path,
                                                            std::function<status()> write) {
  auto file = std::shared_ptr<segment_file>(new segment_file(-1, path.string()));
  file->_write = std::move(write);
  return file;
}

status segment_file::sync() const {
  if (_write) {
    auto st = _write();
    if (!st.ok()) {
      int none = 0;
      _sync_error.compare_exchange_strong(none, EIO);
    }
    return st;
  }
  if (_fd < 0) {
    const int fd = ::open(_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return status::success();  // deleted meanwhile: nothing to make durable
      return detail::io_error("cannot open", _path, errno);
    }
    const bool ok = detail::sync_file(fd, _path) == 0;
    const int err = errno;
    ::close(fd);
    if (!ok) {
      int none = 0;
      _sync_error.compare_exchange_strong(none, err);
      return detail::io_error("cannot fsync", _path, err);
    }
    return status::success();
  }
  // fdatasync covers the data and the file length (what a reader needs); the modification time can stay
  // behind.
  if (detail::sync_file(_fd, _path, /*data_only=*/true) != 0) {
    const int err = errno;
    // Once an fsync failed, the kernel may have dropped the dirty pages it could not write: later syncs can
    // succeed without the data being on disk. The error sticks so the owner takes the log offline.
    int none = 0;
    _sync_error.compare_exchange_strong(none, err);
    return detail::io_error("cannot fsync", _path, err);
  }
  return status::success();
}

// ---------------------------------------------------------------------------------------------------------------
// log_segment

struct log_segment::impl {
  int64_t base_offset = 0;
  log_config config;
  std::function<int64_t()> clock;
  // The open .log (null while closed: see open_file_list); log_path is its current name.
  mutable std::shared_ptr<segment_file> file;
  std::string log_path;  // paths as strings: a std::filesystem::path allocates each component apart
  mutable open_file_entry lru;
  mutable int carried_sync_error = 0;
  std::unique_ptr<offset_index> offsets;
  std::unique_ptr<time_index> times;
  std::unique_ptr<transaction_index> txns;  // <base>.txnindex
  // Work on these files left to the file worker, oldest first (renames of an adopted standby, index trims):
  // run here first by every use of a file by name (settle()).
  mutable std::vector<std::shared_ptr<deferred_file_work>> deferred;
  // The cut of truncate_to_later(), until an append made sure it ran.
  std::shared_ptr<deferred_file_work> cut;

  int64_t size = 0;
  int64_t next_offset = 0;
  timestamp_offset max_timestamp{-1, -1};  // largest batch max timestamp and its offset (Kafka's UNKNOWN)
  int64_t rolling_timestamp = -1;          // the first batch's max timestamp (Kafka's rollingBasedTimestamp)
  int64_t created_ms = 0;
  int64_t bytes_since_last_index_entry = 0;
  bool index_files_created = false;
  bool closed = false;

  impl() {
    lru.file = &file;
    lru.carried_sync_error = &carried_sync_error;
  }
  ~impl() {
    if (lru.list) lru.list->unlink(lru);
  }
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  int64_t now() const { return clock ? clock() : system_clock_ms(); }

  // Runs the deferred work the file worker has not run yet (waiting for a job it is running): the names
  // this segment uses are the final ones from then on. The first failure is returned.
  status settle() const {
    status first;
    for (auto& work : deferred) {
      // finish(), not run() and result_if_done(): a failure must not be missed while another thread that
      // is running the same work holds its lock.
      if (auto result = work->finish(); !result.ok() && first.ok()) first = result;
    }
    deferred.clear();
    return first;
  }

  // The .log handle, opened again if it was closed (a descriptor of -1 when that fails: the read or write
  // using it fails with EBADF and reports the I/O error).
  std::shared_ptr<segment_file> open_file() const {
    auto& list = open_file_list::of_this_thread();
    if (!file) {
      if (!deferred.empty()) {
        if (auto st = settle(); !st.ok()) {
          // The name may not be this segment's file (a swap whose renames stopped half-way): nothing is
          // opened, and the read or write using the handle fails with EBADF and reports the I/O error.
          subsystem_logger("storage")->error("deferred file work of {} failed: {}", log_path, st.message);
          return std::shared_ptr<segment_file>(new segment_file(-1, log_path));
        }
      }
      const int fd = ::open(log_path.c_str(), O_RDWR | O_CLOEXEC);
      if (fd < 0) return std::shared_ptr<segment_file>(new segment_file(-1, log_path));
      file = std::shared_ptr<segment_file>(new segment_file(fd, log_path));
      if (carried_sync_error != 0) file->_sync_error.store(carried_sync_error, std::memory_order_relaxed);
    }
    // An entry in another thread's list (a segment passed to another thread, as at shutdown) stays there.
    if (lru.list == &list || lru.list == nullptr) list.touch(lru);
    return file;
  }
  int fd() const { return open_file()->fd(); }

  // The first batch whose last offset is >= offset: from the offset index entry at or below it, forward. An
  // entry that does not point at a batch header (a corrupt index) falls back to a scan from the start.
  std::optional<located_batch> locate(int64_t offset) const {
    if (size == 0) return std::nullopt;
    int64_t start = offsets->lookup(offset).position;
    if (start < 0 || start >= size) start = 0;
    for (;;) {
      header_scanner scanner(fd(), start, size);
      bool first = true;
      while (auto batch = scanner.next()) {
        if (batch->header.last_offset() >= offset) return batch;
        first = false;
      }
      if (!first || start == 0) return std::nullopt;
      start = 0;
    }
  }

  // Scans [start, size) for the last batch and the largest timestamp after the time index's last entry.
  bool scan_tail(int64_t start, timestamp_offset from_index) {
    header_scanner scanner(fd(), start, size);
    timestamp_offset largest = from_index;
    std::optional<int64_t> next;
    while (auto batch = scanner.next()) {
      if (batch->header.max_timestamp > largest.timestamp) {
        largest = {batch->header.max_timestamp, batch->header.last_offset()};
      }
      next = batch->header.next_offset();
    }
    if (!next) return false;
    next_offset = *next;
    max_timestamp = largest;
    return true;
  }

  // Derives what appends need from the indexes and the .log tail (Kafka's readNextOffset and
  // readLargestTimestamp): the scan starts at the offset index entry below the time index's last entry, so
  // after a clean close it covers a few batches.
  void load_tail() {
    next_offset = base_offset;
    max_timestamp = {-1, -1};
    const timestamp_offset from_index = times->last_entry().value_or(timestamp_offset{-1, -1});
    const int64_t start = offsets->lookup(from_index.offset).position;
    if (size > 0 && !scan_tail(start < size ? start : 0, from_index) && start != 0) scan_tail(0, from_index);
    const auto last_entry = offsets->last_entry();
    bytes_since_last_index_entry = size - (last_entry ? last_entry->position : 0);
  }

  void load_first_batch_timestamp() {
    rolling_timestamp = -1;
    header_scanner scanner(fd(), 0, size);
    if (auto first = scanner.next()) rolling_timestamp = first->header.max_timestamp;
  }

  // Kafka's AbstractIndex.reset() for both indexes: empty, at full size (the segment is or becomes active).
  status reset_indexes() {
    offsets->truncate_all();
    times->truncate_all();
    if (auto s = offsets->resize(config.segment_index_bytes); !s.ok()) return s;
    return times->resize(config.segment_index_bytes);
  }

  status trim_indexes_with_final_entry() {
    // The entry for the largest timestamp may be missing (entries are sparse); a rolled or closed segment
    // gets it so that time-based retention and ListOffsets see the segment's true maximum.
    if (max_timestamp.timestamp >= 0) {
      if (auto s = times->maybe_append(max_timestamp.timestamp, max_timestamp.offset, true); !s.ok())
        return s;
    }
    if (auto s = offsets->trim_to_entries(); !s.ok()) return s;
    return times->trim_to_entries();
  }
};

result<std::unique_ptr<log_segment>> log_segment::open(const fs::path& dir, int64_t base_offset,
                                                       const log_config& config, bool create,
                                                       std::function<int64_t()> clock_ms,
                                                       std::string_view name_suffix) {
  std::unique_ptr<log_segment> segment(new log_segment());
  segment->_impl = std::make_unique<impl>();
  impl& s = *segment->_impl;
  s.base_offset = base_offset;
  s.config = config;
  s.clock = std::move(clock_ms);
  s.next_offset = base_offset;

  const fs::path log_path = with_suffix(segment_file_path(dir, base_offset, log_suffix), name_suffix);
  const fs::path offset_path =
      with_suffix(segment_file_path(dir, base_offset, offset_index_suffix), name_suffix);
  const fs::path time_path = with_suffix(segment_file_path(dir, base_offset, time_index_suffix), name_suffix);
  s.txns = std::make_unique<transaction_index>(
      with_suffix(segment_file_path(dir, base_offset, txn_index_suffix), name_suffix).string(), base_offset);

  const int flags = create ? (O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC) : (O_RDWR | O_CLOEXEC);
  const int fd = ::open(log_path.c_str(), flags, 0644);
  if (fd < 0) return detail::io_error("cannot open segment", log_path, errno);
  s.log_path = log_path.string();
  s.file = std::shared_ptr<segment_file>(new segment_file(fd, s.log_path));
  struct stat st {};
  if (::fstat(fd, &st) != 0) return detail::io_error("cannot stat segment", log_path, errno);
  if (st.st_size > max_segment_position) {
    return status::error(error_code::corrupt_message,
                         "segment " + log_path.string() + " is larger than 2 GiB (" +
                             std::to_string(st.st_size) + " bytes); positions are 32-bit");
  }
  s.size = st.st_size;

  if (create) {
    // Stale index files of a segment that is being recreated would otherwise be read back as entries.
    for (const auto& p : {offset_path, time_path}) {
      if (auto u = unlink_if_exists(p); !u.ok()) return u;
    }
    // Kafka creates the transaction index lazily; an empty file is what it holds without aborted
    // transactions.
    const int txn_fd = ::open(s.txns->path().c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (txn_fd < 0) return detail::io_error("cannot create", s.txns->path(), errno);
    ::close(txn_fd);
    s.txns->mark_empty();
  } else {
    std::error_code ec;
    s.index_files_created = !fs::exists(offset_path, ec) || !fs::exists(time_path, ec);
    // Read now, where the log is opened (off the shards), so that the shard serving read_committed fetches
    // and writing abort markers reads no file. A file that cannot be read is tried again at its first use,
    // which reports the error (KAFKA_STORAGE_ERROR), as before.
    if (auto loaded = s.txns->load(); !loaded.ok()) {
      subsystem_logger("storage")->warn("cannot read {}: {}", s.txns->path(), loaded.message);
    }
  }

  auto offsets = offset_index::open(offset_path, base_offset, config.segment_index_bytes, create);
  if (!offsets) return offsets.error();
  s.offsets = std::move(offsets.value());
  auto times = time_index::open(time_path, base_offset, config.segment_index_bytes, create);
  if (!times) return times.error();
  s.times = std::move(times.value());

  s.load_first_batch_timestamp();
  s.load_tail();
  if (s.size == 0) {
    s.created_ms = s.now();
  } else {
    s.created_ms = int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1'000'000;
  }
  // Loading runs on start-up threads: the descriptor is opened again by the thread that uses the segment.
  if (s.lru.list) s.lru.list->unlink(s.lru);
  s.file.reset();
  return segment;
}

log_segment::~log_segment() = default;

int64_t log_segment::base_offset() const {
  return _impl->base_offset;
}
int64_t log_segment::size() const {
  return _impl->size;
}
int64_t log_segment::next_offset() const {
  return _impl->next_offset;
}
int64_t log_segment::max_timestamp() const {
  return _impl->max_timestamp.timestamp;
}
int64_t log_segment::offset_of_max_timestamp() const {
  return _impl->max_timestamp.offset;
}
int64_t log_segment::created_ms() const {
  return _impl->created_ms;
}
int64_t log_segment::first_batch_timestamp() const {
  return _impl->rolling_timestamp;
}
bool log_segment::index_files_created() const {
  return _impl->index_files_created;
}
std::shared_ptr<const segment_file> log_segment::file() const {
  return _impl->open_file();
}
std::shared_ptr<const segment_file> log_segment::file_if_open() const {
  return _impl->file;
}
const std::string& log_segment::log_path() const {
  return _impl->log_path;
}
txn_index_source log_segment::txn_source() const {
  return _impl->txns->source();
}
const std::string& log_segment::txn_index_path() const {
  return _impl->txns->path();
}
std::vector<std::shared_ptr<deferred_file_work>> log_segment::pending_file_work() const {
  return _impl->deferred;
}
int32_t log_segment::offset_index_entries() const {
  return _impl->offsets->entries();
}
int32_t log_segment::time_index_entries() const {
  return _impl->times->entries();
}
int log_segment::sync_error() const {
  const impl& s = *_impl;
  if (s.file && s.file->sync_error() != 0) return s.file->sync_error();
  return s.carried_sync_error;
}
transaction_index& log_segment::txns() {
  if (!_impl->deferred.empty()) (void)_impl->settle();  // their users need the files by name
  return *_impl->txns;
}

offset_index& log_segment::offsets() {
  if (!_impl->deferred.empty()) (void)_impl->settle();  // their users need the files by name
  return *_impl->offsets;
}
time_index& log_segment::times() {
  if (!_impl->deferred.empty()) (void)_impl->settle();  // their users need the files by name
  return *_impl->times;
}
void log_segment::update_config(const log_config& config) {
  _impl->config = config;
}

status log_segment::append(std::span<const uint8_t> batch, const appended_batch& info) {
  impl& s = *_impl;
  const fs::path path = s.log_path;
  if (s.closed) return invariant_error("append to a closed segment", path);
  if (batch.empty()) return status::success();
  const int64_t lowest_base = s.size == 0 ? s.base_offset : s.next_offset;
  if (info.base_offset < lowest_base || info.last_offset < info.base_offset) {
    return invariant_error("append of offsets " + std::to_string(info.base_offset) + ".." +
                               std::to_string(info.last_offset) + " below the segment's next offset " +
                               std::to_string(lowest_base),
                           path);
  }
  if (info.last_offset - s.base_offset > max_relative_offset) {
    return invariant_error("offset " + std::to_string(info.last_offset) +
                               " does not fit the 32-bit relative range of the segment",
                           path);
  }
  if (s.size + static_cast<int64_t>(batch.size()) > max_segment_position) {
    return invariant_error("append past 2 GiB", path);
  }

  // The index entries this batch will add get their disk blocks first: once the data is written, the append
  // must not fail half-way.
  if (s.cut) {
    // The truncation's cut first, here if the worker has not got to it: it must not cut this batch.
    auto cut = std::move(s.cut);
    if (auto r = cut->finish(); !r.ok()) return r;
  }
  const bool index_due = s.bytes_since_last_index_entry > s.config.index_interval_bytes;
  if (index_due && !s.deferred.empty() &&
      (!s.offsets->next_entry_reserved() || !s.times->next_entry_reserved())) {
    if (auto r = s.settle(); !r.ok()) return r;
  }
  if (index_due) {
    if (!s.offsets->is_full()) {
      if (auto r = s.offsets->reserve_next(); !r.ok()) return r;
    }
    if (!s.times->is_full()) {
      if (auto r = s.times->reserve_next(); !r.ok()) return r;
    }
  }

  const int64_t position = s.size;
  if (!detail::pwrite_all(s.fd(), batch.data(), batch.size(), position, path)) {
    const int err = errno;
    // Leave no torn batch behind: the file is cut back to where the batch started. If even that fails, size
    // stays at `position`, so nothing of the torn batch is read, and the owner takes the log offline (the
    // next start's recovery scan cuts the tail).
    if (detail::truncate_file(s.fd(), position, path) != 0) {
      const int cut_err = errno;
      subsystem_logger("storage")->error("cannot cut a failed append back to {} bytes in {}: {}", position,
                                         path.string(), std::strerror(cut_err));
    }
    return detail::io_error("cannot append to", path, err);
  }
  if (position == 0) {
    s.rolling_timestamp = info.max_timestamp;
    s.created_ms = s.now();
  }
  s.size += static_cast<int64_t>(batch.size());
  s.next_offset = info.last_offset + 1;
  if (info.max_timestamp > s.max_timestamp.timestamp) {
    s.max_timestamp = {info.max_timestamp, info.offset_of_max_timestamp};
  }
  // Kafka's rule: index the batch that starts after more than index.interval.bytes were written since the
  // last entry; the entry holds the batch's last offset and its position.
  if (index_due) {
    if (!s.offsets->is_full()) {
      if (auto r = s.offsets->append(info.last_offset, position); !r.ok()) return r;
    }
    if (!s.times->is_full()) {
      if (auto r = s.times->maybe_append(s.max_timestamp.timestamp, s.max_timestamp.offset); !r.ok())
        return r;
    }
    s.bytes_since_last_index_entry = 0;
  }
  s.bytes_since_last_index_entry += static_cast<int64_t>(batch.size());
  return status::success();
}

std::optional<file_slice> log_segment::read(int64_t start_offset, int32_t max_bytes, int64_t max_offset,
                                            int64_t max_position, bool min_one_batch) const {
  const impl& s = *_impl;
  const auto first = s.locate(start_offset);
  if (!first) return std::nullopt;
  file_slice slice{s.open_file(), first->position, 0};
  const int64_t limit = std::max(max_bytes, 0);
  int64_t total = 0;
  header_scanner scanner(s.fd(), first->position, s.size);
  while (auto batch = scanner.next()) {
    if (batch->header.base_offset >= max_offset || batch->position >= max_position) break;
    const int64_t batch_size = batch->header.size_in_bytes();
    if (total + batch_size > limit && !(total == 0 && min_one_batch)) break;
    total += batch_size;
  }
  slice.size = static_cast<int32_t>(total);
  return slice;
}

std::optional<offset_position> log_segment::find_batch(int64_t offset) const {
  const auto batch = _impl->locate(offset);
  if (!batch) return std::nullopt;
  return offset_position{batch->header.base_offset, batch->position};
}

std::optional<timestamp_offset> log_segment::find_offset_by_timestamp(int64_t timestamp) const {
  const impl& s = *_impl;
  if (s.size == 0) return std::nullopt;
  // Every batch up to the time index entry at or below the target has a max timestamp <= that entry's, so the
  // first batch reaching the target is at or after the batch holding the entry's offset.
  const timestamp_offset below = s.times->lookup(timestamp);
  int64_t start = s.offsets->lookup(below.offset).position;
  if (start < 0 || start >= s.size) start = 0;
  header_scanner scanner(s.fd(), start, s.size);
  while (auto batch = scanner.next()) {
    if (batch->header.max_timestamp >= timestamp) {
      return timestamp_offset{batch->header.max_timestamp, batch->header.base_offset};
    }
  }
  return std::nullopt;
}

result<int64_t> log_segment::truncate_to(int64_t offset) {
  impl& s = *_impl;
  if (auto r = s.settle(); !r.ok()) return r;
  const auto cut = s.locate(offset);
  int64_t removed = 0;
  if (cut) {
    // Entries of the batch being cut go too, even those for its offsets below `offset`.
    const int64_t cut_offset = std::min(offset, cut->header.base_offset);
    s.offsets->truncate_to(cut_offset);
    s.times->truncate_to(cut_offset);
    if (detail::truncate_file(s.fd(), cut->position, s.log_path) != 0)
      return detail::io_error("cannot truncate", s.log_path, errno);
    removed = s.size - cut->position;
    s.size = cut->position;
    // Kafka's LogSegment.truncateTo: aborted transactions whose marker is cut go with it.
    if (auto r = s.txns->truncate_to(cut_offset); !r.ok()) return r;
  }
  // The truncated segment becomes the active one (Kafka resizes its indexes here too).
  if (auto r = s.offsets->resize(s.config.segment_index_bytes); !r.ok()) return r;
  if (auto r = s.times->resize(s.config.segment_index_bytes); !r.ok()) return r;
  if (s.size == 0) {
    s.created_ms = s.now();
    s.rolling_timestamp = -1;
  }
  s.load_tail();
  return removed;
}

result<std::shared_ptr<deferred_file_work>> log_segment::truncate_to_later(int64_t offset) {
  impl& s = *_impl;
  if (s.closed || !s.offsets->sized_for(s.config.segment_index_bytes) ||
      !s.times->sized_for(s.config.segment_index_bytes) || (!s.txns->loaded() && !s.deferred.empty())) {
    return std::shared_ptr<deferred_file_work>();
  }
  if (auto r = s.txns->load(); !r.ok()) return r;
  const auto cut = s.locate(offset);
  if (!cut) return std::shared_ptr<deferred_file_work>();
  // Entries of the batch being cut go too, even those for its offsets below `offset`.
  const int64_t cut_offset = std::min(offset, cut->header.base_offset);
  s.offsets->truncate_to(cut_offset);
  s.times->truncate_to(cut_offset);
  auto work = std::make_shared<deferred_file_work>();
  work->_before = s.deferred;  // renames of an adopted standby, .txnindex writes: before the cut
  work->_trims.push_back({s.log_path, cut->position, true});
  // Kafka's LogSegment.truncateTo: aborted transactions whose marker is cut go with it.
  if (auto txn_length = s.txns->truncate_to_later(cut_offset))
    work->_trims.push_back({s.txns->path(), *txn_length});
  s.size = cut->position;
  if (s.size == 0) {
    s.created_ms = s.now();
    s.rolling_timestamp = -1;
  }
  s.load_tail();
  s.deferred.push_back(work);
  s.cut = work;
  return work;
}

bool log_segment::cut_pending() const {
  return _impl->cut && !_impl->cut->result_if_done();
}

status log_segment::check_indexes() const {
  const impl& s = *_impl;
  if (auto st = s.offsets->sanity_check(); !st.ok()) return st;
  if (auto st = s.times->sanity_check(); !st.ok()) return st;
  if (auto last = s.offsets->last_entry();
      last && (last->offset >= s.next_offset || last->position >= s.size)) {
    return status::error(error_code::corrupt_message,
                         "index " + s.offsets->path() + " is corrupt: its last entry (offset " +
                             std::to_string(last->offset) + ", position " + std::to_string(last->position) +
                             ") is past the segment's data (next offset " + std::to_string(s.next_offset) +
                             ", size " + std::to_string(s.size) + ")");
  }
  if (auto last = s.times->last_entry(); last && last->offset >= s.next_offset) {
    return status::error(error_code::corrupt_message,
                         "time index " + s.times->path() + " is corrupt: its last entry (offset " +
                             std::to_string(last->offset) + ") is past the segment's next offset " +
                             std::to_string(s.next_offset));
  }
  return status::success();
}

result<segment_recovery> log_segment::recover() {
  impl& s = *_impl;
  if (auto r = s.settle(); !r.ok()) return r;
  const fs::path path = s.log_path;
  if (auto r = s.reset_indexes(); !r.ok()) return r;

  std::vector<uint8_t> buffer;
  int64_t buffer_start = 0;
  int64_t buffer_length = 0;
  int read_error = 0;
  // The bytes [position, position + n) of the .log, from the buffer or a fresh read; nullopt past the end or
  // on a read error (read_error set).
  auto bytes = [&](int64_t position, int64_t n) -> std::optional<std::span<const uint8_t>> {
    if (position < buffer_start || position + n > buffer_start + buffer_length) {
      const auto want =
          static_cast<size_t>(std::min<int64_t>(std::max<int64_t>(n, recovery_chunk), s.size - position));
      if (buffer.size() < want) buffer.resize(want);
      const int64_t got = detail::pread_full(s.fd(), buffer.data(), want, position);
      if (got < 0) {
        read_error = errno;
        return std::nullopt;
      }
      buffer_start = position;
      buffer_length = got;
      if (got < n) return std::nullopt;
    }
    return std::span<const uint8_t>(buffer.data() + (position - buffer_start), static_cast<size_t>(n));
  };

  segment_recovery report;
  int64_t valid = 0;
  int64_t last_index_position = 0;
  int64_t expected_base = s.base_offset;
  timestamp_offset largest{-1, -1};
  int64_t first_timestamp = -1;
  std::string stop_reason;
  while (valid < s.size) {
    const int64_t remaining = s.size - valid;
    if (remaining < static_cast<int64_t>(layout::header_size)) {
      stop_reason = "a batch cut short";
      break;
    }
    const auto head = bytes(valid, static_cast<int64_t>(layout::header_size));
    if (!head) break;
    const auto header = protocol::parse_batch_header(*head);
    if (!header || header->batch_length < min_batch_length) {
      stop_reason = "a batch length below the header size";
      break;
    }
    if (header->size_in_bytes() > remaining) {
      stop_reason = "a batch cut short";
      break;
    }
    const auto whole = bytes(valid, header->size_in_bytes());
    if (!whole) break;
    if (const auto verdict = protocol::validate_batch(*whole); verdict != protocol::batch_status::ok) {
      stop_reason = std::string(protocol::batch_status_name(verdict));
      break;
    }
    // The base offset is outside the CRC: a flipped bit there shows only as offsets going backwards or out of
    // the segment's range.
    if (header->base_offset < expected_base || header->last_offset_delta < 0 ||
        header->last_offset() - s.base_offset > max_relative_offset) {
      stop_reason = "offsets " + std::to_string(header->base_offset) + ".." +
                    std::to_string(header->last_offset()) + " out of order or out of the segment's range";
      break;
    }
    if (header->max_timestamp > largest.timestamp) largest = {header->max_timestamp, header->last_offset()};
    if (report.valid_batches == 0) first_timestamp = header->max_timestamp;
    // The same rule as append(), so that a rebuilt index equals the one appends wrote.
    if (valid - last_index_position > s.config.index_interval_bytes) {
      if (!s.offsets->is_full()) {
        if (auto r = s.offsets->append(header->last_offset(), valid); !r.ok()) return r;
      }
      if (!s.times->is_full()) {
        if (auto r = s.times->maybe_append(largest.timestamp, largest.offset); !r.ok()) return r;
      }
      last_index_position = valid;
    }
    if (header->partition_leader_epoch >= 0 &&
        (report.epoch_starts.empty() || header->partition_leader_epoch > report.epoch_starts.back().epoch)) {
      report.epoch_starts.push_back({header->partition_leader_epoch, header->base_offset});
    }
    valid += header->size_in_bytes();
    expected_base = header->next_offset();
    report.next_offset = header->next_offset();
    ++report.valid_batches;
  }
  if (read_error != 0) return detail::io_error("cannot read segment during recovery", path, read_error);

  report.valid_bytes = valid;
  report.truncated_bytes = s.size - valid;
  if (report.valid_batches == 0) report.next_offset = s.base_offset;
  if (report.truncated_bytes > 0) {
    subsystem_logger("storage")->warn("{}: cutting {} bytes at position {} during recovery ({})",
                                      path.string(), report.truncated_bytes, valid, stop_reason);
    if (detail::truncate_file(s.fd(), valid, path) != 0)
      return detail::io_error("cannot truncate", path, errno);
  }
  s.size = valid;
  s.next_offset = report.next_offset;
  // Entries for markers that were cut; the producer-state replay after the load re-adds lost ones.
  if (auto r = s.txns->truncate_to(report.next_offset); !r.ok()) return r;
  s.max_timestamp = largest;
  s.rolling_timestamp = first_timestamp;
  s.bytes_since_last_index_entry = valid - last_index_position;
  if (valid == 0) s.created_ms = s.now();
  // As Kafka's recover(): the index ends with the segment's largest timestamp, as a cleanly closed one does.
  if (largest.timestamp >= 0) {
    if (auto r = s.times->maybe_append(largest.timestamp, largest.offset, true); !r.ok()) return r;
  }
  return report;
}

status log_segment::on_roll() {
  if (auto r = _impl->settle(); !r.ok()) return r;
  return _impl->trim_indexes_with_final_entry();
}

std::shared_ptr<deferred_file_work> log_segment::on_roll_deferred(status& error) {
  impl& s = *_impl;
  error = status::success();
  if (s.cut) {
    // A truncation's cut not run yet (a roll by age at the first append after it): run here, before the next
    // segment takes the offsets its stale tail still holds on disk.
    auto cut = std::move(s.cut);
    if (auto r = cut->finish(); !r.ok()) {
      error = r;
      return nullptr;
    }
  }
  if (s.max_timestamp.timestamp >= 0) {
    if (!s.times->next_entry_reserved()) {
      if (auto r = s.settle(); !r.ok()) {
        error = r;
        return nullptr;
      }
    }
    if (auto r = s.times->maybe_append(s.max_timestamp.timestamp, s.max_timestamp.offset, true); !r.ok()) {
      error = r;
      return nullptr;
    }
  }
  auto work = std::make_shared<deferred_file_work>();
  work->_trims.push_back({s.offsets->path(), s.offsets->trim_to_entries_later()});
  work->_trims.push_back({s.times->path(), s.times->trim_to_entries_later()});
  s.deferred.push_back(work);
  return work;
}

std::shared_ptr<deferred_file_work> log_segment::append_aborted_txn_later(const aborted_txn& txn,
                                                                          status& error) {
  impl& s = *_impl;
  // What the worker finished is dropped (a failure of it is this append's), so that a segment taking many
  // aborts between flushes does not carry them all.
  if (auto st = collect_deferred(); !st.ok()) {
    error = st;
    return nullptr;
  }
  auto prepared = s.txns->prepare_append(txn);
  if (!prepared && s.txns->load().ok()) prepared = s.txns->prepare_append(txn);  // unreadable at the open
  if (!prepared) {
    error = prepared.error();
    return nullptr;
  }
  if (!*prepared) return nullptr;
  // Aborts between two runs of the worker make one job: the entry joins the last one if it writes this file
  // and has not started.
  if (!s.deferred.empty()) {
    auto& last = *s.deferred.back();
    std::unique_lock lock(last._mutex, std::try_to_lock);
    if (lock.owns_lock() && !last._done && !last._txn_writes.empty() &&
        last._txn_writes.back().path == (*prepared)->path && last._renames.empty() && last._unlinks.empty() &&
        last._trims.empty()) {
      last._txn_writes.push_back(std::move(**prepared));
      return s.deferred.back();
    }
  }
  auto work = std::make_shared<deferred_file_work>();
  work->_before = s.deferred;
  work->_txn_writes.push_back(std::move(**prepared));
  s.deferred.push_back(work);
  return work;
}

result<bool> log_segment::collect_aborted_txns(int64_t fetch_offset, int64_t upper_bound,
                                               std::vector<aborted_txn>& out) {
  return _impl->txns->collect(fetch_offset, upper_bound, out);
}

status log_segment::collect_deferred() {
  impl& s = *_impl;
  status first;
  std::erase_if(s.deferred, [&](const std::shared_ptr<deferred_file_work>& work) {
    auto result = work->result_if_done();
    if (!result) return false;
    if (!result->ok() && first.ok()) first = *result;
    return true;
  });
  return first;
}

result<std::unique_ptr<log_segment>> log_segment::create_standby(const fs::path& dir,
                                                                 const log_config& config,
                                                                 std::function<int64_t()> clock_ms) {
  auto created = open(dir, 0, config, true, std::move(clock_ms), standby_suffix);
  if (!created) return created.error();
  impl& s = *(*created)->_impl;
  // The first blocks of both indexes, so that the appends after the roll do not open them by name.
  if (auto r = s.offsets->reserve_next(); !r.ok()) return r;
  if (auto r = s.times->reserve_next(); !r.ok()) return r;
  // The descriptor stays open, in no thread's list: the shard adopting the segment takes it into its own.
  const int fd = ::open(s.log_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return detail::io_error("cannot open segment", s.log_path, errno);
  s.file = std::shared_ptr<segment_file>(new segment_file(fd, s.log_path));
  return created;
}

std::shared_ptr<deferred_file_work> log_segment::rename_for_deletion_later() {
  auto work = std::make_shared<deferred_file_work>();
  work->_before = _impl->deferred;  // a .txnindex write pending goes to the old name first
  // Files already gone (the log's directory was removed meanwhile) need no rename.
  rename_later(
      *work, [](const std::string& from, std::string_view) { return from + std::string(deleted_suffix); },
      true);
  _impl->deferred.push_back(work);
  return work;
}

void log_segment::rename_later(deferred_file_work& work,
                               const std::function<std::string(const std::string&, std::string_view)>& to,
                               bool all_may_be_missing) {
  impl& s = *_impl;
  auto step = [&](const std::string& from, std::string_view kind) {
    std::string target = to(from, kind);
    work._renames.push_back({from, target, all_may_be_missing || kind == txn_index_suffix});
    return target;
  };
  s.log_path = step(s.log_path, log_suffix);
  s.offsets->set_path(step(s.offsets->path(), offset_index_suffix));
  s.times->set_path(step(s.times->path(), time_index_suffix));
  s.txns->set_path(step(s.txns->path(), txn_index_suffix));
}

std::shared_ptr<deferred_file_work> log_segment::swap_in_later(std::span<log_segment* const> replaced) {
  auto work = std::make_shared<deferred_file_work>();
  for (auto* segment : replaced) {
    for (auto& pending : segment->_impl->deferred) work->_before.push_back(pending);
  }
  for (auto& pending : _impl->deferred) work->_before.push_back(pending);
  auto change = [](std::string_view from, std::string_view to) {
    return [from, to](const std::string& path, std::string_view) {
      std::string_view p = path;
      if (!from.empty() && p.ends_with(from)) p.remove_suffix(from.size());
      return std::string(p) + std::string(to);
    };
  };
  rename_later(*work, change(cleaned_suffix, swap_suffix), false);
  for (auto* segment : replaced) {
    segment->rename_later(*work, change("", deleted_suffix), false);
    segment->_impl->deferred.push_back(work);
  }
  rename_later(*work, change(swap_suffix, ""), false);
  _impl->deferred.push_back(work);
  return work;
}

std::shared_ptr<deferred_file_work> log_segment::delete_files_later() {
  impl& s = *_impl;
  s.closed = true;
  auto work = std::make_shared<deferred_file_work>();
  work->_before = s.deferred;
  work->_unlinks = {s.log_path, s.offsets->path(), s.times->path(), s.txns->path()};
  s.deferred.push_back(work);
  return work;
}

std::shared_ptr<deferred_file_work> log_segment::adopt_as(const fs::path& dir, int64_t base_offset) {
  impl& s = *_impl;
  MALA_ASSERT(s.size == 0 && s.offsets->entries() == 0 && s.times->entries() == 0,
              "a standby segment adopted with data: {}", s.log_path);
  s.base_offset = base_offset;
  s.next_offset = base_offset;
  s.created_ms = s.now();
  s.rolling_timestamp = -1;
  s.max_timestamp = {-1, -1};
  s.bytes_since_last_index_entry = 0;
  s.offsets->rebase(base_offset);
  s.times->rebase(base_offset);
  s.txns->rebase(base_offset);
  auto work = std::make_shared<deferred_file_work>();
  rename_later(
      *work,
      [&](const std::string&, std::string_view kind) {
        return segment_file_path(dir, base_offset, kind).string();
      },
      false);
  if (s.file) s.file->_path = s.log_path;  // nobody else holds the handle of a segment without data
  s.deferred.push_back(work);
  return work;
}

bool log_segment::should_roll(int32_t batch_bytes, int64_t now_ms, int64_t next_batch_last_offset,
                              int64_t rolling_jitter_ms, int64_t batch_max_timestamp) const {
  const impl& s = *_impl;
  if (s.size > int64_t{s.config.segment_bytes} - batch_bytes) return true;
  if (time_roll_within(0, now_ms, rolling_jitter_ms, batch_max_timestamp)) return true;
  if (s.offsets->is_full() || s.times->is_full()) return true;
  const int64_t relative = next_batch_last_offset - s.base_offset;
  return relative < 0 || relative > max_relative_offset;
}

bool log_segment::time_roll_within(int64_t lead_ms, int64_t now_ms, int64_t rolling_jitter_ms,
                                   int64_t batch_max_timestamp) const {
  const impl& s = *_impl;
  if (s.size == 0) return false;
  // Kafka's timeWaitedForRoll: from the first batch's timestamp when there is one, else from the creation.
  const int64_t waited = s.rolling_timestamp >= 0
                             ? (batch_max_timestamp >= 0 ? batch_max_timestamp : now_ms) - s.rolling_timestamp
                             : now_ms - s.created_ms;
  return waited > s.config.segment_ms - rolling_jitter_ms - lead_ms;
}

std::vector<std::function<void()>> log_segment::index_reservations_ahead() {
  std::vector<std::function<void()>> jobs;
  if (_impl->closed) return jobs;
  if (auto job = _impl->offsets->reservation_ahead()) jobs.push_back(std::move(job));
  if (auto job = _impl->times->reservation_ahead()) jobs.push_back(std::move(job));
  return jobs;
}

bool log_segment::past_half_of_size_bounds() const {
  const impl& s = *_impl;
  if (s.size >= int64_t{s.config.segment_bytes} / 2) return true;
  if (s.offsets->entries() >= s.offsets->max_entries() / 2 ||
      s.times->entries() >= s.times->max_entries() / 2)
    return true;
  return s.next_offset - s.base_offset >= max_relative_offset / 2;
}

status log_segment::flush() {
  impl& s = *_impl;
  if (auto r = s.settle(); !r.ok()) return r;
  if (auto r = s.open_file()->sync(); !r.ok()) return r;
  if (auto r = s.offsets->flush(); !r.ok()) return r;
  if (auto r = s.txns->flush(); !r.ok()) return r;
  return s.times->flush();
}

status log_segment::rename_for_deletion() {
  return change_suffix("", deleted_suffix);
}

status log_segment::change_suffix(std::string_view from, std::string_view to) {
  impl& s = *_impl;
  if (auto r = s.settle(); !r.ok()) return r;
  auto renamed = [&](const std::string& path) -> std::string {
    std::string_view p = path;
    if (!from.empty() && p.ends_with(from)) p.remove_suffix(from.size());
    return std::string(p) + std::string(to);
  };
  const std::string old_log = s.log_path;
  const std::string new_log = renamed(old_log);
  if (::rename(old_log.c_str(), new_log.c_str()) != 0)
    return detail::io_error("cannot rename", old_log, errno);
  // Handles already given out keep their path; new ones get the new name. A duplicate descriptor lets both
  // close independently. A segment without an open descriptor opens the file under its new name when used.
  if (s.file) {
    const int fd = ::fcntl(s.file->fd(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return detail::io_error("cannot duplicate the descriptor of", new_log, errno);
    s.file = std::shared_ptr<segment_file>(new segment_file(fd, new_log));
  }
  s.log_path = new_log;
  if (auto r = s.offsets->rename_to(renamed(s.offsets->path())); !r.ok()) return r;
  if (auto r = s.times->rename_to(renamed(s.times->path())); !r.ok()) return r;
  const std::string new_txn = renamed(s.txns->path());
  if (::rename(s.txns->path().c_str(), new_txn.c_str()) != 0) {
    if (errno != ENOENT) return detail::io_error("cannot rename", s.txns->path(), errno);
  }
  s.txns->set_path(new_txn);
  return status::success();
}

status log_segment::release_descriptor() {
  impl& s = *_impl;
  if (s.lru.list) s.lru.list->unlink(s.lru);
  if (s.file) s.carried_sync_error = s.file->sync_error();
  s.file.reset();
  return status::success();
}

status log_segment::delete_files() {
  impl& s = *_impl;
  (void)s.settle();  // the files go under the names they have now, whatever the deferred work did
  s.closed = true;
  status first_error = unlink_if_exists(s.log_path);
  for (auto r :
       {s.offsets->close_and_delete(), s.times->close_and_delete(), unlink_if_exists(s.txns->path())}) {
    if (first_error.ok() && !r.ok()) first_error = r;
  }
  return first_error;
}

status log_segment::close() {
  impl& s = *_impl;
  if (auto r = s.settle(); !r.ok()) return r;
  if (s.closed) return status::success();
  s.closed = true;
  return s.trim_indexes_with_final_entry();
}

}  // namespace mala::storage
