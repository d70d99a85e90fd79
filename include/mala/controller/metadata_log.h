// The metadata log as the controller sees it: an ordered log of KRaft metadata records (the partition
// __cluster_metadata-0) that only the active controller appends to, one batch per controller write, and that
// every node replays at start-up. The controller asks for an append and learns the committed offset; it never
// touches segments itself. The node's implementation is raft_metadata_log (the Raft quorum, KIP-595), stored
// in <metadata log dir>/__cluster_metadata-0/ (metadata.log.dir, by default the first log dir).
//
// Threads: a metadata_log is used by one thread, the controller's (shard 0).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "mala/common/result.h"
#include "mala/metadata/metadata_records.h"
#include "mala/storage/metadata_partition.h"
#include "mala/storage/partition_log.h"

namespace mala::controller {

// Kafka's metadata topic and its only partition, and the largest metadata batch
// (storage/metadata_partition.h, shared with the Raft log).
inline constexpr std::string_view metadata_topic_name = storage::metadata_topic_name;
inline constexpr int32_t metadata_partition = storage::metadata_partition;
inline constexpr int32_t max_metadata_batch_bytes = storage::max_metadata_batch_bytes;

// Where one append landed: offsets of its first and last record and the epoch it was written in.
struct metadata_append_result {
  int64_t first_offset = -1;
  int64_t last_offset = -1;
  int32_t epoch = -1;
};

// Called for each committed record in offset order. A non-ok status stops the replay and is returned by it.
using metadata_replay_callback =
    std::function<status(const metadata::versioned_metadata_record& record, int64_t offset, int32_t epoch)>;

class metadata_log {
 public:
  virtual ~metadata_log() = default;

  // The offset the next appended record will get. The controller uses it for values Kafka derives from the
  // write offset (a broker epoch is the offset of its RegisterBrokerRecord).
  virtual int64_t end_offset() const = 0;
  // The offset of the last committed record; -1 when the log is empty.
  virtual int64_t committed_offset() const = 0;
  // The current Raft epoch (the leader epoch stamped on appended batches).
  virtual int32_t epoch() const = 0;

  // Appends `records` as one batch, atomically (all or none), and returns once the batch is committed. An
  // empty span is refused (invalid_request); so is a batch over max_metadata_batch_bytes
  // (record_list_too_large). Storage failures come back as kafka_storage_error with nothing committed.
  virtual result<metadata_append_result> append(
      std::span<const metadata::versioned_metadata_record> records) = 0;

  // Calls `callback` for every committed record at or after `from_offset`, in order. Control batches (Raft's
  // LeaderChangeMessage, KRaftVersion/Voters records) are skipped. A record that does not decode is
  // corrupt_message, a record type Mala does not apply unsupported_version.
  virtual status replay(int64_t from_offset, const metadata_replay_callback& callback) const = 0;

  // KIP-853: the quorum's kraft.version (1 when its voters are in the log, 0 with static voters), and its
  // upgrade (Kafka's KRaftVersionAccessor; raft::replica::upgrade_kraft_version), leader only, `epoch` the
  // caller's. A log without a quorum (the unit tests' stand-in) is at 1 and refuses an upgrade.
  virtual int16_t kraft_version() const { return 1; }
  virtual status upgrade_kraft_version(int32_t epoch, int16_t version, bool validate_only) {
    (void)epoch;
    (void)validate_only;
    return status::error(error_code::invalid_update_version,
                         "no quorum to upgrade to kraft.version " + std::to_string(version));
  }
};

// The partition directory of the metadata log inside a log dir.
std::filesystem::path metadata_log_partition_dir(const std::filesystem::path& metadata_log_dir);

}  // namespace mala::controller
