#include "mala/common/logging.h"

#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace mala {

namespace {
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
spdlog::level::level_enum& current_level() {
  static spdlog::level::level_enum level = spdlog::level::info;
  return level;
}
}  // namespace

std::shared_ptr<spdlog::logger> subsystem_logger(const std::string& name) {
  std::lock_guard lock(registry_mutex());
  if (auto existing = spdlog::get(name)) return existing;
  static auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(name, sink);
  logger->set_level(current_level());
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%^%l%$] %v");
  spdlog::register_logger(logger);
  return logger;
}

void set_log_level(const std::string& level) {
  std::lock_guard lock(registry_mutex());
  current_level() = spdlog::level::from_str(level);
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->set_level(current_level()); });
}

}  // namespace mala
