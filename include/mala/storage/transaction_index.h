// The aborted-transaction index of one segment, <base>.txnindex in Kafka's format (TransactionIndex /
// AbortedTxn): one 34-byte big-endian entry per transaction aborted by a marker in this segment,
//   version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 (the ABORT marker's offset) |
//   lastStableOffset int64 (the LSO once the marker was written)
// appended in marker order (lastOffset strictly increasing). read_committed fetches collect the entries that
// overlap the range they return (collect), so that consumers drop the aborted batches.
//
// Entries are kept in memory (aborts are rare, and most segments never had one): read when the segment is
// opened (load(), off the shards: the log's load or the cleaner's thread) or empty for a new segment, then
// appended to in memory. The file write of an append is either done at once (append()) or handed out to be
// done off the shard (prepare_append(): the segment's deferred file work runs it). An append whose lastOffset
// is not above the last entry's is ignored, so that a producer-state replay over a range already indexed
// (recovery, truncation) adds only what is missing. A trailing partial entry (torn write) is dropped when
// the file is read.
//
// Threads: owned by its log_segment, touched only on the partition's owning shard (the prepared writes run
// anywhere); the log cleaner's thread reads a copy of the entries or, for an index not loaded, the file
// itself (txn_index_source).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mala/common/result.h"

namespace mala::storage {

inline constexpr int16_t aborted_txn_version = 0;
inline constexpr size_t aborted_txn_entry_size = 34;

struct aborted_txn {
  int64_t producer_id = -1;
  int64_t first_offset = -1;
  int64_t last_offset = -1;
  int64_t last_stable_offset = -1;
  friend bool operator==(const aborted_txn&, const aborted_txn&) = default;
};

std::string encode_aborted_txn(const aborted_txn& txn);
// The whole entries of a .txnindex file's bytes (a partial trailing entry is ignored); CORRUPT_MESSAGE for an
// entry of another version.
result<std::vector<aborted_txn>> decode_aborted_txns(std::span<const uint8_t> bytes);

// Kafka's collectAbortedTxns over one index's entries: those with lastOffset >= fetch_offset and firstOffset
// < upper_bound, added to `out`. True once an entry's lastStableOffset >= upper_bound was seen: no later
// segment can hold an entry that matters to this range.
bool collect_aborted_txns(std::span<const aborted_txn> entries, int64_t fetch_offset, int64_t upper_bound,
                          std::vector<aborted_txn>& out);

// A .txnindex as a thread other than its segment's owner reads it: the entries if the segment had loaded
// them, else the file (an index the segment could not read when it opened, and not written since).
struct txn_index_source {
  std::optional<std::vector<aborted_txn>> entries;
  std::string path;
  // The entries, or the file's (none when there is no file).
  result<std::vector<aborted_txn>> read() const;
};

class transaction_index {
 public:
  transaction_index(std::string path, int64_t base_offset)
      : _path(std::move(path)), _base_offset(base_offset) {}

  const std::string& path() const { return _path; }
  // The files were renamed (deletion, cleaner swap).
  void set_path(std::string path) { _path = std::move(path); }
  // A standby segment's empty index takes the base offset the segment got at its roll.
  void rebase(int64_t base_offset) { _base_offset = base_offset; }

  // Reads the file's entries now, if not read yet (a missing file holds none).
  status load();
  // The index of a segment just created: no entries, nothing to read.
  void mark_empty();
  // Appends one entry (lastOffset must be at or above the segment's base offset, else CORRUPT_MESSAGE); one
  // not above the last entry's lastOffset is skipped (already indexed).
  status append(const aborted_txn& txn);
  // Where an entry's bytes go in the file.
  struct entry_write {
    std::string path;
    int64_t position = 0;
    std::string bytes;
  };
  // append() with the file write returned instead of done (nullopt: the entry was already indexed). The
  // entries must be loaded (UNKNOWN_SERVER_ERROR otherwise: no file is read here).
  result<std::optional<entry_write>> prepare_append(const aborted_txn& txn);
  // Drops the entries whose lastOffset >= offset (Kafka's truncateTo).
  status truncate_to(int64_t offset);
  // truncate_to() without touching the file: the entries must be loaded. The length the file is to be cut to
  // later (off the shard), or nullopt when no entry goes.
  std::optional<int64_t> truncate_to_later(int64_t offset);
  bool loaded() const { return _loaded; }
  // Kafka's collectAbortedTxns: the entries with lastOffset >= fetch_offset and firstOffset < upper_bound,
  // added to `out`. True once an entry's lastStableOffset >= upper_bound was seen: no later segment can hold
  // an entry that matters to this range.
  result<bool> collect(int64_t fetch_offset, int64_t upper_bound, std::vector<aborted_txn>& out);
  result<std::vector<aborted_txn>> entries();
  // Its entries or its path, without reading the file (txn_index_source).
  txn_index_source source() const;
  // fsync when something was written since the last flush.
  status flush();

 private:
  std::string _path;
  int64_t _base_offset = 0;
  bool _loaded = false;
  bool _dirty = false;
  std::vector<aborted_txn> _entries;
  int64_t _file_entries = 0;  // whole entries the file holds (a torn tail after them is overwritten)
};

// Writes an entry prepare_append() handed out (any thread; the file is created if missing).
status write_aborted_txn_entry(const transaction_index::entry_write& write);

}  // namespace mala::storage
