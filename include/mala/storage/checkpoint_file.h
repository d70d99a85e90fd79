// Kafka's text checkpoint files: a version line, a count line, then one entry per line. Written atomically
// (temp file, fsync, rename, fsync of the directory) so a crash leaves the old or the new file, never a mix.
//   recovery-point-offset-checkpoint, replication-offset-checkpoint, log-start-offset-checkpoint:
//       0\n<count>\n<topic> <partition> <offset>\n...
//   leader-epoch-checkpoint:  0\n<count>\n<epoch> <start offset>\n...
//   partition.metadata:       version: 0\ntopic_id: <base64 uuid>\n
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/result.h"
#include "mala/common/uuid.h"
#include "mala/storage/segment_files.h"

namespace mala::storage {

// Writes `contents` to `path` atomically: a temporary file, fsynced, renamed over `path`, the directory
// fsynced. With file_sync::later nothing is fsynced (the caller syncs the file and its directory later, off
// the shard); after a crash the file may then be missing or torn, so only files whose reader refuses a torn
// copy and can do without it are written so (producer snapshots: their CRC, and the log replays).
enum class file_sync { now, later };
status write_file_atomically(const std::filesystem::path& path, std::string_view contents,
                             file_sync sync = file_sync::now);

using offset_checkpoint = std::map<topic_partition, int64_t>;
status write_offset_checkpoint(const std::filesystem::path& path, const offset_checkpoint& offsets);
// A missing file is an empty checkpoint; a malformed one is an error naming the path and line.
result<offset_checkpoint> read_offset_checkpoint(const std::filesystem::path& path);

struct epoch_entry {
  int32_t epoch = 0;
  int64_t start_offset = 0;
  friend bool operator==(const epoch_entry&, const epoch_entry&) = default;
};
status write_epoch_checkpoint(const std::filesystem::path& path, const std::vector<epoch_entry>& entries,
                              file_sync sync = file_sync::now);
result<std::vector<epoch_entry>> read_epoch_checkpoint(const std::filesystem::path& path);

// Not fsynced (file_sync::later): the file guards against serving a deleted topic's data under a
// re-created topic of the same name; a power loss right after the creation can lose it, never records.
status write_partition_metadata(const std::filesystem::path& dir, const uuid& topic_id);
// nullopt when the file does not exist.
result<std::optional<uuid>> read_partition_metadata(const std::filesystem::path& dir);

}  // namespace mala::storage
