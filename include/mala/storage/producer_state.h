// Idempotent-producer state of one partition replica, as Kafka's ProducerStateManager keeps it: for every
// producer id that wrote to the partition, its epoch and the metadata of its last 5 batches. The leader
// checks each produced batch against it before writing (epoch fencing, sequence order, duplicates of a
// retried batch answered with the original offsets and not written again); leader and follower appends update
// it afterwards. It survives restarts through snapshot files next to the segments, <offset, 20
// digits>.snapshot in Kafka's byte format (the state of every producer up to that offset, exclusive), plus a
// replay of the batches after the snapshot.
//
// Kafka's rules (ProducerAppendInfo, ProducerStateEntry, UnifiedLog.analyzeAndValidateProducerState):
// - producer id -1: not idempotent, never checked or tracked;
// - an epoch older than the producer's: INVALID_PRODUCER_EPOCH (since 2.7 instead of PRODUCER_FENCED on
// produce);
// - a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
// - the same epoch must continue at last sequence + 1 (INT32_MAX wraps to 0), else
// OUT_OF_ORDER_SEQUENCE_NUMBER;
// - a producer with no state here (never seen, expired, or its batches deleted by retention) may start at any
//   sequence: KIP-360 (Kafka 2.5) removed UNKNOWN_PRODUCER_ID from the produce path for this case;
// - a batch whose epoch and (first, last) sequence equal one of the last 5 batches is a duplicate: Kafka
// answers
//   with the original batch's offsets and writes nothing (the Java producer keeps at most 5 requests in
//   flight per connection with idempotence, max.in.flight.requests.per.connection <= 5).
// Transactions (ProducerStateManager's ongoingTxns / unreplicatedTxns,
// ProducerAppendInfo.appendEndTxnMarker):
// - a transactional batch of a producer without an open transaction opens one at its base offset; a
//   non-transactional batch while one is open is INVALID_TXN_STATE;
// - a marker (control batch, txn_marker.h) completes the open transaction, if any: completed_txn{first
// offset,
//   marker offset, aborted}, with the last stable offset Kafka records for the abort index (the first offset
//   of the earliest other open transaction, else the marker offset + 1). The transaction then waits among the
//   unreplicated ones until the high watermark passes its marker (on_high_watermark_updated);
// - first_unstable_offset() is the first offset of the earliest open or unreplicated transaction: the
//   partition's last stable offset is the smaller of it and the high watermark;
// - the leader checks a marker from the coordinator first (check_marker): producer epoch (>= the producer's,
//   > under transactions v2 except an idempotent retry, KAFKA-19999) and coordinator epoch;
// - snapshots carry each producer's open transaction (currentTxnFirstOffset): loading one re-creates the open
//   transactions, and the replay after it completes them on markers (every replica builds its own .txnindex
//   this way); producers with an open transaction never expire.
//
// KIP-890 part 1 (transaction verification, VerificationStateEntry): before the leader appends a
// transactional batch of a producer with no open transaction here, it asks the transaction coordinator
// whether the partition is in the producer's transaction. create_verification_guard() hands out the guard for
// that question (a fresh identity, kept per producer with the lowest sequence and epoch verified); the append
// then passes it in a txn_verification, and a transactional batch that would open a transaction is
// INVALID_TXN_STATE unless the guard is still the stored one. Any transactional batch or marker of the
// producer written since clears it, so an abort marker between the verification and the append makes the
// append fail (the ABA case).
//
// Threads: like partition_log, every method runs on the partition's owning shard; nothing is shared.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mala/common/result.h"
#include "mala/protocol/record_batch.h"
#include "mala/storage/checkpoint_file.h"
#include "mala/storage/file_worker.h"
#include "mala/storage/txn_marker.h"

