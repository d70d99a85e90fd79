#include "mala/controller/topic_config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace mala::controller {

namespace {

std::vector<topic_config_key> make_keys() {
  using enum config_type;
  // clang-format off
  std::vector<topic_config_key> keys = {
    {.name = "cleanup.policy", .type = list, .default_value = "delete", .server_default_property = "log.cleanup.policy",
     .allowed = {"compact", "delete"},
     .doc = "delete (discard old segments by retention), compact (keep the latest value per key), or both."},
    {.name = "compression.gzip.level", .type = int32, .default_value = "-1",
     .server_default_property = "compression.gzip.level", .validator = topic_config_validator::gzip_level,
     .doc = "Compression level when compression.type is gzip."},
    {.name = "compression.lz4.level", .type = int32, .default_value = "9",
     .server_default_property = "compression.lz4.level", .min = 1, .max = 17,
     .doc = "Compression level when compression.type is lz4."},
    {.name = "compression.type", .type = string, .default_value = "producer",
     .server_default_property = "compression.type",
     .allowed = {"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"},
     .doc = "Final compression of the topic's data; producer keeps what the producer sent."},
    {.name = "compression.zstd.level", .type = int32, .default_value = "3",
     .server_default_property = "compression.zstd.level", .min = -131072, .max = 22,
     .doc = "Compression level when compression.type is zstd."},
    {.name = "delete.retention.ms", .type = int64, .default_value = "86400000",
     .server_default_property = "log.cleaner.delete.retention.ms", .min = 0,
     .doc = "How long tombstones are kept on compacted topics."},
    {.name = "file.delete.delay.ms", .type = int64, .default_value = "60000",
     .server_default_property = "log.segment.delete.delay.ms", .min = 0,
     .doc = "Time to wait before deleting a file from the filesystem."},
    {.name = "flush.messages", .type = int64, .default_value = "9223372036854775807",
     .server_default_property = "log.flush.interval.messages", .min = 1,
     .doc = "Messages written between two forced fsyncs."},
    {.name = "flush.ms", .type = int64, .default_value = "9223372036854775807",
     .server_default_property = "log.flush.interval.ms", .min = 0,
     .doc = "Time between two forced fsyncs."},
    {.name = "follower.replication.throttled.replicas", .type = list, .default_value = "",
     .validator = topic_config_validator::throttled_replicas,
     .doc = "Replicas whose follower side is throttled: * or partitionId:brokerId,..."},
    {.name = "index.interval.bytes", .type = int32, .default_value = "4096",
     .server_default_property = "log.index.interval.bytes", .min = 0,
     .doc = "Bytes of log between two offset index entries."},
    {.name = "leader.replication.throttled.replicas", .type = list, .default_value = "",
     .validator = topic_config_validator::throttled_replicas,
     .doc = "Replicas whose leader side is throttled: * or partitionId:brokerId,..."},
    {.name = "local.retention.bytes", .type = int64, .default_value = "-2",
     .server_default_property = "log.local.retention.bytes", .min = -2,
     .doc = "Local size retention with tiered storage; -2 uses retention.bytes."},
    {.name = "local.retention.ms", .type = int64, .default_value = "-2",
     .server_default_property = "log.local.retention.ms", .min = -2,
     .doc = "Local time retention with tiered storage; -2 uses retention.ms."},
    {.name = "max.compaction.lag.ms", .type = int64, .default_value = "9223372036854775807",
     .server_default_property = "log.cleaner.max.compaction.lag.ms", .min = 1,
     .doc = "Maximum time a message stays ineligible for compaction."},
    {.name = "max.message.bytes", .type = int32, .default_value = "1048588",
     .server_default_property = "message.max.bytes", .min = 0,
     .doc = "Largest record batch size allowed."},
    {.name = "message.timestamp.after.max.ms", .type = int64, .default_value = "3600000",
     .server_default_property = "log.message.timestamp.after.max.ms", .min = 0,
     .doc = "How far a record timestamp may lie in the future of the broker's clock (CreateTime)."},
    {.name = "message.timestamp.before.max.ms", .type = int64, .default_value = "9223372036854775807",
     .server_default_property = "log.message.timestamp.before.max.ms", .min = 0,
     .doc = "How far a record timestamp may lie in the past of the broker's clock (CreateTime)."},
    {.name = "message.timestamp.type", .type = string, .default_value = "CreateTime",
     .server_default_property = "log.message.timestamp.type", .allowed = {"CreateTime", "LogAppendTime"},
     .doc = "Whether record timestamps are the producer's (CreateTime) or the broker's append time."},
    {.name = "min.cleanable.dirty.ratio", .type = float64, .default_value = "0.5",
     .server_default_property = "log.cleaner.min.cleanable.ratio", .min = 0, .max = 1,
     .doc = "Dirty share of the log that makes it eligible for compaction."},
    {.name = "min.compaction.lag.ms", .type = int64, .default_value = "0",
     .server_default_property = "log.cleaner.min.compaction.lag.ms", .min = 0,
     .doc = "Minimum time a message stays uncompacted."},
    {.name = "min.insync.replicas", .type = int32, .default_value = "1",
     .server_default_property = "min.insync.replicas", .min = 1,
     .doc = "With acks=all, the minimum number of in-sync replicas that must acknowledge a write."},
    {.name = "preallocate", .type = boolean, .default_value = "false", .server_default_property = "log.preallocate",
     .doc = "Preallocate the file when creating a segment."},
    {.name = "remote.log.copy.disable", .type = boolean, .default_value = "false",
     .doc = "Stop copying segments to tiered storage."},
    {.name = "remote.log.delete.on.disable", .type = boolean, .default_value = "false",
     .doc = "Delete tiered data when tiered storage is disabled for the topic."},
    {.name = "remote.storage.enable", .type = boolean, .default_value = "false",
     .doc = "Tiered storage for the topic (not supported by Mala)."},
    {.name = "retention.bytes", .type = int64, .default_value = "-1", .server_default_property = "log.retention.bytes",
     .doc = "Maximum partition size before old segments are deleted; -1 = unlimited."},
    {.name = "retention.ms", .type = int64, .default_value = "604800000", .server_default_property = "log.retention.ms",
     .min = -1, .doc = "Maximum age of a segment before it is deleted; -1 = unlimited."},
    {.name = "segment.bytes", .type = int32, .default_value = "1073741824",
     .server_default_property = "log.segment.bytes", .min = 1048576,
     .doc = "Segment file size."},
    {.name = "segment.index.bytes", .type = int32, .default_value = "10485760",
     .server_default_property = "log.index.size.max.bytes", .min = 4,
     .doc = "Size of the index that maps offsets to file positions."},
    {.name = "segment.jitter.ms", .type = int64, .default_value = "0", .server_default_property = "log.roll.jitter.ms",
     .min = 0, .doc = "Maximum random jitter subtracted from segment.ms."},
    {.name = "segment.ms", .type = int64, .default_value = "604800000", .server_default_property = "log.roll.ms",
     .min = 1, .doc = "Time after which a segment is rolled even if not full."},
    {.name = "unclean.leader.election.enable", .type = boolean, .default_value = "false",
     .server_default_property = "unclean.leader.election.enable",
     .doc = "Allow electing a replica outside the ISR as a last resort, losing data."},
  };
  // clang-format on
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return keys;
}

const std::vector<topic_config_key>& keys_table() {
  static const std::vector<topic_config_key> keys = make_keys();
  return keys;
}

std::string_view trim(std::string_view s) {
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<double> parse_double(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::string copy(s);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || errno == ERANGE) return std::nullopt;
  return v;
}

std::string format_bound(double v) {
  if (std::floor(v) == v && std::abs(v) < 1e18) return std::to_string(static_cast<int64_t>(v));
  return std::to_string(v);
}

std::string_view java_type_name(config_type type) {
  switch (type) {
    case config_type::int16:
      return "SHORT";
    case config_type::int32:
      return "INT";
    case config_type::int64:
      return "LONG";
    case config_type::float64:
      return "DOUBLE";
    default:
      return "STRING";
  }
}

status invalid(const topic_config_key& key, std::string_view value, std::string_view why) {
  return status::error(error_code::invalid_config, "Invalid value " + std::string(value) +
                                                       " for configuration " + std::string(key.name) + ": " +
                                                       std::string(why));
}

std::string one_of(const std::vector<std::string_view>& allowed) {
  std::string out = "String must be one of: ";
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (i) out += ", ";
    out += allowed[i];
  }
  return out;
}

