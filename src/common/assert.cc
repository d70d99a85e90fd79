#include "mala/common/assert.h"

#include <cstdio>
#include <cstdlib>

#include "mala/common/logging.h"

namespace mala {

void invariant_failed(std::string_view condition, std::string_view file, int line, std::string_view detail) {
  // stderr first: the logger may be what is broken.
  std::fprintf(stderr, "mala: invariant failed: %.*s at %.*s:%d: %.*s\n", static_cast<int>(condition.size()),
               condition.data(), static_cast<int>(file.size()), file.data(), line,
               static_cast<int>(detail.size()), detail.data());
  std::fflush(stderr);
  subsystem_logger("invariant")->critical("invariant failed: {} at {}:{}: {}", condition, file, line, detail);
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
  std::abort();
}

}  // namespace mala