namespace mala::storage {

class partition_log;

// ProducerStateEntry.NUM_BATCHES_TO_RETAIN.
inline constexpr size_t producer_batches_retained = 5;
// LogFileUtils.PRODUCER_SNAPSHOT_FILE_SUFFIX; the stem is the offset as 20 digits, like a segment's.
inline constexpr std::string_view producer_snapshot_suffix = ".snapshot";
// ProducerSnapshot.json: version int16 | crc uint32 (CRC-32C of the bytes after it) | entry count int32 |
// entries.
inline constexpr int16_t producer_snapshot_version = 1;
inline constexpr size_t producer_snapshot_crc_offset = 2;
inline constexpr size_t producer_snapshot_entries_offset = 6;  // the CRC covers from here to the end
// producerId int64 | epoch int16 | lastSequence int32 | lastOffset int64 | offsetDelta int32 | timestamp
// int64 | coordinatorEpoch int32 | currentTxnFirstOffset int64, all big-endian.
inline constexpr size_t producer_snapshot_entry_size = 46;
// Snapshots kept on disk (older ones are deleted when a new one is written).
inline constexpr size_t producer_snapshots_retained = 2;
// producer.id.expiration.ms (broker config, default one day) and producer.id.expiration.check.interval.ms.
inline constexpr int64_t default_producer_id_expiration_ms = 86'400'000;
inline constexpr int64_t default_producer_id_expiration_check_interval_ms = 600'000;

// Kafka's sequence arithmetic (DefaultRecordBatch.incrementSequence / decrementSequence): sequences are
// non-negative int32 values that wrap from INT32_MAX to 0.
int32_t increment_sequence(int32_t sequence, int32_t increment);
int32_t decrement_sequence(int32_t sequence, int32_t decrement);
// baseSequence + lastOffsetDelta, wrapped; no_sequence for a batch without a sequence.
int32_t batch_last_sequence(const protocol::record_batch_header& batch);

// One of the last batches of a producer.
struct producer_batch_metadata {
  int32_t first_sequence = protocol::no_sequence;
  int32_t last_sequence = protocol::no_sequence;
  int64_t first_offset = -1;
  int64_t last_offset = -1;
  int64_t timestamp = protocol::no_timestamp;  // the batch's maxTimestamp as written (LogAppendTime included)
  friend bool operator==(const producer_batch_metadata&, const producer_batch_metadata&) = default;
};

struct producer_state_entry {
  int64_t producer_id = protocol::no_producer_id;
  int16_t producer_epoch = protocol::no_producer_epoch;
  std::vector<producer_batch_metadata> batches;  // oldest first, at most producer_batches_retained
  int32_t coordinator_epoch = -1;                // of the last transaction marker
  std::optional<int64_t> current_txn_first_offset;
  int64_t last_timestamp = protocol::no_timestamp;  // expiry is measured from here

  int32_t last_sequence() const {
    return batches.empty() ? protocol::no_sequence : batches.back().last_sequence;
  }
  int64_t last_offset() const { return batches.empty() ? -1 : batches.back().last_offset; }
  friend bool operator==(const producer_state_entry&, const producer_state_entry&) = default;
};

// What check() found. A duplicate is answered with its offsets (and its timestamp as log_append_time, as
// Kafka does) and not written.
struct producer_check_outcome {
  std::optional<producer_batch_metadata> duplicate;
  bool is_duplicate() const { return duplicate.has_value(); }
};

// A transaction a marker ended (Kafka's CompletedTxn), with the LSO Kafka writes into an abort's index entry.
struct completed_txn {
  int64_t producer_id = protocol::no_producer_id;
  int64_t first_offset = -1;
  int64_t last_offset = -1;  // the marker's offset
  bool aborted = false;
  int64_t last_stable_offset = -1;
  friend bool operator==(const completed_txn&, const completed_txn&) = default;
};

// Where a replay sends the aborted transactions it completes (the partition's .txnindex): `truncate_from`
// drops the entries at and after the offset the replay starts from, `append` adds one per aborted
// transaction, in marker order.
struct aborted_txn_rebuild {
  std::function<status(int64_t offset)> truncate_from;
  std::function<status(const completed_txn& txn)> append;
};

// Who appends (Kafka's AppendOrigin): a client's batches get every check; the coordinators' own writes (a
// TxnOffsetCommit's transactional batch in __consumer_offsets, always at sequence 0) only the epoch and
// transaction checks, no sequence or duplicate check (ProducerAppendInfo checks sequences for CLIENT only).
enum class append_origin : uint8_t { client, coordinator };

// A producer's pending verification (Kafka's VerificationStateEntry).
struct verification_state_entry {
  uint64_t guard = 0;
  int32_t lowest_sequence = protocol::no_sequence;
  int16_t epoch = protocol::no_producer_epoch;
  int64_t timestamp_ms = 0;  // when created: expired after producer.id.expiration.ms as producers are
};

// What a leader's append of a client's batch carries when transaction verification is on: the guard the
// verification got (0: none, the producer had an open transaction when it was asked).
struct txn_verification {
  uint64_t guard = 0;
};

struct producer_state_config {
  int64_t producer_id_expiration_ms = default_producer_id_expiration_ms;  // producer.id.expiration.ms
};

// Snapshot bytes for `entries` in the order given (Kafka writes its hash map's order; Mala sorts by producer
// id). Only each producer's last batch is kept, as in Kafka.
std::string encode_producer_snapshot(std::span<const producer_state_entry> entries);
// CORRUPT_MESSAGE (with the reason) for a wrong version, CRC or length.
result<std::vector<producer_state_entry>> decode_producer_snapshot(std::span<const uint8_t> bytes);
std::filesystem::path producer_snapshot_path(const std::filesystem::path& dir, int64_t offset);

// Feeds every batch of [from, to) to `visit`, in offset order (whole batches; one that starts below `from` is
// skipped, one that starts at or after `to` ends the scan).
using log_batch_visitor = std::function<void(std::span<const uint8_t> batch)>;
using log_batch_scanner = std::function<status(int64_t from, int64_t to, const log_batch_visitor& visit)>;
// The scanner over a real log, through partition_log::read.
status scan_log_batches(const partition_log& log, int64_t from, int64_t to, const log_batch_visitor& visit);

class producer_state_manager {
 public:
  // Lists the snapshot files in the partition directory; the state itself is loaded by reload().
  static result<std::unique_ptr<producer_state_manager>> open(const std::filesystem::path& dir,
                                                              producer_state_config config = {});