status check_range(const topic_config_key& key, std::string_view value, double v) {
  if (key.min && v < *key.min) return invalid(key, value, "Value must be at least " + format_bound(*key.min));
  if (key.max && v > *key.max)
    return invalid(key, value, "Value must be no more than " + format_bound(*key.max));
  return status::success();
}

bool valid_throttled_replica(std::string_view entry) {
  auto colon = entry.find(':');
  if (colon == std::string_view::npos) return false;
  auto partition = parse_config_long(trim(entry.substr(0, colon)));
  auto broker = parse_config_long(trim(entry.substr(colon + 1)));
  return partition && broker && *partition >= 0 && *broker >= 0;
}

status validate_value(const topic_config_key& key, const std::string& raw) {
  const std::string_view value = trim(raw);
  switch (key.type) {
    case config_type::boolean: {
      std::string lower(value);
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      if (lower != "true" && lower != "false")
        return invalid(key, raw, "Expected value to be either true or false");
      return status::success();
    }
    case config_type::int16:
    case config_type::int32:
    case config_type::int64: {
      auto v = parse_config_long(value);
      // Java's Short.parseShort / Integer.parseInt refuse values outside their type.
      const int64_t lo = key.type == config_type::int16   ? std::numeric_limits<int16_t>::min()
                         : key.type == config_type::int32 ? std::numeric_limits<int32_t>::min()
                                                          : std::numeric_limits<int64_t>::min();
      const int64_t hi = key.type == config_type::int16   ? std::numeric_limits<int16_t>::max()
                         : key.type == config_type::int32 ? std::numeric_limits<int32_t>::max()
                                                          : std::numeric_limits<int64_t>::max();
      if (!v || *v < lo || *v > hi) {
        return invalid(key, raw, "Not a number of type " + std::string(java_type_name(key.type)));
      }
      if (key.validator == topic_config_validator::gzip_level && *v != -1 && (*v < 1 || *v > 9)) {
        return invalid(key, raw, "Value must be between 1 and 9 or equal to -1");
      }
      return check_range(key, raw, static_cast<double>(*v));
    }
    case config_type::float64: {
      auto v = parse_double(value);
      if (!v) return invalid(key, raw, "Not a number of type DOUBLE");
      return check_range(key, raw, *v);
    }
    case config_type::list: {
      auto items = parse_config_list(value);
      if (key.validator == topic_config_validator::throttled_replicas) {
        const bool wildcard = items.size() == 1 && items[0] == "*";
        if (!wildcard && !std::all_of(items.begin(), items.end(), valid_throttled_replica)) {
          return invalid(key, raw,
                         "must be the literal '*' or a list of replicas in the following format: "
                         "[partitionId]:[brokerId],[partitionId]:[brokerId],...");
        }
      }
      if (!key.allowed.empty()) {
        for (const auto& item : items) {
          if (std::find(key.allowed.begin(), key.allowed.end(), item) == key.allowed.end())
            return invalid(key, raw, one_of(key.allowed));
        }
      }
      return status::success();
    }
    default: {
      if (!key.allowed.empty() &&
          std::find(key.allowed.begin(), key.allowed.end(), value) == key.allowed.end())
        return invalid(key, raw, one_of(key.allowed));
      return status::success();
    }
  }
}

}  // namespace

