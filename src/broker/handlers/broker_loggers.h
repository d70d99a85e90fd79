// Kafka's BROKER_LOGGER config resource (KIP-412) over Mala's spdlog loggers: DescribeConfigs lists "root"
// and every subsystem logger with its level in Kafka's words (INFO, DEBUG, ...); IncrementalAlterConfigs SETs
// a level or DELETEs a logger's own level (it follows root again), checked as Kafka's RuntimeLoggerManager
// does. Setting "root" sets every logger. Levels are process-wide, like log4j's.
//
// Threads: spdlog's registry and loggers are thread-safe; callable from any shard.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mala/common/result.h"
#include "mala/protocol/messages/incremental_alter_configs_request.h"

namespace mala::broker::handlers {

// (logger name, level) for "root" and every registered logger, sorted by name.
std::vector<std::pair<std::string, std::string>> broker_logger_levels();

// RuntimeLoggerManager.applyChangesForResource for a resource already known to name this node: validates
// every operation first (unknown logger: INVALID_CONFIG; level outside FATAL/ERROR/WARN/INFO/DEBUG/TRACE:
// INVALID_CONFIG; DELETE of root, APPEND, SUBTRACT, unknown operations: INVALID_REQUEST), then applies them
// unless validate_only.
status apply_broker_logger_changes(
    const std::vector<protocol::incremental_alter_configs_request::alterable_config>& configs,
    bool validate_only);

}  // namespace mala::broker::handlers
