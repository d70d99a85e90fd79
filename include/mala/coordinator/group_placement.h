// Where a consumer group lives: the partition of __consumer_offsets whose leader is the group's coordinator.
// Clients never compute this themselves (they ask FindCoordinator), but every broker of a cluster, and
// Kafka's own tools reading __consumer_offsets, must agree with Apache Kafka: partition =
// Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions, with Java's String.hashCode over the UTF-16
// code units of the id.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string_view>

#include "mala/common/java_hash.h"

namespace mala::coordinator {

// The internal topic holding group metadata and committed offsets (Kafka's Topic.GROUP_METADATA_TOPIC_NAME).
inline constexpr std::string_view offsets_topic_name = "__consumer_offsets";

using mala::java_string_hash;
using mala::kafka_abs;

// The __consumer_offsets partition of a group (GroupCoordinatorService.partitionFor).
inline int32_t group_partition(std::string_view group_id, int32_t num_partitions) {
  return kafka_abs(java_string_hash(group_id)) % num_partitions;
}

}  // namespace mala::coordinator