const topic_config_key* find_broker_quota_property(std::string_view name) {
  static const topic_config_key properties[] = {
      {.name = "follower.replication.throttled.rate",
       .type = config_type::int64,
       .default_value = "9223372036854775807",
       .min = 0,
       .doc =
           "A long representing the upper bound (bytes/sec) on replication traffic for followers enumerated "
           "in the property follower.replication.throttled.replicas (for each topic). This property can be "
           "only set dynamically. It is suggested that the limit be kept above 1MB/s for accurate "
           "behaviour."},
      {.name = "leader.replication.throttled.rate",
       .type = config_type::int64,
       .default_value = "9223372036854775807",
       .min = 0,
       .doc =
           "A long representing the upper bound (bytes/sec) on replication traffic for leaders enumerated in "
           "the property leader.replication.throttled.replicas (for each topic). This property can be only "
           "set dynamically. It is suggested that the limit be kept above 1MB/s for accurate behaviour."},
      {.name = "replica.alter.log.dirs.io.max.bytes.per.second",
       .type = config_type::int64,
       .default_value = "9223372036854775807",
       .min = 0,
       .doc =
           "A long representing the upper bound (bytes/sec) on disk IO used for moving replica between log "
           "directories on the same broker. This property can be only set dynamically. It is suggested that "
           "the limit be kept above 1MB/s for accurate behaviour. (Mala: accepted; replicas do not move "
           "between log directories.)"},
  };
  for (const auto& p : properties)
    if (p.name == name) return &p;
  return nullptr;
}

std::span<const topic_config_key> topic_config_keys() {
  return keys_table();
}

const topic_config_key* find_topic_config_key(std::string_view name) {
  const auto& keys = keys_table();
  auto it = std::lower_bound(keys.begin(), keys.end(), name,
                             [](const topic_config_key& k, std::string_view n) { return k.name < n; });
  return it != keys.end() && it->name == name ? &*it : nullptr;
}

