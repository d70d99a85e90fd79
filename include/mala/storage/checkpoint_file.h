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

// How durable a file write is when it returns.
enum class file_durability {
  // fsynced, and the directory entry too: survives a power loss.
  synced,
  // Written and renamed into place (atomic against a crash of the process), not fsynced: the page cache
  // writes it back. For files whose content the log itself can rebuild or that are rewritten from the
  // metadata at start-up; an fsync each (two on this path) made creating and leading thousands of partitions
  // take minutes (Kafka stopped fsyncing them too, KAFKA-15046).
  written,
};

// Writes `contents` to `path` atomically (a temp file renamed over it).
status write_file_atomically(const std::filesystem::path& path, std::string_view contents,
                             file_durability durability = file_durability::synced);

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
                              file_durability durability = file_durability::synced);
result<std::vector<epoch_entry>> read_epoch_checkpoint(const std::filesystem::path& path);

// Not fsynced (file_durability::written): the file guards against serving a deleted topic's data under a
// re-created topic of the same name; a power loss right after the creation can lose it, never records.
status write_partition_metadata(const std::filesystem::path& dir, const uuid& topic_id);
// nullopt when the file does not exist.
result<std::optional<uuid>> read_partition_metadata(const std::filesystem::path& dir);

}  // namespace mala::storage
