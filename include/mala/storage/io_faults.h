// Fault injection for the storage tests: makes the storage library's file writes, truncations, space
// reservations and syncs fail the way a full or broken disk does (ENOSPC, EFBIG, EIO), optionally after part
// of a write went through, so that tests can check what a failed append leaves behind (Kafka's equivalent is
// mocking the FileChannel). Off by default: every guarded system call then costs one test of an empty
// std::function. Reads are not guarded.
//
// Threads: the injector is process-wide and not synchronised. Install it before the storage calls it should
// affect and remove it after they finished (no storage I/O may run on another thread meanwhile).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>

namespace mala::storage {

enum class io_operation : uint8_t {
  write,     // a data write: segment appends (pwrite), checkpoint and snapshot files
  truncate,  // ftruncate: cutting a .log back, growing or trimming an index
  allocate,  // reserving disk blocks for index pages before they are written through the mapping
  sync,      // fsync / fdatasync / msync of a file or a directory
};

struct io_fault {
  int error = 0;              // errno to fail with; 0: no fault, the call goes ahead
  size_t written_before = 0;  // write only: bytes that reach the file before the error (a torn write)
};

// Called before each guarded call with the file's path and, for writes, the number of bytes to be written.
using io_fault_injector =
    std::function<io_fault(io_operation operation, const std::filesystem::path& path, size_t bytes)>;

// Installs the injector (an empty function removes it).
void set_io_fault_injector(io_fault_injector injector);

}  // namespace mala::storage
