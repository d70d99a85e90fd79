// Kafka's rules for topic names (org.apache.kafka.common.internals.Topic): which names are legal, which are
// internal, and which collide in metric names. Used by the controller (CreateTopics, AlterConfigs) and the
// broker's handlers (DescribeConfigs, DescribeTopicPartitions), so both answer with the same messages.
//
// Pure functions: safe from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mala::controller {

// Topic.validate: nullopt for a legal name, else the InvalidTopicException message
// ("Topic name is invalid: '.' is not allowed").
std::optional<std::string> invalid_topic_name_reason(std::string_view name);

// Topic.isInternal: __consumer_offsets, __transaction_state, __share_group_state.
bool is_internal_topic(std::string_view name);

// Metric names cannot tell '.' from '_', so Kafka refuses a topic whose name differs from an existing one
// only there (Topic.hasCollisionChars / unifyCollisionChars).
bool has_collision_chars(std::string_view name);
std::string unify_collision_chars(std::string name);

}  // namespace mala::controller
