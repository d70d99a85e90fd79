// raft_log on real storage: the partition __cluster_metadata-0 in the metadata log dir
// (storage::partition_log), the log a KRaft controller keeps (Kafka's KafkaMetadataLog over UnifiedLog).
//
// On disk every entry is one v2 record batch (storage/metadata_partition.h) whose partition leader epoch is
// the entry's epoch, so the partition log's leader epoch cache is the Raft epoch index that
// end_offset_for_epoch answers from. A data entry is a batch of one record with a null key and the payload as
// value (MetadataRecordSerde's framing); a leader_change entry is a control batch holding one LEADER_CHANGE
// control record (key: version 0, type 2) whose value is the entry's payload (the glue puts the encoded
// LeaderChangeMessage there; the replica leaves it empty). Batches of several records (the unit tests'
// stand-in metadata log writes a whole controller write as one batch) read back as one entry per record.
//
// Durability: append() and truncate_to() only write (the page-cache part, see log.h); the glue makes them
// durable (flush(), or flush_work() synced on another thread) after carrying out a step's log operations and
// before it sends that step's messages. Truncation drops whole batches: exact for what this class wrote (one
// entry per batch).
//
// Failures: raft_log cannot return errors. A failed write takes the partition log offline (storage's
// LogDirFailureChannel behaviour); this log then ignores further writes, reads nothing new, and every flush()
// returns the error. The glue must stop the node then, as Kafka halts when the metadata log dir fails. A
// batch that cannot be read back (corrupt, or a control record other than LEADER_CHANGE) is a failure too.
//
// Snapshots (KIP-630): <end offset, 20 digits>-<epoch, 10 digits>.checkpoint in the partition dir, written
// as .checkpoint.part, fsynced, renamed and the dir fsynced (Kafka's FileRawSnapshotWriter). On open, as
// Kafka's KafkaMetadataLog.recoverSnapshots / truncateToLatestSnapshot: a log whose start is above 0 must be
// covered by a snapshot at or above its start (else open fails: the state before the start is lost), and a
// log that ends before the newest snapshot (or whose entries are all of an older epoch than it: a crash
// during install_snapshot) is emptied and restarted at the snapshot's end offset. When the entries before
// the log start are gone, last_fetched_epoch and end_offset_for_epoch answer from the snapshot at the log
// start (KafkaMetadataLog.lastFetchedEpoch / endOffsetForEpoch). delete_before raises the log start offset
// exactly to the given offset and removes the segments wholly below it; the log start offset is not
// checkpointed, so after a reopen start_offset() is the first segment's base again (entries below the
// snapshot that are still on disk are readable, which is consistent).
//
// Threads: one thread, the replica's (shard 0). No locking.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/result.h"
#include "mala/raft/log.h"
#include "mala/storage/metadata_partition.h"
#include "mala/storage/partition_log.h"

namespace mala::raft {

// Kafka's Snapshots.filenameFromSnapshotId + SUFFIX: "00000000000000000123-0000000002.checkpoint".
std::string snapshot_file_name(offset_and_epoch id);
// The id in a snapshot file name, with the ".part" / ".deleted" suffix Kafka adds for partial and deleted
// snapshots; nullopt for any other name (Snapshots.parse).
struct snapshot_file {
  offset_and_epoch id;
  bool partial = false;
  bool deleted = false;
};
std::optional<snapshot_file> parse_snapshot_file_name(std::string_view name);

// Kafka's ControlRecordType.LEADER_CHANGE.
inline constexpr int16_t leader_change_control_type = storage::leader_change_control_type;

struct partition_raft_log_options {
  std::function<int64_t()> clock_ms;  // batch timestamps and segment rolling; the system clock when unset
  storage::metadata_segment_settings segments;  // metadata.log.segment.bytes / .ms
  // The node's file worker (storage::log_manager's): the log's rolls, segment deletions and index
  // reservations run there, not on the shard the Raft node runs on. Null (tests): in place.
  std::shared_ptr<storage::file_worker> worker;
};

class partition_raft_log final : public raft_log {
 public:
  // Opens (creating when absent) and recovers <metadata_log_dir>/__cluster_metadata-0.
  static result<std::unique_ptr<partition_raft_log>> open(const std::filesystem::path& metadata_log_dir,
                                                          partition_raft_log_options options = {});
  // Over an already open log (it is closed with this object).
  partition_raft_log(std::unique_ptr<storage::partition_log> log, partition_raft_log_options options = {});
  ~partition_raft_log() override;

