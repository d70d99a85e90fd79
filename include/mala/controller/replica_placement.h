// Replica placement for new partitions (CreateTopics, CreatePartitions without a manual assignment): spreads
// leaders round-robin over the usable brokers and followers after them with a shifting stride, and across
// racks when brokers set broker.rack, in the spirit of Kafka's StripedReplicaPlacer and the rack-aware
// assignment of its older AdminUtils: every rack gets a replica of a partition before any rack gets a second.
//
// A pure function of its arguments (the seed replaces Kafka's random starting broker and shift), callable
// from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mala/common/result.h"

namespace mala::controller {

struct placement_broker {
  int32_t id = -1;
  std::optional<std::string> rack;
};

// Replica lists (leader first) for `partitions` partitions of `replication_factor` replicas each, over the
// usable (unfenced, not shutting down) `brokers`. Errors, as Kafka's placer reports them:
// INVALID_REPLICATION_FACTOR when no broker is usable or the factor exceeds the brokers, INVALID_PARTITIONS /
// INVALID_REPLICATION_FACTOR for non-positive counts.
result<std::vector<std::vector<int32_t>>> place_replicas(std::span<const placement_broker> brokers,
                                                         int32_t partitions, int32_t replication_factor,
                                                         uint64_t seed);

}  // namespace mala::controller
