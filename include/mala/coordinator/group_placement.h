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

namespace mala::coordinator {

// The internal topic holding group metadata and committed offsets (Kafka's Topic.GROUP_METADATA_TOPIC_NAME).
inline constexpr std::string_view offsets_topic_name = "__consumer_offsets";

// java.lang.String.hashCode() of the string whose UTF-8 bytes are `s`: s[0]*31^(n-1) + ... + s[n-1] over
// UTF-16 code units, in 32-bit two's complement arithmetic. Characters beyond the BMP count as their two
// surrogates; bytes that are not valid UTF-8 count as U+FFFD, as Java's decoder replaces them.
int32_t java_string_hash(std::string_view s);

// Kafka's Utils.abs: |n|, except that Integer.MIN_VALUE maps to 0 (not to itself).
inline int32_t kafka_abs(int32_t n) {
  return n == INT32_MIN ? 0 : (n < 0 ? -n : n);
}

// The __consumer_offsets partition of a group (GroupCoordinatorService.partitionFor).
inline int32_t group_partition(std::string_view group_id, int32_t num_partitions) {
  return kafka_abs(java_string_hash(group_id)) % num_partitions;
}

}  // namespace mala::coordinator
