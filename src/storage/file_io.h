// Small POSIX file helpers shared by the storage library (internal: not part of include/mala/storage). Every
// failure is a kafka_storage_error status naming the path and the errno text, so a log line says what broke
// where.
#pragma once

#include <cstddef>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "mala/common/result.h"

namespace mala::storage::detail {

status io_error(std::string_view what, const std::filesystem::path& path, int err);
// Writes all of data, retrying on EINTR and short writes.
bool write_all(int fd, std::string_view data);
// Makes a directory's entries (a rename, a new file) durable.
status fsync_dir(const std::filesystem::path& dir);
// The file's contents, nullopt when it does not exist; reads at most max_bytes.
result<std::optional<std::string>> read_file_if_exists(const std::filesystem::path& path,
                                                       size_t max_bytes = std::numeric_limits<size_t>::max());

}  // namespace mala::storage::detail
