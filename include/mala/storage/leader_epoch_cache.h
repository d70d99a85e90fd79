// The leader epoch cache of a partition (Kafka's LeaderEpochFileCache): for every leader epoch the first
// offset written in it, persisted in leader-epoch-checkpoint. Followers use end_offset_for_epoch
// (OffsetForLeaderEpoch / Fetch DivergingEpoch) to find where their log diverges from the leader's. Touched
// only by the owning shard.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "mala/common/result.h"
#include "mala/storage/checkpoint_file.h"

namespace mala::storage {

struct epoch_end_offset {
  // The largest epoch <= the requested one; the requested one itself when it is below every cached epoch (as
  // Kafka answers); -1 (UNDEFINED_EPOCH) when it is undefined or above every cached epoch.
  int32_t epoch = -1;
  int64_t end_offset = -1;  // the start offset of the next larger epoch, or the log end offset; -1 if none
  friend bool operator==(const epoch_end_offset&, const epoch_end_offset&) = default;
};

// The order of a cache's checkpoint writes across threads: each write has a generation, and one older than
// the last written is skipped (a background write that waited in a queue never replaces a newer file).
struct epoch_checkpoint_order {
  std::mutex mutex;
  uint64_t written = 0;
  uint64_t next = 1;  // the generation the next write gets (taken on the owning shard, under the mutex)
};

class leader_epoch_cache {
 public:
  // A write of the checkpoint taken from the cache to run on another thread (a background flush): written and
  // fsynced by run(), unless a newer one was written first.
  class pending_write {
   public:
    status run() const;
    const std::string& path() const { return _path; }

   private:
    friend class leader_epoch_cache;
    std::string _path;
    std::vector<epoch_entry> _entries;
    uint64_t _generation = 0;
    std::shared_ptr<epoch_checkpoint_order> _order;
  };

  // Loads the checkpoint in `partition_dir` (missing file: empty cache).
  static result<leader_epoch_cache> load(const std::filesystem::path& partition_dir);

  // Records that `epoch` starts at `start_offset`. An epoch not larger than the latest, or an offset smaller
  // than the latest's, replaces the entries it conflicts with (Kafka's assign()). Changes stay in memory
  // until write() or sync(): every partition gets a new epoch when its leader restarts, and a file written
  // for each (about 0.3 ms here, more with fsyncs) made applying 10,000 leaderships take seconds. The log
  // writes the checkpoint when it hands out a flush of the data the epochs describe, and at close. The
  // batches carry their epoch, so recovery after an unclean shutdown rebuilds what was not written
  // (partition_log's recovery scan, from the recovery point, which passes data only once a flush that
  // included the checkpoint completed), as Kafka's LogSegment.recover does.
  status assign(int32_t epoch, int64_t start_offset);
  // Writes the checkpoint if the entries changed since it was last written, fsynced with file_sync::now.
  status write(file_sync durability);
  // Makes the checkpoint durable: written and fsynced if it changed or was written unsynced (a blocking
  // flush).
  status sync();
  // The checkpoint's path if write(file_sync::later) wrote it since the last sync: the caller syncs it and
  // its directory (a background flush). Clears the mark.
  std::optional<std::filesystem::path> take_unsynced();
  // The entries as a write to run off the shard if they changed since the file was last written (then they
  // count as written); nullopt otherwise. How the log's flush work carries the checkpoint: the shard writes
  // no file.
  std::optional<pending_write> take_pending_write();
  std::optional<epoch_entry> latest() const;
  std::optional<int32_t> latest_epoch() const;
  // Kafka's endOffsetFor(requestedEpoch, logEndOffset).
  epoch_end_offset end_offset_for_epoch(int32_t requested_epoch, int64_t log_end_offset) const;
  // Epoch of the batch at `offset` by the cache (the latest entry whose start offset <= offset).
  std::optional<int32_t> epoch_for_offset(int64_t offset) const;
  // Removes entries whose start offset >= end_offset (log truncated to end_offset). Kept in memory like
  // assign()'s changes (a stale copy is corrected at the next open, which truncates the cache to the log's
  // start and end, and by the recovery scan; Kafka's truncateFromEndAsyncFlush).
  status truncate_from_end(int64_t end_offset);
  // Removes entries wholly before start_offset and moves the first kept one's start up to it. In memory too.
  status truncate_from_start(int64_t start_offset);
  status clear();
  const std::vector<epoch_entry>& entries() const { return _entries; }

 private:
  status persist(file_sync durability);
  bool handed_out_write_pending() const;  // the last write given out has not run (nor a newer one)
  std::string _path;                      // a string: a std::filesystem::path allocates each component apart
  std::vector<epoch_entry> _entries;
  bool _changed = false;                // the file does not hold the entries
  bool _unsynced = false;               // written without an fsync since the last sync
  uint64_t _handed_out_generation = 0;  // of the last write take_pending_write() gave out
  std::shared_ptr<epoch_checkpoint_order> _order = std::make_shared<epoch_checkpoint_order>();
};

}  // namespace mala::storage
