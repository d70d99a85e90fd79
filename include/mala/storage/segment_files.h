// Kafka's on-disk names and byte formats for partition logs (see docs/storage-format.md). Everything that
// writes or reads a segment, index or checkpoint file takes its names and entry sizes from here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace mala::storage {

inline constexpr std::string_view log_suffix = ".log";
inline constexpr std::string_view offset_index_suffix = ".index";
inline constexpr std::string_view time_index_suffix = ".timeindex";
inline constexpr std::string_view txn_index_suffix = ".txnindex";
inline constexpr std::string_view deleted_suffix =
    ".deleted";  // segment files waiting for file.delete.delay.ms
inline constexpr std::string_view cleaned_suffix = ".cleaned";  // compaction output (cleaning_recovery.h)
inline constexpr std::string_view swap_suffix = ".swap";        // compaction swap (cleaning_recovery.h)
inline constexpr std::string_view partition_metadata_file = "partition.metadata";
inline constexpr std::string_view leader_epoch_checkpoint_file = "leader-epoch-checkpoint";
inline constexpr std::string_view recovery_point_checkpoint_file = "recovery-point-offset-checkpoint";
inline constexpr std::string_view replication_offset_checkpoint_file = "replication-offset-checkpoint";
inline constexpr std::string_view log_start_offset_checkpoint_file = "log-start-offset-checkpoint";
inline constexpr std::string_view clean_shutdown_file = ".kafka_cleanshutdown";
inline constexpr std::string_view delete_dir_suffix = "-delete";  // <topic>-<partition>.<uuid>-delete
inline constexpr std::string_view future_dir_suffix = "-future";  // <topic>-<partition>.<uuid>-future
// In a future log's dir once it holds everything and is being swapped in (Mala's; removed after the swap).
inline constexpr std::string_view swap_ready_file = "mala-swap-ready";

inline constexpr int32_t offset_index_entry_size = 8;  // relative offset u32 BE, file position u32 BE
inline constexpr int32_t time_index_entry_size = 12;   // timestamp i64 BE, relative offset u32 BE

// "00000000000000000042" for 42: the base offset as 20 decimal digits.
std::string offset_file_stem(int64_t base_offset);
// <dir>/<20-digit base offset><suffix>. (Not named segment_file: that is the open .log handle in
// log_segment.h, and a function of the same name would hide the class wherever both headers are included.)
std::filesystem::path segment_file_path(const std::filesystem::path& dir, int64_t base_offset,
                                        std::string_view suffix);
// The base offset of a segment file name ("00000000000000000042.log" -> 42), or nullopt if it is not one.
std::optional<int64_t> parse_segment_base_offset(std::string_view file_name, std::string_view suffix);

// "<topic>-<partition>" directory name and its inverse (the topic may itself contain '-').
std::string partition_dir_name(std::string_view topic, int32_t partition);
struct topic_partition {
  std::string topic;
  int32_t partition = 0;
  friend bool operator==(const topic_partition&, const topic_partition&) = default;
  friend auto operator<=>(const topic_partition&, const topic_partition&) = default;
};
std::optional<topic_partition> parse_partition_dir_name(std::string_view name);
// "<topic>-<partition>.<32 hex digits><suffix>" (a future or deleted partition dir, Kafka's
// LocalLog.logFutureDirName / logDeleteDirName): its partition, or nullopt if `name` is not one.
std::optional<topic_partition> parse_suffixed_partition_dir_name(std::string_view name,
                                                                 std::string_view suffix);

}  // namespace mala::storage
