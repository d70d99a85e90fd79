// The replicated log as the Raft state machine (raft::replica) sees it: an ordered list of entries, each with
// its offset and the epoch of the leader that wrote it, read and written through the small `raft_log`
// interface so that the network/storage glue can back it with storage::partition_log (the partition
// __cluster_metadata-0, whose leader epoch cache answers end_offset_for_epoch) while tests use
// `memory_raft_log`.
//
// One entry is one record at one offset. Kafka's KRaft writes batches of records; the glue maps a batch to a
// run of entries with the same epoch (the batch's partition leader epoch), the last one marked `batch_end`,
// and back.
//
// Writes through this interface are the in-memory (page cache) part of a write: the replica also reports each
// truncation and append as an effect (replica.h, `effects::log_operations`), which the glue must make durable
// before it sends the messages of the same step. Nothing here flushes.
//
// Threads: a log is used by one thread, its replica's (shard 0 in the broker). No locking.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace mala::raft {

// What an entry holds. Kafka's leader appends a LeaderChangeMessage control record at the start of its epoch
// (KIP-595); committing it is how a new leader commits the entries of earlier epochs (Raft's commitment
// rule). A KIP-853 quorum (kraft.version 1) also writes KRaftVersionRecord and VotersRecord control records
// (voter_set.h): the voter set in effect is the last VotersRecord in the log, committed or not.
enum class entry_type : int8_t { data = 0, leader_change = 1, kraft_version = 2, voters = 3 };

// Kafka's ControlRecordType of a control entry (LEADER_CHANGE 2, KRAFT_VERSION 5, KRAFT_VOTERS 6); -1 for
// data.
constexpr int16_t control_record_type_of(entry_type type) {
  switch (type) {
    case entry_type::leader_change:
      return 2;
    case entry_type::kraft_version:
      return 5;
    case entry_type::voters:
      return 6;
    case entry_type::data:
      break;
  }
  return -1;
}
// The entry type of a control record type, or nullopt for one a Raft log does not hold (snapshot header and
// footer, transaction markers).
constexpr std::optional<entry_type> entry_type_of_control_record(int16_t type) {
  switch (type) {
    case 2:
      return entry_type::leader_change;
    case 5:
      return entry_type::kraft_version;
    case 6:
      return entry_type::voters;
    default:
      return std::nullopt;
  }
}

struct log_entry {
  int64_t offset = 0;
  int32_t epoch = 0;  // the leader epoch that appended it (the batch's PartitionLeaderEpoch on disk)
  entry_type type = entry_type::data;
  // The record value; empty for leader_change (the glue encodes the control record).
  std::vector<uint8_t> payload;
  // True for the last entry of its write. The entries of one leader append are one record batch on disk and
  // on the wire (Kafka's atomic controller write): a fetch answer carries whole writes only, so a follower's
  // log and the high watermark end at a write boundary, and a reader applies only whole writes.
  bool batch_end = true;

  bool operator==(const log_entry&) const = default;
};

// Kafka's OffsetAndEpoch. As an end offset it is exclusive: the offset after the epoch's last entry.
struct offset_and_epoch {
  int64_t offset = 0;
  int32_t epoch = 0;

  bool operator==(const offset_and_epoch&) const = default;
  // Raft's "at least as up to date": compare epoch first, then offset (OffsetAndEpoch.compareTo).
  auto operator<=>(const offset_and_epoch& other) const {
    if (epoch != other.epoch) return epoch <=> other.epoch;
    return offset <=> other.offset;
  }
};

struct snapshot_chunk {
  int64_t size = 0;  // of the whole snapshot
  std::vector<uint8_t> bytes;
};

class raft_log {
 public:
  virtual ~raft_log() = default;

  // The first offset held (0 until snapshots exist) and the offset the next entry will get.
  virtual int64_t start_offset() const = 0;
  virtual int64_t end_offset() const = 0;
  // The epoch of the last entry, 0 when the log is empty (Kafka's lastFetchedEpoch; leader epochs start
  // at 1).
  virtual int32_t last_fetched_epoch() const = 0;
  // Kafka's ReplicatedLog.endOffsetForEpoch: the largest epoch in the log that is <= `epoch` and the end
  // offset (exclusive) of its entries; {start_offset(), 0} when the log has no such epoch.
  virtual offset_and_epoch end_offset_for_epoch(int32_t epoch) const = 0;
  // Up to `max_entries` entries from `from_offset` (start_offset() <= from_offset <= end_offset()).
  virtual std::vector<log_entry> read(int64_t from_offset, size_t max_entries) const = 0;
  // Appends entries whose offsets continue end_offset() and whose epochs do not go backwards.
  virtual void append(std::span<const log_entry> entries) = 0;
  // Removes every entry at or after `offset` (no-op when offset >= end_offset()).
  virtual void truncate_to(int64_t offset) = 0;

