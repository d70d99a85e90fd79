// KIP-1066: the log dirs of this broker its operator cordoned (`cordoned.log.dirs`), where no new replica is
// placed: the per-broker dynamic value in the metadata image (kafka-configs --entity-type brokers
// --entity-name <id> --alter --add-config cordoned.log.dirs=...) when there is one, else the static value;
// "*" is every log dir. Kafka ignores the key at the cluster default (a per-broker config), and so does this.
// The broker sends the dirs' ids in its heartbeats (broker_lifecycle) and DescribeLogDirs v5 reports them.
// Pure; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mala/common/config.h"
#include "mala/metadata/metadata_image.h"

namespace mala::broker {

inline constexpr std::string_view cordoned_log_dirs_config = "cordoned.log.dirs";

// The cordoned log dirs, as entries of config.log_dirs(), in that order. An entry of a dynamic value that is
// not one of the log dirs is left out (the static value was checked at start-up; the controller that stores a
// dynamic one cannot see this broker's log dirs).
std::vector<std::string> cordoned_log_dirs(const node_config& config, const metadata::metadata_image& image,
                                           int32_t node_id);

}  // namespace mala::broker