std::optional<int64_t> parse_config_long(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::vector<std::string> parse_config_list(std::string_view value) {
  std::vector<std::string> out;
  value = trim(value);
  if (value.empty()) return out;
  size_t start = 0;
  while (true) {
    auto comma = value.find(',', start);
    out.emplace_back(trim(value.substr(start, comma == std::string_view::npos ? value.npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string join_config_list(const std::vector<std::string>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += values[i];
  }
  return out;
}

status validate_topic_config(std::string_view name, const std::optional<std::string>& value) {
  const topic_config_key* key = find_topic_config_key(name);
  if (!key)
    return status::error(error_code::invalid_config, "Unknown topic config name: " + std::string(name));
  if (!value) {
    return status::error(error_code::invalid_config,
                         "Null value not supported for topic configs: " + std::string(name));
  }
  return validate_value(*key, *value);
}

status validate_config_value(const topic_config_key& key, const std::string& value) {
  return validate_value(key, value);
}

status validate_topic_configs(const metadata::config_map& configs) {
  // LogConfig.validate: every name first (validateNames), then every value.
  for (const auto& [name, value] : configs) {
    if (!find_topic_config_key(name)) {
      return status::error(error_code::invalid_config, "Unknown topic config name: " + name);
    }
  }
  for (const auto& [name, value] : configs) {
    if (auto st = validate_topic_config(name, value); !st.ok()) return st;
  }
  // LogConfig.validate: the compaction lag bounds must be ordered.
  auto min_lag = configs.find("min.compaction.lag.ms");
  auto max_lag = configs.find("max.compaction.lag.ms");
  const int64_t min_value =
      min_lag == configs.end() ? 0 : parse_config_long(trim(min_lag->second)).value_or(0);
  const int64_t max_value = max_lag == configs.end() ? std::numeric_limits<int64_t>::max()
                                                     : parse_config_long(trim(max_lag->second)).value_or(0);
  if (min_value > max_value) {
    return status::error(error_code::invalid_config,
                         "conflict topic config setting min.compaction.lag.ms (" + std::to_string(min_value) +
                             ") > max.compaction.lag.ms (" + std::to_string(max_value) + ")");
  }
  // Kafka refuses tiered storage when remote.log.storage.system.enable is false; Mala has no tiered storage.
  if (auto remote = configs.find("remote.storage.enable"); remote != configs.end()) {
    std::string lower(trim(remote->second));
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (lower == "true") {
      return status::error(
          error_code::invalid_config,
          "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
          "with remote log storage.");
    }
  }
  return status::success();
}

std::vector<effective_topic_config> resolve_topic_configs(const metadata::metadata_image& image,
                                                          const std::string& topic, int32_t node_id,
                                                          const static_broker_config_lookup& static_config) {
  return resolve_topic_configs(image, image.find_configs(metadata::config_resource_type::topic, topic),
                               node_id, static_config);
}

std::vector<effective_topic_config> resolve_topic_configs(const metadata::metadata_image& image,
                                                          const metadata::config_map* topic_configs,
                                                          int32_t node_id,
                                                          const static_broker_config_lookup& static_config) {
  using metadata::config_resource_type;
  const metadata::config_map* node_configs =
      image.find_configs(config_resource_type::broker, std::to_string(node_id));
  const metadata::config_map* cluster_configs = image.find_configs(config_resource_type::broker, "");
  auto lookup = [](const metadata::config_map* map, std::string_view name) -> const std::string* {
    if (!map) return nullptr;
    auto it = map->find(std::string(name));
    return it == map->end() ? nullptr : &it->second;
  };

  std::vector<effective_topic_config> out;
  for (const auto& key : topic_config_keys()) {
    effective_topic_config e;
    e.key = &key;
    if (const auto* v = lookup(topic_configs, key.name)) {
      e.value = *v;
      e.source = config_source_id::dynamic_topic_config;
    } else if (!key.server_default_property.empty()) {
      if (const auto* node = lookup(node_configs, key.server_default_property)) {
        e.value = *node;
        e.source = config_source_id::dynamic_broker_config;
      } else if (const auto* cluster = lookup(cluster_configs, key.server_default_property)) {
        e.value = *cluster;
        e.source = config_source_id::dynamic_default_broker_config;
      } else if (auto stat = static_config ? static_config(key.server_default_property) : std::nullopt) {
        e.value = std::move(stat);
        e.source = config_source_id::static_broker_config;
      }
    }
    if (!e.value) {
      e.value = std::string(key.default_value);
      e.source = config_source_id::default_config;
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace mala::controller
