// Internal to the storage library: the memory-mapped, fixed-entry-size file under offset_index and time_index
// (Kafka's AbstractIndex). It owns the mapping and the entry count; the typed indexes interpret the entries.
// Touched only by the owning shard, like the indexes built on it; a reservation_ahead() job runs on another
// thread and shares only the reserved count with it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

#include <sys/types.h>

#include "mala/common/result.h"

namespace mala::storage::detail {

inline int32_t load_be32(const uint8_t* p) {
  return static_cast<int32_t>((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3]);
}
inline int64_t load_be64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return static_cast<int64_t>(v);
}
inline void store_be32(uint8_t* p, int32_t value) {
  const auto v = static_cast<uint32_t>(value);
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
inline void store_be64(uint8_t* p, int64_t value) {
  const auto v = static_cast<uint64_t>(value);
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}

class index_file {
 public:
  index_file() = default;
  index_file(const index_file&) = delete;
  index_file& operator=(const index_file&) = delete;
  ~index_file();

  // Opens or creates `path` and maps it. A new file, or any file when `preallocate`, is grown to
  // max_index_size rounded down to whole entries. The entry count comes from the last entry that is not all
  // zero (which is the file's length for a trimmed index); entry 0 may be all zero, so a one-entry file
  // counts as one entry.
  status open(const std::filesystem::path& path, int32_t entry_size, int32_t max_index_size,
              bool preallocate);

  uint8_t* slot(int32_t n) { return _data + static_cast<size_t>(n) * static_cast<size_t>(_entry_size); }
  const uint8_t* slot(int32_t n) const {
    return _data + static_cast<size_t>(n) * static_cast<size_t>(_entry_size);
  }
  int32_t entries() const { return _entries; }
  int32_t max_entries() const { return _max_entries; }
  int64_t length() const { return _length; }
  // Whether resize(bytes) has nothing to do.
  bool sized_for(int64_t bytes) const;
  // The length resize(bytes) gives the file: whole entries, never fewer than it holds.
  int64_t resized_length(int64_t bytes) const;
  int32_t max_index_size() const { return _max_index_size; }
  bool misaligned_on_open() const { return _misaligned_on_open; }
  const std::string& path() const { return _path; }

  // Makes sure the slots below n are backed by disk blocks before they are written through the mapping: a
  // store into a sparse page of a full disk would raise SIGBUS and take the process down, where this returns
  // a kafka_storage_error (ENOSPC) that takes the log dir offline. Reserves ahead in small steps, so the
  // index only occupies the space its entries use.
  status reserve(int32_t n);
  // Whether reserve(n) has nothing to do (it opens the file by name otherwise).
  bool reserved_for(int32_t n) const {
    return std::min<int64_t>(int64_t{n} * _entry_size, _length) <= reserved();
  }
  // The job that reserves the next step ahead of the entries, to run off the shard (the file worker), so that
  // an active segment's appends find their index slots backed and open no file: given when less than half a
  // step is reserved above the entries and no such job is on its way, else empty. The job counts its blocks
  // only if the file it opened by name is still this index's (same inode) and the index has not been
  // resized, trimmed or reopened since it was made; when it fails (a full disk) the count stays, and
  // reserve() on the shard reports the error as before.
  std::function<void()> reservation_ahead();
  // The caller has written slot(entries()); count it.
  void push_entry() { ++_entries; }
  // Drops entries from n on, zeroing their slots.
  void truncate_to_entries(int32_t n);
  // Sets the file length (rounded down to whole entries, never below the entries) and remaps.
  status resize(int64_t bytes);
  // resize() to the entries without touching the file: the length becomes the entries' and is returned, the
  // mapping keeps its size (nothing past the entries is read or written through it), and the caller cuts
  // the file to that length later, off the shard (a rolled segment's trim, log_segment's deferred work).
  int64_t trim_later();
  void set_path(std::string path) { _path = std::move(path); }
  // A new file with no entries takes another base offset: the caller renames it (a standby segment).
  status flush() const;
  status rename_to(const std::filesystem::path& path);
  status close_and_delete();

 private:
  status map(int fd, int64_t length);
  void unmap();

  std::string _path;  // a string: a std::filesystem::path allocates each component apart
  uint8_t* _data = nullptr;
  int64_t _length = 0;         // the file's length as the entries see it
  int64_t _mapped_length = 0;  // what is mapped: above _length after trim_later()
  int32_t _entry_size = 1;
  int32_t _max_index_size = 0;
  int32_t _entries = 0;
  int32_t _max_entries = 0;
  // Bytes from the start of the file known to be backed by disk blocks (written entries, or reserved), with
  // a generation in the high 32 bits that every shrink or remap advances: a reservation_ahead() job made
  // before one counts nothing. Shared with those jobs (an index may go before its job runs).
  struct reservation_state {
    std::atomic<uint64_t> word{0};
    std::atomic<bool> job_pending{false};
  };
  int64_t reserved() const { return static_cast<int64_t>(_reservation->word.load() & 0xffffffffu); }
  void set_reserved(int64_t bytes, bool new_generation);
  static void raise_reserved(reservation_state& state, uint64_t generation, int64_t to);
  std::shared_ptr<reservation_state> _reservation = std::make_shared<reservation_state>();
  dev_t _device = 0;
  ino_t _inode = 0;
  bool _misaligned_on_open = false;
};

}  // namespace mala::storage::detail
