// The KRaft metadata partition __cluster_metadata-0 as storage holds it, for the Raft log
// (raft::partition_raft_log) and the unit tests' stand-in metadata log: where it lives
// (<metadata.log.dir>/__cluster_metadata-0, Kafka's layout), its log settings, and how one write becomes one
// v2 record batch stamped with the Raft epoch as its partition leader epoch (KafkaRaftClient writes every
// batch with the epoch of the leader that appended it; followers keep it, so the leader epoch cache of every
// replica answers end_offset_for_epoch the same way).
//
// Threads: plain functions; the partition_log they touch is used on its owning thread only.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "mala/common/result.h"
#include "mala/storage/log_config.h"
#include "mala/storage/partition_log.h"

namespace mala::storage {

// Kafka's metadata topic and its only partition (Topic.CLUSTER_METADATA_TOPIC_NAME).
inline constexpr std::string_view metadata_topic_name = "__cluster_metadata";
inline constexpr int32_t metadata_partition = 0;

// KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the largest batch the metadata log accepts (8 MiB).
inline constexpr int32_t max_metadata_batch_bytes = 8 * 1024 * 1024;

// Kafka's metadata log settings: metadata.log.segment.bytes / metadata.log.segment.ms (1 GiB, 7 days), no
// time or size retention (segments go only after a snapshot covers them), batches up to the Raft limit.
log_config metadata_log_config();

// metadata.log.segment.bytes / metadata.log.segment.ms when the node sets them.
struct metadata_segment_settings {
  std::optional<int32_t> segment_bytes;
  std::optional<int64_t> segment_ms;
};

// The partition directory of the metadata log inside a log dir.
std::filesystem::path metadata_partition_dir(const std::filesystem::path& metadata_log_dir);

// Opens (creating when absent) <metadata_log_dir>/__cluster_metadata-0 and recovers it with a full scan:
// writers flush before they acknowledge, so at most a torn last batch is found and cut (it was never
// acknowledged), and no checkpoint a crash may have left behind is trusted. `clock_ms` may be empty (system
// clock). `worker`: where the log's file work runs off the shard (the log manager's: standby segments for
// rolls, renames and deletions of removed segments, index reservations); null: in place.
result<std::unique_ptr<partition_log>> open_metadata_partition(const std::filesystem::path& metadata_log_dir,
                                                               std::function<int64_t()> clock_ms = {},
                                                               metadata_segment_settings segments = {},
                                                               std::shared_ptr<file_worker> worker = nullptr);

// One record of a metadata batch: a null key for metadata records (MetadataRecordSerde), the control record
// key (ControlRecordType: version, type) for control records.
struct metadata_batch_record {
  std::optional<std::span<const uint8_t>> key;
  std::span<const uint8_t> value;
};

// Kafka's ControlRecordType.LEADER_CHANGE: the control record a KRaft leader writes at the start of its epoch
// (KIP-595), its value a LeaderChangeMessage.
inline constexpr int16_t leader_change_control_type = 2;

// The key of a control record (ControlRecordType): version (int16, 0) and type (int16), big-endian.
std::array<uint8_t, 4> control_record_key(int16_t type);
// The type in a control record key; nullopt for a key too short to hold one.
std::optional<int16_t> control_record_type(std::span<const uint8_t> key);

// Builds one uncompressed v2 batch of `records`, all stamped `timestamp_ms`; `control` sets the control
// attribute (Raft's LeaderChangeMessage, KIP-595). invalid_request for no records, record_list_too_large over
// max_metadata_batch_bytes.
result<std::vector<uint8_t>> build_metadata_batch(std::span<const metadata_batch_record> records,
                                                  int64_t timestamp_ms, bool control = false);

// Appends `batches` (one or more built by build_metadata_batch, concatenated) at the log end, stamped with
// `epoch` as partition leader epoch (the leader epoch cache learns the epoch's start). Not flushed.
// kafka_storage_error (the log is then offline) when the write fails.
result<append_result> append_metadata_batches(partition_log& log, std::span<uint8_t> batches, int32_t epoch);

}  // namespace mala::storage