  void update_config(const producer_state_config& config) { _config = config; }
  // Where the roll's snapshot files are written and old ones deleted, off the shard (the log's file worker):
  // in order, so a deletion never precedes the write of its file. Unset: in place.
  void set_file_worker(std::shared_ptr<file_worker> worker) { _worker = std::move(worker); }

  // Leader, before appending a produce request's batches (in request order, headers as the producer sent
  // them): INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_TXN_STATE for the whole request,
  // or a duplicate (the first batch that repeats one of its producer's last 5; the request is not written),
  // or ok. Each batch is checked against the state the batches before it would leave, as Kafka does.
  // A producer without state may start at any sequence (KIP-360: its state may have expired), except on a
  // partition whose log never held a record (`log_never_written`, log end offset 0), where it must start at 0
  // (Kafka 4.5, KAFKA-15591): otherwise a later batch that overtook a first one answered with a retriable
  // error would be written, and every retry of the first one refused as out of order.
  result<producer_check_outcome> check(const protocol::record_batch_header& batch,
                                       bool log_never_written = false) const;
  // With `verification` (transaction.partition.verification.enable; a client's append, or the group
  // coordinator's write of a TxnOffsetCommit): a transactional batch of a producer with no open transaction
  // is INVALID_TXN_STATE unless verification->guard is the producer's stored guard. A client's batch whose
  // base sequence is above the lowest sequence of its producer's pending verification is
  // OUT_OF_ORDER_SEQUENCE_NUMBER (Kafka's ProducerAppendInfo.checkSequence).
  result<producer_check_outcome> check(std::span<const protocol::record_batch_header> batches,
                                       bool log_never_written = false,
                                       append_origin origin = append_origin::client,
                                       const txn_verification* verification = nullptr) const;
  // Same over a produce request's records field (CORRUPT_MESSAGE if it does not split into batches).
  result<producer_check_outcome> check_records(std::span<const uint8_t> records,
                                               bool log_never_written = false,
                                               append_origin origin = append_origin::client,
                                               const txn_verification* verification = nullptr) const;

  // Leader, before writing a marker from the transaction coordinator (Kafka's appendEndTxnMarker with origin
  // COORDINATOR): INVALID_PRODUCER_EPOCH when the marker's epoch is below the producer's (transactions v2:
  // not above it, unless equal for a producer with no open transaction, KAFKA-19999's idempotent retry: the
  // marker is written and completes nothing), then TRANSACTION_COORDINATOR_FENCED when its coordinator epoch
  // is below the one of the producer's last marker. A producer unknown here takes any marker.
  status check_marker(const txn_marker_request& marker) const;

  // After an append (leader or follower) of whole batches with their offsets assigned: records the producers'
  // batches and transaction markers, and moves the map end offset past them. Never fails: the log already
  // holds the data, and replicated batches are not checked (Kafka's AppendOrigin.REPLICATION). Returns the
  // transactions the markers among them completed, in order (the caller indexes the aborted ones).
  std::vector<completed_txn> on_append(std::span<const uint8_t> records);
  // One data batch whose base offset in the log is `first_offset` (the header may predate offset assignment).
  // Control batches need their marker record: use on_append for those.
  void update(const protocol::record_batch_header& batch, int64_t first_offset);

  // Start-up, and after partition_log::truncate_to: drops snapshots above the log end offset or at/below the
  // log start offset; unless the state already ends at the log end offset, reloads it from the latest
  // remaining snapshot (a corrupt one is deleted and the one before it tried) and replays the log from there
  // to the log end; then snapshots at the log end offset. Producers idle longer than
  // producer.id.expiration.ms at `now_ms` are not loaded from the snapshot.
  // The replay rebuilds the log's .txnindex from where it starts (partition_log::truncate_aborted_txns, then
  // append_aborted_txn per aborted transaction), or what `rebuild` says for the scanner form.
  status reload(partition_log& log, int64_t now_ms);
  status reload(int64_t log_start_offset, int64_t log_end_offset, const log_batch_scanner& scan,
                int64_t now_ms, const aborted_txn_rebuild* rebuild = nullptr);
  // partition_log::truncate_fully_and_start_at: forgets every producer and transaction and deletes every
  // snapshot.
  status truncate_fully_and_start_at(int64_t offset);
  // The log start offset went up (retention, DeleteRecords). Producers are kept in memory, as in Kafka;
  // unreplicated transactions that ended below it are forgotten.
  void on_log_start_offset_incremented(int64_t log_start_offset);

