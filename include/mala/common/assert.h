// Invariant checks, always on (release builds too). A check that fails is a bug in Mala, never bad input (bad
// input gets a Kafka error code): writing on could corrupt a log or give this node a view no other node has,
// so the process logs what broke and where, flushes its logs and aborts.
//
//   MALA_ASSERT(offset >= start_offset(), "truncation to {} below the log start {}", offset, start_offset());
#pragma once

#include <string_view>

#include <fmt/format.h>

namespace mala {

// Logs "invariant failed: <condition> at <file>:<line>: <detail>" on stderr and the "invariant" logger,
// flushes every logger and aborts.
[[noreturn]] void invariant_failed(std::string_view condition, std::string_view file, int line,
                                   std::string_view detail);

}  // namespace mala

// The detail is a fmt format string and its arguments, formatted only when the check fails.
#define MALA_ASSERT(condition, ...)                                                         \
  do {                                                                                      \
    if (!(condition)) [[unlikely]] {                                                        \
      ::mala::invariant_failed(#condition, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
    }                                                                                       \
  } while (false)
