// One spdlog logger per subsystem ("net", "broker", "storage", ...), created on first use and sharing one sink.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace mala {

// The logger for a subsystem; thread-safe.
std::shared_ptr<spdlog::logger> subsystem_logger(const std::string& name);

// Sets the level of every subsystem logger ("trace", "debug", "info", "warn", "error").
void set_log_level(const std::string& level);

}  // namespace mala
