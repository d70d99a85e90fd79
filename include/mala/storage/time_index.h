// A segment's sparse time index (<base>.timeindex): 12-byte entries (max timestamp seen so far, offset
// relative to the segment's base offset) with strictly increasing timestamps, for ListOffsets by timestamp
// and time-based retention. Preallocated, memory-mapped and trimmed like the offset index (Kafka's
// TimeIndex). Touched only by the partition's owning shard.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "mala/common/result.h"

namespace mala::storage {

struct timestamp_offset {
  int64_t timestamp = -1;
  int64_t offset = 0;  // absolute
  friend bool operator==(const timestamp_offset&, const timestamp_offset&) = default;
};

class time_index {
 public:
  // As offset_index::open (preallocation, entry count of an untrimmed file, `writable`).
  static result<std::unique_ptr<time_index>> open(const std::filesystem::path& path, int64_t base_offset,
                                                  int32_t max_index_size, bool writable);
  ~time_index();

  // The entry with the largest timestamp <= target, or {-1, base_offset} when there is none.
  timestamp_offset lookup(int64_t target_timestamp) const;
  // Appends when timestamp is larger than the last entry's (Kafka's maybeAppend); a smaller or equal one is
  // ignored. Fails (invariant) for an offset below the last entry's or outside the segment's 32-bit relative
  // range, and when full unless skip_full_check: the last slot is reserved for the entry on_roll()/close()
  // add, and a file already trimmed grows by one entry for it.
  status maybe_append(int64_t timestamp, int64_t offset, bool skip_full_check = false);
  // As offset_index::reserve_next.
  status reserve_next();
  bool next_entry_reserved() const;  // reserve_next() would not touch the file
  // index_file::reservation_ahead(): the job that reserves the next slots off the shard, or empty.
  std::function<void()> reservation_ahead();
  // Kafka's TimeIndex.isFull: one slot short of the file, keeping the last one for the roll entry.
  bool is_full() const;
  int32_t entries() const;
  int32_t max_entries() const;
  // Entry n (0 <= n < entries(); anything else is a bug and aborts).
  timestamp_offset entry(int32_t n) const;
  std::optional<timestamp_offset> last_entry() const;
  // Drops entries with offset >= offset (dropped slots zeroed, as in offset_index).
  void truncate_to(int64_t offset);
  void truncate_all();
  status trim_to_entries();
  status resize(int32_t max_index_size);
  // Whether resize(max_index_size) has nothing to do.
  bool sized_for(int32_t max_index_size) const;
  status flush();
  // Kafka's sanity check: timestamps increasing (so the last >= the first), offsets >= base offset and
  // non-decreasing, file size a multiple of 12. corrupt_message when it fails.
  status sanity_check() const;
  int64_t base_offset() const;
  const std::string& path() const;
  status rename_to(const std::filesystem::path& path);
  // trim_to_entries() without touching the file: returns the length the file is to be cut to later, off the
  // shard (the mapping keeps its size until then).
  int64_t trim_to_entries_later();
  // The name the file has, or will have once a deferred rename ran (log_segment's deferred file work).
  void set_path(std::string path);
  // An index without entries (a standby segment, created before its base offset was known) takes its base
  // offset.
  void rebase(int64_t base_offset);
  status close_and_delete();

 private:
  time_index() = default;
  struct impl;
  std::unique_ptr<impl> _impl;
};

}  // namespace mala::storage
