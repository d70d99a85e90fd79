// CLIENT_METRICS config resources: the client telemetry subscriptions of KIP-714 (Kafka's
// ClientMetricsConfigs), set with `kafka-client-metrics.sh --alter` and stored in the metadata log as
// ConfigRecords of resource type 16. A subscription names the metric name prefixes clients push ("*": all),
// the push interval, and which clients it applies to (regular expressions over the client's attributes).
//
// The controller validates a resource's whole set of configs after a change with parse_client_metrics_configs
// (ControllerConfigurationValidator); the broker parses the image's subscriptions with it to answer
// GetTelemetrySubscriptions. Pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/result.h"
#include "mala/metadata/metadata_image.h"

namespace mala::controller {

inline constexpr std::string_view client_metrics_metrics_config = "metrics";
inline constexpr std::string_view client_metrics_interval_config = "interval.ms";
inline constexpr std::string_view client_metrics_match_config = "match";
// A subscription's `metrics` entry that stands for every metric.
inline constexpr std::string_view client_metrics_all_metrics = "*";
inline constexpr int32_t client_metrics_default_interval_ms = 5 * 60 * 1000;
inline constexpr int32_t client_metrics_min_interval_ms = 100;
inline constexpr int32_t client_metrics_max_interval_ms = 3600000;

// The client attributes a `match` entry may test (ClientMetricsConfigs.ALLOWED_MATCH_PARAMS).
inline constexpr std::string_view client_metrics_match_attributes[] = {
    "client_instance_id",    "client_id",         "client_software_name", "client_software_version",
    "client_source_address", "client_source_port"};

// The longest attribute value a `match` pattern is tried on; a longer one does not match.
inline constexpr size_t client_metrics_max_matched_length = 1024;

// A compiled `match` pattern (a std::regex, kept out of this header).
struct compiled_client_metrics_pattern;

// One `match` entry's pattern: its text as configured, and the compiled form.
struct client_metrics_pattern {
  std::string text;
  std::shared_ptr<const compiled_client_metrics_pattern> regex;
};

struct client_metrics_subscription {
  std::string name;
  std::vector<std::string> metrics;  // name prefixes; empty: none
  int32_t interval_ms = client_metrics_default_interval_ms;
  // attribute -> the pattern its whole value must match (Java's Matcher.matches). Every entry must hold.
  std::map<std::string, client_metrics_pattern> match;

  // Whether a client with these attributes (name -> value; an attribute absent does not match) is subscribed.
  bool matches(const std::map<std::string, std::string>& attributes) const;
};

// Checks and parses a subscription's configs, as Kafka's ClientMetricsConfigs.validate does, with its errors:
// INVALID_REQUEST for an empty name, an unknown key ("Unknown client metrics configuration: x") or an
// interval outside 100..3600000; INVALID_CONFIG for an interval that is not an INT, an empty or repeated list
// entry
// ("Configuration 'metrics' values must not be duplicated.") and a bad `match` entry ("Illegal client
// matching pattern: x").
result<client_metrics_subscription> parse_client_metrics_configs(const std::string& name,
                                                                 const metadata::config_map& configs);

// Whether `name` is a key of CLIENT_METRICS resources and its value a LIST (APPEND / SUBTRACT apply).
bool is_client_metrics_config(std::string_view name);
bool is_client_metrics_list_config(std::string_view name);

}  // namespace mala::controller