  // KIP-113: the partition's log moved to `dir` (a move between log dirs). The state in memory is kept; the
  // snapshots are those in the new dir from now on.
  status move_to(const std::filesystem::path& dir);

  // Segment roll (before on_append of the batches that start the new segment, offset = the new segment's base
  // offset) and clean close (offset = the log end offset): writes <offset>.snapshot atomically unless a
  // snapshot at or above the offset exists, and deletes all but the newest producer_snapshots_retained
  // snapshots.
  // With file_sync::later the file is not fsynced: on_roll's caller hands it to the log's next flush. With a
  // file worker it is also written there (a flush that runs first finds no file and syncs none: a snapshot
  // lost in a crash is rebuilt from the log).
  // Returns the file written, none when a snapshot at or above the offset existed.
  result<std::optional<std::filesystem::path>> take_snapshot(int64_t offset, file_sync sync = file_sync::now);

  // Kafka's removeExpiredProducers: drops producers without an open transaction whose last batch timestamp is
  // producer.id.expiration.ms or more before now_ms. Returns how many were dropped.
  size_t remove_expired_producers(int64_t now_ms);

  // Transaction verification: 0 when the producer has an open transaction here at `epoch` (no verification
  // needed),
  // else its guard, created if absent (Kafka's maybeCreateVerificationStateEntry: a new guard for a producer
  // without one; an existing one keeps its guard and takes the lower sequence at the same epoch, or the
  // sequence of a higher epoch).
  uint64_t create_verification_guard(int64_t producer_id, int32_t base_sequence, int16_t epoch,
                                     int64_t now_ms);
  const verification_state_entry* find_verification(int64_t producer_id) const;
  // An open transaction of the producer at `epoch` (a transactions v2 producer's next transaction comes with
  // the bumped epoch, possibly before the previous one's marker).
  bool has_ongoing_txn(int64_t producer_id, int16_t epoch) const;
  // An open transaction of the producer at an epoch below `epoch`: under transactions v2 the previous
  // transaction, whose marker has not reached this partition yet.
  bool has_older_ongoing_txn(int64_t producer_id, int16_t epoch) const;

  // Transactions: the first offset of the earliest open or unreplicated transaction (none without either).
  std::optional<int64_t> first_unstable_offset() const;
  // The high watermark moved (leader or follower): transactions whose marker is below it are replicated.
  void on_high_watermark_updated(int64_t high_watermark);
  // Open transactions by first offset -> producer id (DescribeProducers' CurrentTxnStartOffset comes from the
  // producer entry).
  const std::map<int64_t, int64_t>& ongoing_txns() const { return _ongoing_txns; }
  size_t unreplicated_txn_count() const { return _unreplicated_txns.size(); }

  const producer_state_entry* find(int64_t producer_id) const;
  const std::unordered_map<int64_t, producer_state_entry>& producers() const { return _producers; }
  size_t producer_count() const { return _producers.size(); }
  // The offset up to which (exclusive) the state reflects the log.
  int64_t map_end_offset() const { return _map_end_offset; }
  std::vector<int64_t> snapshot_offsets() const;
  std::optional<int64_t> latest_snapshot_offset() const;

 private:
  producer_state_manager(std::filesystem::path dir, producer_state_config config)
      : _dir(dir.string()), _config(config) {}
  // Returns the transaction a marker completed.
  std::optional<completed_txn> apply_batch(std::span<const uint8_t> batch);
  void apply_data_batch(const protocol::record_batch_header& batch, int64_t first_offset);
  std::optional<completed_txn> complete_txn(producer_state_entry& entry, int64_t marker_offset, bool aborted);
  void delete_snapshot(int64_t offset);
  bool expired(const producer_state_entry& entry, int64_t now_ms) const;

  std::string _dir;  // a string: a std::filesystem::path allocates each component apart
  producer_state_config _config;
  std::shared_ptr<file_worker> _worker;
  std::unordered_map<int64_t, producer_state_entry> _producers;
  std::map<int64_t, int64_t> _ongoing_txns;             // first offset -> producer id
  std::map<int64_t, completed_txn> _unreplicated_txns;  // first offset -> the ended transaction
  std::map<int64_t, std::filesystem::path> _snapshots;  // by offset
  std::unordered_map<int64_t, verification_state_entry> _verifications;  // by producer id
  uint64_t _next_guard = 1;
  int64_t _map_end_offset = 0;
  int64_t _last_snapshot_offset = 0;
};

}  // namespace mala::storage