  int64_t start_offset() const override;
  int64_t end_offset() const override;
  int32_t last_fetched_epoch() const override;
  offset_and_epoch end_offset_for_epoch(int32_t epoch) const override;
  std::vector<log_entry> read(int64_t from_offset, size_t max_entries) const override;
  void append(std::span<const log_entry> entries) override;
  void truncate_to(int64_t offset) override;
  // Snapshots (KIP-630), files in the partition dir named as Kafka's Snapshots.java does (see
  // snapshot_file_name). The newest snapshot is kept, and the one before it while the log still holds its
  // offset; older ones, `.part` files of interrupted writes and `.deleted` leftovers go at open() and after
  // each snapshot change. A failed snapshot write returns false and leaves the log as it was.
  std::optional<offset_and_epoch> latest_snapshot() const override;
  std::optional<std::vector<uint8_t>> read_snapshot(offset_and_epoch id) const override;
  // A ranged read of the file (pread), for FetchSnapshot answers.
  std::optional<snapshot_chunk> read_snapshot_chunk(offset_and_epoch id, int64_t position,
                                                    int64_t max_bytes) const override;
  bool write_snapshot(offset_and_epoch id, std::span<const uint8_t> payload) override;
  void delete_before(int64_t offset) override;
  bool install_snapshot(offset_and_epoch id, std::span<const uint8_t> payload) override;
  // write_snapshot in two halves, so that the file I/O can run away from the log's thread: the file of
  // snapshot `id` written durably into `dir` (the partition dir; .part, fsync, rename, fsync of the dir) from
  // any thread, then adopt_snapshot_file(id) on the log's thread, which checks the id against the log as
  // write_snapshot does and takes the snapshot, or removes the file and returns false.
  static status write_snapshot_file_in(const std::filesystem::path& dir, offset_and_epoch id,
                                       std::span<const uint8_t> payload);
  bool adopt_snapshot_file(offset_and_epoch id);
  // install_snapshot in two halves, the same way: write_snapshot_file_in(dir(), id, payload) from any thread,
  // then this on the log's thread, which replaces the log by the stored snapshot without syncing anything
  // (the next flush syncs the new empty segment; a crash before it leaves a log behind the snapshot, which
  // open() restarts at the snapshot).
  bool install_stored_snapshot(offset_and_epoch id) override;
  // A snapshot is about to be stored for install_stored_snapshot(): the file worker makes the empty segment
  // the install starts the log with meanwhile, so that the install creates no file on this thread.
  void prepare_snapshot_install() { _log->prepare_standby(); }
  // Where the log's snapshot files are deleted: the thread that writes them (raft_node's blocking thread),
  // so that a deletion never comes after a later write of the same file. Unset: in place.
  void set_file_work_runner(std::function<void(std::function<void()>)> run) {
    _run_file_work = std::move(run);
  }
  // The snapshots held, oldest first.
  const std::vector<offset_and_epoch>& snapshots() const { return _snapshots; }

  // Makes every append and truncation so far durable. The first failure (of a write or of a sync) for good.
  status flush();
  // flush() in three steps, so that the syncs run away from the log's thread (raft_node's blocking thread):
  // here, the files to sync for everything written so far and the end offset they make durable (the first
  // failure instead, for good); there, each file's sync(); back here, mark_flushed(end offset, or less when
  // the log was truncated below it meanwhile) moves the recovery point.
  result<storage::partition_log::sync_work> flush_work();
  void mark_flushed(int64_t end_offset);
  // Flushes and closes the partition log (also done by the destructor).
  status close();
  // The first failure; success while healthy.
  const status& failure() const { return _failure; }
  // The partition directory (the quorum-state file lives there too).
  std::filesystem::path dir() const;
  // The underlying log (Fetch responses may serve its batches as they are).
  storage::partition_log& partition() { return *_log; }

 private:
  void fail(const status& error) const;
  // The epoch of the last entry held by the log, 0 when it holds none (the epoch cache only).
  int32_t log_last_epoch() const;
  // The snapshot whose end offset is the log start, when the entries before the start are gone.
  std::optional<offset_and_epoch> snapshot_at_start() const;
  // open(): finds the snapshots, removes leftovers, checks them against the log (see the header comment).
  status recover_snapshots();
  // Writes the snapshot file durably (.part, fsync, rename, fsync of the dir).
  status write_snapshot_file(offset_and_epoch id, std::span<const uint8_t> payload) const;
  // Whether snapshot `id` may be taken (write_snapshot's checks; a refusal is logged).
  enum class new_snapshot { refused, held, allowed };
  new_snapshot check_new_snapshot(offset_and_epoch id) const;
  // Deletes the snapshots no longer needed: all but the newest and, while the log holds its offset, the one
  // before it.
  void prune_snapshots();
  static void remove_snapshot_file(const std::filesystem::path& path);
  // remove_snapshot_file through the file work runner, when set.
  void remove_snapshot_file_later(std::filesystem::path path) const;

  std::unique_ptr<storage::partition_log> _log;
  std::function<void(std::function<void()>)> _run_file_work;
  std::function<int64_t()> _clock_ms;
  mutable status _failure;
  bool _closed = false;
  std::vector<offset_and_epoch> _snapshots;  // ascending (offset_and_epoch order)
};

}  // namespace mala::raft