  // --- Snapshots (KIP-630). A snapshot id is an offset_and_epoch: the snapshot holds the state of every
  // entry before `offset` (exclusive), and `epoch` is the epoch of the entry at offset - 1. The payload is
  // opaque to Raft (the controller writes Kafka's snapshot format: record batches framed by
  // SnapshotHeader/Footer).
  //
  // The newest snapshot, nullopt when there is none.
  virtual std::optional<offset_and_epoch> latest_snapshot() const = 0;
  // The payload of snapshot `id`; nullopt when the log does not hold that snapshot (any more).
  virtual std::optional<std::vector<uint8_t>> read_snapshot(offset_and_epoch id) const = 0;
  // Up to `max_bytes` of snapshot `id` from `position` (none when position >= its size), and its size: what
  // one FetchSnapshot answer carries, without reading the rest. nullopt as read_snapshot.
  virtual std::optional<snapshot_chunk> read_snapshot_chunk(offset_and_epoch id, int64_t position,
                                                            int64_t max_bytes) const = 0;
  // Stores a snapshot of the prefix before id.offset (start_offset() <= id.offset <= end_offset(), id.epoch
  // the epoch of entry id.offset - 1, or the previous snapshot's epoch when that entry is not held). Durable
  // when it returns success (snapshots are rare; they are written and synced at once). Entries are not
  // deleted.
  virtual bool write_snapshot(offset_and_epoch id, std::span<const uint8_t> payload) = 0;
  // Drops every entry before `offset` (offset <= latest_snapshot()->offset): start_offset() becomes `offset`
  // (or less: storage drops whole segments only, and start_offset() reports what is still held).
  virtual void delete_before(int64_t offset) = 0;
  // Replaces the whole log by a snapshot fetched from the leader: every entry is removed, the snapshot is
  // stored (durably) and start_offset() == end_offset() == id.offset, last_fetched_epoch() == id.epoch.
  virtual bool install_snapshot(offset_and_epoch id, std::span<const uint8_t> payload) = 0;
  // install_snapshot() for a snapshot whose file the glue already wrote and synced (away from the replica's
  // thread): the log takes it as its latest snapshot and replaces every entry by it. False when the log
  // cannot (no stored snapshot `id`, or the log failed).
  virtual bool install_stored_snapshot(offset_and_epoch id) = 0;
};

// The log in memory, with a per-epoch index (the leader epoch cache) so end_offset_for_epoch is a short scan,
// and its snapshots in memory. Entries before start_offset() are gone once delete_before() or
// install_snapshot() dropped them; the snapshot at the log start then answers for them (Kafka's
// KafkaMetadataLog: endOffsetForEpoch and lastFetchedEpoch fall back to the earliest snapshot's epoch).
class memory_raft_log final : public raft_log {
 public:
  memory_raft_log() = default;

  int64_t start_offset() const override { return _start_offset; }
  int64_t end_offset() const override { return _start_offset + static_cast<int64_t>(_entries.size()); }
  int32_t last_fetched_epoch() const override {
    return _entries.empty() ? _start_epoch : _entries.back().epoch;
  }
  offset_and_epoch end_offset_for_epoch(int32_t epoch) const override;
  std::vector<log_entry> read(int64_t from_offset, size_t max_entries) const override;
  void append(std::span<const log_entry> entries) override;
  void truncate_to(int64_t offset) override;
  std::optional<offset_and_epoch> latest_snapshot() const override;
  std::optional<std::vector<uint8_t>> read_snapshot(offset_and_epoch id) const override;
  std::optional<snapshot_chunk> read_snapshot_chunk(offset_and_epoch id, int64_t position,
                                                    int64_t max_bytes) const override;
  bool write_snapshot(offset_and_epoch id, std::span<const uint8_t> payload) override;
  void delete_before(int64_t offset) override;
  bool install_snapshot(offset_and_epoch id, std::span<const uint8_t> payload) override;
  // What a glue's file write is for this log: the payload of snapshot `id`, held apart until
  // install_stored_snapshot(id) takes it.
  void store_snapshot(offset_and_epoch id, std::vector<uint8_t> payload);
  bool install_stored_snapshot(offset_and_epoch id) override;

  // The entries held, from start_offset().
  const std::vector<log_entry>& entries() const { return _entries; }
  // The epoch of the entry before start_offset() (the snapshot the log starts at); 0 when the log starts at
  // 0.
  int32_t start_epoch() const { return _start_epoch; }
  // The entry at `offset`, nullptr when it is not held.
  const log_entry* entry_at(int64_t offset) const {
    if (offset < _start_offset || offset >= end_offset()) return nullptr;
    return &_entries[static_cast<size_t>(offset - _start_offset)];
  }

 private:
  struct epoch_start {
    int32_t epoch;
    int64_t start_offset;
  };
  struct snapshot {
    offset_and_epoch id;
    std::vector<uint8_t> payload;
  };
  int64_t _start_offset = 0;
  int32_t _start_epoch = 0;
  std::vector<log_entry> _entries;   // from _start_offset
  std::vector<epoch_start> _epochs;  // ascending epochs of the held entries, each with its first offset held
  std::vector<snapshot> _snapshots;  // ascending ids
  std::vector<snapshot> _stored;     // store_snapshot(), not installed yet
};

}  // namespace mala::raft
