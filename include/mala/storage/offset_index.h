// A segment's sparse offset index (<base>.index): fixed 8-byte entries (offset relative to the segment's base
// offset, byte position in the .log), sorted by both. Preallocated to segment.index.bytes and memory-mapped;
// trimmed to its entries on roll and close (Kafka's OffsetIndex). Touched only by the partition's owning
// shard.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "mala/common/result.h"

namespace mala::storage {

struct offset_position {
  int64_t offset = 0;    // absolute
  int64_t position = 0;  // byte position in the segment's .log
  friend bool operator==(const offset_position&, const offset_position&) = default;
};

class offset_index {
 public:
  // Opens or creates the file. A new or writable index is grown to max_index_size (rounded down to whole
  // entries); the entry count is taken from the file's length for an index that was trimmed, and from the
  // last non-zero entry otherwise (an untrimmed file left by a crash; only entry 0 may legitimately be all
  // zero). `writable` is for the active segment's index; a rolled segment's trimmed index is opened with
  // false and keeps its length (it is full, so nothing is appended until resize()). The mapping is read-write
  // either way, so truncate_to() and a recovery rebuild work on both. Fails with invalid_config when
  // max_index_size is below one entry.
  static result<std::unique_ptr<offset_index>> open(const std::filesystem::path& path, int64_t base_offset,
                                                    int32_t max_index_size, bool writable);
  ~offset_index();

  // The entry with the largest offset <= target, or {base_offset, 0} when there is none.
  offset_position lookup(int64_t target_offset) const;
  // Appends an entry; offsets must increase. Fails (invariant) when the index is full or the offset does not
  // fit.
  status append(int64_t offset, int64_t position);
  // Backs the next entry's slot with disk blocks (append does it too; a store into a sparse page of a full
  // disk would raise SIGBUS). KAFKA_STORAGE_ERROR when the disk is full: log_segment calls it before writing
  // a batch, so that a failed append leaves nothing behind.
  status reserve_next();
  bool next_entry_reserved() const;  // reserve_next() would not touch the file
  // index_file::reservation_ahead(): the job that reserves the next slots off the shard, or empty.
  std::function<void()> reservation_ahead();
  bool is_full() const;
  int32_t entries() const;
  int32_t max_entries() const;  // slots in the current file length
  // Entry n (0 <= n < entries(); anything else is a bug and aborts).
  offset_position entry(int32_t n) const;
  std::optional<offset_position> last_entry() const;
  // Drops entries with offset >= offset. Dropped slots are zeroed so that a crash before the next trim cannot
  // bring them back when the untrimmed file is reopened.
  void truncate_to(int64_t offset);
  void truncate_all();
  // Shrinks the file to its entries (roll, clean close) or regrows it (reopening the active segment).
  // resize() rounds down to whole entries and never drops entries.
  status trim_to_entries();
  status resize(int32_t max_index_size);
  // Whether resize(max_index_size) has nothing to do.
  bool sized_for(int32_t max_index_size) const;
  status flush();
  // Kafka's sanity check: entries sorted and the last entry's offset >= base offset; file size a multiple
  // of 8. corrupt_message when it fails.
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
  offset_index() = default;
  struct impl;
  std::unique_ptr<impl> _impl;
};

}  // namespace mala::storage
