// Kafka's topic-level configs (LogConfig's ConfigDef plus the throttled-replica and tiered-storage keys):
// each key's name, type, default, valid values and the broker property that supplies its default
// (ServerTopicConfigSynonyms), and the validation Kafka applies when a topic is created or its configs are
// altered. One table for the controller (CreateTopics, IncrementalAlterConfigs) and the broker
// (DescribeConfigs with synonyms and sources), so names and ranges cannot drift apart.
//
// Pure data and functions: the table is immutable, every function may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/config.h"
#include "mala/common/result.h"
#include "mala/metadata/metadata_image.h"

namespace mala::controller {

// Validators beyond a plain numeric range / allowed-string set (Kafka's custom ConfigDef.Validators).
enum class topic_config_validator : uint8_t {
  none,
  gzip_level,          // CompressionType.GZIP.levelValidator: 1..9 or -1 (Deflater's default)
  throttled_replicas,  // ThrottledReplicaListValidator: "*" or partitionId:brokerId,...
};

struct topic_config_key {
  std::string_view name;
  config_type type = config_type::string;  // boolean, string, int32, int64, float64 or list
  std::string_view default_value;          // Kafka's default as DescribeConfigs prints it ("" = empty list)
  // The broker property whose value is the default for every topic (log.retention.ms for retention.ms); ""
  // when the key has none. DescribeConfigs lists it as the DYNAMIC_*/STATIC_BROKER_CONFIG synonym.
  std::string_view server_default_property;
  std::optional<double> min;  // inclusive numeric bounds (Range.atLeast / Range.between)
  std::optional<double> max;
  std::vector<std::string_view> allowed;  // ValidString.in / ValidList.in (case-sensitive, as Kafka)
  topic_config_validator validator = topic_config_validator::none;
  std::string_view doc;
};

// Every topic config key, sorted by name.
std::span<const topic_config_key> topic_config_keys();
const topic_config_key* find_topic_config_key(std::string_view name);

// The broker quota properties Kafka keeps apart from KafkaConfig (DynamicConfig.Broker):
// leader.replication.throttled.rate, follower.replication.throttled.rate and
// replica.alter.log.dirs.io.max.bytes.per.second. Dynamic only (per broker or cluster-wide), LONG at least 0;
// unset means no bound (Long.MAX_VALUE). DescribeConfigs lists them only once set, as read-only.
const topic_config_key* find_broker_quota_property(std::string_view name);

// Checks one key and value as Kafka's LogConfig.validate does for a topic: an unknown name is INVALID_CONFIG
// "Unknown topic config name: x"; a value that does not parse or is out of range INVALID_CONFIG with
// ConfigDef's message ("Invalid value abc for configuration retention.ms: Not a number of type LONG"); a
// null value INVALID_CONFIG "Null value not supported for topic configs: x".
status validate_topic_config(std::string_view name, const std::optional<std::string>& value);

// Checks one value against a key's type, range, allowed values and validator, with ConfigDef's messages
// (INVALID_CONFIG "Invalid value abc for configuration x: Not a number of type INT"). Also used for broker
// properties described as a topic_config_key.
status validate_config_value(const topic_config_key& key, const std::string& value);

// Checks a topic's full set of overrides: every key as above, then the checks that involve several keys or
// the broker (min.compaction.lag.ms <= max.compaction.lag.ms; remote.storage.enable=true is refused because
// Mala has no tiered storage, as Kafka refuses it when remote.log.storage.system.enable=false).
status validate_topic_configs(const metadata::config_map& configs);

// A LONG (or INT) config value: an optional '+' or '-', decimal digits, nothing else.
std::optional<int64_t> parse_config_long(std::string_view value);

// Java's ConfigDef LIST parsing: trimmed, split on commas, each element trimmed; "" is the empty list.
std::vector<std::string> parse_config_list(std::string_view value);
std::string join_config_list(const std::vector<std::string>& values);

// DescribeConfigs ConfigSource ids (Kafka's DescribeConfigsResponse.ConfigSource).
enum class config_source_id : int8_t {
  unknown = 0,
  dynamic_topic_config = 1,
  dynamic_broker_config = 2,
  dynamic_default_broker_config = 3,
  static_broker_config = 4,
  default_config = 5,
  dynamic_broker_logger_config = 6,
  client_metrics_config = 7,
  group_config = 8,
};

// The value in effect for a topic config and where it came from.
struct effective_topic_config {
  const topic_config_key* key = nullptr;
  std::optional<std::string> value;
  config_source_id source = config_source_id::default_config;
};

// The static broker value of a broker property (from the node's configuration file), or nullopt when the
// file does not set it. Supplied by the caller (node_config lives above this library's concerns).
using static_broker_config_lookup = std::function<std::optional<std::string>(std::string_view property)>;

// Resolves every topic config for `topic` in Kafka's order: topic override (dynamic topic config), the
// server default property set dynamically for broker `node_id`, then cluster-wide (resource name ""), then
// statically, then Kafka's default.
std::vector<effective_topic_config> resolve_topic_configs(const metadata::metadata_image& image,
                                                          const std::string& topic, int32_t node_id,
                                                          const static_broker_config_lookup& static_config);
// The same with the topic's overrides given explicitly (nullptr: none), for a topic that is not in the image
// yet (CreateTopics answers with the configs the new topic will have).
std::vector<effective_topic_config> resolve_topic_configs(const metadata::metadata_image& image,
                                                          const metadata::config_map* topic_configs,
                                                          int32_t node_id,
                                                          const static_broker_config_lookup& static_config);

}  // namespace mala::controller
