#include "handlers/broker_loggers.h"

#include <algorithm>
#include <memory>

#include "mala/common/logging.h"

namespace mala::broker::handlers {

namespace {

constexpr std::string_view root_logger = "root";

// log4j's names for spdlog's levels.
std::string kafka_level(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return "TRACE";
    case spdlog::level::debug:
      return "DEBUG";
    case spdlog::level::info:
      return "INFO";
    case spdlog::level::warn:
      return "WARN";
    case spdlog::level::err:
      return "ERROR";
    case spdlog::level::critical:
      return "FATAL";
    default:
      return "OFF";
  }
}

std::optional<spdlog::level::level_enum> spdlog_level(std::string_view kafka) {
  if (kafka == "TRACE") return spdlog::level::trace;
  if (kafka == "DEBUG") return spdlog::level::debug;
  if (kafka == "INFO") return spdlog::level::info;
  if (kafka == "WARN") return spdlog::level::warn;
  if (kafka == "ERROR") return spdlog::level::err;
  if (kafka == "FATAL") return spdlog::level::critical;
  return std::nullopt;
}

// The root level: the level every new subsystem logger starts with (set_log_level also sets the default
// logger, which spdlog keeps registered under the empty name).
spdlog::level::level_enum root_level() {
  auto d = spdlog::default_logger();
  return d ? d->level() : spdlog::level::info;
}

bool logger_exists(const std::string& name) {
  return name == root_logger || (!name.empty() && spdlog::get(name));
}

// AlterConfigOp.OpType ids.
constexpr int8_t op_set = 0;
constexpr int8_t op_delete = 1;
constexpr int8_t op_append = 2;
constexpr int8_t op_subtract = 3;

}  // namespace

std::vector<std::pair<std::string, std::string>> broker_logger_levels() {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back(std::string(root_logger), kafka_level(root_level()));
  spdlog::apply_all([&out](const std::shared_ptr<spdlog::logger>& l) {
    if (!l->name().empty() && l->name() != root_logger) out.emplace_back(l->name(), kafka_level(l->level()));
  });
  std::sort(out.begin(), out.end());
  return out;
}

status apply_broker_logger_changes(
    const std::vector<protocol::incremental_alter_configs_request::alterable_config>& configs,
    bool validate_only) {
  for (const auto& c : configs) {
    switch (c.config_operation) {
      case op_set:
        if (!logger_exists(c.name))
          return status::error(error_code::invalid_config, "Logger " + c.name + " does not exist!");
        if (!c.value || !spdlog_level(*c.value)) {
          return status::error(error_code::invalid_config,
                               "Cannot set the log level of " + c.name + " to " + c.value.value_or("null") +
                                   " as it is not a supported log level. Valid log levels are DEBUG, ERROR, "
                                   "FATAL, INFO, TRACE, WARN");
        }
        break;
      case op_delete:
        if (!logger_exists(c.name))
          return status::error(error_code::invalid_config, "Logger " + c.name + " does not exist!");
        if (c.name == root_logger) {
          return status::error(error_code::invalid_request,
                               "Removing the log level of the root logger is not allowed");
        }
        break;
      case op_append:
        return status::error(error_code::invalid_request,
                             "APPEND operation is not allowed for the BROKER_LOGGER resource");
      case op_subtract:
        return status::error(error_code::invalid_request,
                             "SUBTRACT operation is not allowed for the BROKER_LOGGER resource");
      default:
        return status::error(error_code::invalid_request,
                             "Unknown operation type " + std::to_string(c.config_operation) +
                                 " is not allowed for the BROKER_LOGGER resource");
    }
  }
  if (validate_only) return status::success();
  auto log = subsystem_logger("broker");
  for (const auto& c : configs) {
    if (c.config_operation == op_set) {
      const auto level = *spdlog_level(*c.value);
      if (c.name == root_logger) {
        set_log_level(std::string(spdlog::level::to_string_view(level).data(),
                                  spdlog::level::to_string_view(level).size()));
      } else if (auto l = spdlog::get(c.name)) {
        l->set_level(level);
      }
      log->warn("Updated the log level of {} to {}", c.name, *c.value);
    } else if (auto l = spdlog::get(c.name)) {
      l->set_level(root_level());
      log->warn("Unset the log level of {}", c.name);
    }
  }
  return status::success();
}

}  // namespace mala::broker::handlers
