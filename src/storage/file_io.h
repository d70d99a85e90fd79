// Small POSIX file helpers shared by the storage library (internal: not part of include/mala/storage). Every
// failure is a kafka_storage_error status naming the path and the errno text, so a log line says what broke
// where. The calls that change a file (writes, truncations, block reservations, syncs) go through the
// wrappers here, which consult the test fault injector (mala/storage/io_faults.h) first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "mala/common/result.h"
#include "mala/storage/io_faults.h"

namespace mala::storage::detail {

status io_error(std::string_view what, const std::filesystem::path& path, int err);
// The injected fault for this call (error 0: none, the usual case).
io_fault injected_fault(io_operation operation, const std::filesystem::path& path, size_t bytes = 0);
// Writes all of data, retrying on EINTR and short writes. false with errno set on failure (part of the data
// may have been written).
bool write_all(int fd, std::string_view data, const std::filesystem::path& path);
// Reads up to n bytes at position, retrying on EINTR and short reads; fewer only at end of file. -1 with
// errno set on an I/O error.
int64_t pread_full(int fd, uint8_t* data, size_t n, int64_t position);
// The same at a position (pwrite).
bool pwrite_all(int fd, const uint8_t* data, size_t n, int64_t position, const std::filesystem::path& path);
// ftruncate; 0 or -1 with errno set.
int truncate_file(int fd, int64_t length, const std::filesystem::path& path);
// fsync (fdatasync with data_only); 0 or -1 with errno set.
int sync_file(int fd, const std::filesystem::path& path, bool data_only = false);
// Allocates disk blocks for [offset, offset + length) without changing the file size, so that writing
// there through a shared mapping cannot raise SIGBUS on a full disk. 0 when done, or when the file system
// cannot reserve blocks (then the pages stay sparse, as before); -1 with errno set (ENOSPC, EIO, ...).
int reserve_blocks(int fd, int64_t offset, int64_t length, const std::filesystem::path& path);
// Makes a directory's entries (a rename, a new file) durable.
status fsync_dir(const std::filesystem::path& dir);
// syncfs(2) of the file system holding `dir`: everything written to it so far (file data, mapped pages,
// directory entries) is durable, and a write-back error since any open of it is reported (Linux 5.8+). One
// call instead of an fsync per file: a clean shutdown of 20,000 logs.
status sync_file_system(const std::filesystem::path& dir);
// The file's contents, nullopt when it does not exist; reads at most max_bytes.
result<std::optional<std::string>> read_file_if_exists(const std::filesystem::path& path,
                                                       size_t max_bytes = std::numeric_limits<size_t>::max());

}  // namespace mala::storage::detail
