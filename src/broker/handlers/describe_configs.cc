#include "handlers/describe_configs.h"

#include "handlers/authorization.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "handlers/admin_common.h"
#include "handlers/alter_configs_preprocess.h"
#include "handlers/broker_loggers.h"
#include "mala/controller/topic_config.h"

namespace mala::broker::handlers {

namespace {

using result_t = describe_configs_handler::response::describe_configs_result;
using entry_t = describe_configs_handler::response::describe_configs_resource_result;
using synonym_t = describe_configs_handler::response::describe_configs_synonym;
using resource_t = describe_configs_handler::request::describe_configs_resource;
using controller::config_source_id;

int8_t wire(config_source_id source) {
  return static_cast<int8_t>(source);
}

// DescribeConfigsResponse.ConfigType ids.
int8_t config_type_wire(std::optional<config_type> type) {
  if (!type) return 0;  // UNKNOWN
  switch (*type) {
    case config_type::boolean:
      return 1;
    case config_type::string:
      return 2;
    case config_type::int32:
      return 3;
    case config_type::int16:
      return 4;
    case config_type::int64:
      return 5;
    case config_type::float64:
      return 6;
    case config_type::list:
      return 7;
    case config_type::class_name:
      return 8;
    case config_type::password:
      return 9;
  }
  return 0;
}

// KafkaConfig.maybeSensitive: passwords, and keys whose type is not known (they might be secrets).
bool is_sensitive(std::optional<config_type> type) {
  return !type || *type == config_type::password;
}

// What DescribeConfigs needs to know about one broker property.
struct broker_key {
  std::optional<config_type> type;
  std::optional<std::string> default_value;  // Kafka's default as a string; nullopt when it is null
  bool read_only = false;                    // !DynamicBrokerConfig.AllDynamicConfigs.contains(name)
  std::string_view doc;
};

broker_key describe_broker_key(std::string_view name) {
  broker_key k;
  if (const auto* key = find_config_key(name)) {
    k.type = key->type;
    if (key->default_value) k.default_value = std::string(*key->default_value);
    k.read_only = key->update_mode == config_update_mode::read_only;
    k.doc = key->doc;
    return k;
  }
  // Kafka's broker quota properties (DynamicConfig.Broker): typed, read-only (not among KafkaConfig's dynamic
  // configs), without a DEFAULT_CONFIG synonym (not in KafkaConfig's definitions).
  if (const auto* quota = controller::find_broker_quota_property(name)) {
    k.type = quota->type;
    k.read_only = true;
    k.doc = quota->doc;
    return k;
  }
  // log.roll.jitter.ms has no default in Kafka: log.roll.jitter.hours (0) supplies it.
  if (name == "log.roll.jitter.hours") {
    k.type = config_type::int32;
    k.default_value = "0";
    k.read_only = true;
    k.doc =
        "Maximum jitter subtracted from the segment roll time, in hours; secondary to log.roll.jitter.ms.";
    return k;
  }
  // The broker properties behind topic defaults that Mala's node key table does not list (compression.type,
  // log.cleaner.*, ...): Kafka's broker defaults are the topic defaults, and every one of them is dynamically
  // updatable cluster-wide (DynamicLogConfig).
  for (const auto& t : controller::topic_config_keys()) {
    if (t.server_default_property == name) {
      k.type = t.type;
      if (name != "log.roll.jitter.ms") k.default_value = std::string(t.default_value);
      k.doc = t.doc;
      return k;
    }
  }
  // A dynamic key neither table knows: untyped (hence sensitive), and it is dynamic since it was set so.
  return k;
}

// DynamicBrokerConfig.brokerConfigSynonyms (listener-prefixed overrides are not supported by Mala).
std::vector<std::string_view> broker_synonyms(std::string_view name) {
  if (name == "log.roll.ms" || name == "log.roll.hours") return {"log.roll.ms", "log.roll.hours"};
  if (name == "log.roll.jitter.ms" || name == "log.roll.jitter.hours") {
    return {"log.roll.jitter.ms", "log.roll.jitter.hours"};
  }
  if (name == "log.flush.interval.ms") return {"log.flush.interval.ms", "log.flush.scheduler.interval.ms"};
  if (name == "log.retention.ms" || name == "log.retention.minutes" || name == "log.retention.hours") {
    return {"log.retention.ms", "log.retention.minutes", "log.retention.hours"};
  }
  return {name};
}

const std::string* find_value(const metadata::config_map* map, std::string_view name) {
  if (!map) return nullptr;
  auto it = map->find(std::string(name));
  return it == map->end() ? nullptr : &it->second;
}

// Java's ConfigDef.convertToString of a parsed value: what Kafka prints for a topic config however the value
// was spelled when it was set (" compact , delete" -> "compact,delete", "TRUE" -> "true", "+10" -> "10",
// "1" -> "1.0" for a double).
std::string render(config_type type, const std::string& raw) {
  auto trimmed = [](std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return std::string(s);
  };
  switch (type) {
    case config_type::list:
      return controller::join_config_list(controller::parse_config_list(raw));
    case config_type::boolean: {
      std::string v = trimmed(raw);
      std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
      return v;
    }
    case config_type::int16:
    case config_type::int32:
    case config_type::int64: {
      std::string v = trimmed(raw);
      std::string_view digits = v;
      if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
      int64_t n = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
      if (ec == std::errc() && end == digits.data() + digits.size()) return std::to_string(n);
      return v;
    }
    case config_type::float64: {
      std::string v = trimmed(raw);
      double d = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
      if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(d)) return v;
      char buf[64];
      auto [p, ec2] = std::to_chars(buf, buf + sizeof(buf), d);
      if (ec2 != std::errc()) return v;
      std::string out(buf, p);
      if (out.find_first_of(".e") == std::string::npos) out += ".0";  // Double.toString(1) = "1.0"
      return out;
    }
    default:
      return trimmed(raw);
  }
}

// The broker-side configuration as one node sees it: its static file (and Kafka's defaults) and the dynamic
// configs in the metadata image, for this node and cluster-wide.
struct broker_view {
  const node_config* config = nullptr;
  std::map<std::string, config_entry, std::less<>> values;  // every known key: static or default value
  const metadata::config_map* node_dynamic = nullptr;
  const metadata::config_map* cluster_dynamic = nullptr;

  broker_view(const node_config* c, const metadata::metadata_image& image, int32_t node_id) : config(c) {
    if (config) values = config->all_values();
    node_dynamic = image.find_configs(metadata::config_resource_type::broker, std::to_string(node_id));
    cluster_dynamic = image.find_configs(metadata::config_resource_type::broker, "");
  }

  // Set in the configuration file or with --override (Kafka's staticBrokerConfigs).
  std::optional<std::string> static_value(std::string_view name) const {
    auto it = values.find(name);
    if (it == values.end() || it->second.source == config_source::default_value) return std::nullopt;
    return it->second.value;
  }

  // The property's current value as KafkaConfig holds it: dynamic for this broker, dynamic cluster-wide,
  // static, default.
  std::optional<std::string> current_value(std::string_view name) const {
    if (const auto* v = find_value(node_dynamic, name)) return *v;
    if (const auto* v = find_value(cluster_dynamic, name)) return *v;
    if (auto it = values.find(name); it != values.end()) return it->second.value;
    return describe_broker_key(name).default_value;
  }

  // The broker's value for a topic config's server default property (KafkaConfig.extractLogConfigMap): the
  // retention, roll and flush times are derived from their hour/minute forms when the ms form is unset.
  std::string topic_default(const controller::topic_config_key& key) const {
    const std::string_view property = key.server_default_property;
    if (property.empty()) return std::string(key.default_value);
    if (const auto* v = find_value(node_dynamic, property)) return *v;
    if (const auto* v = find_value(cluster_dynamic, property)) return *v;
    if (config) {
      if (property == "log.retention.ms") return std::to_string(config->log_retention_ms());
      if (property == "log.roll.ms") return std::to_string(config->log_roll_ms());
      if (property == "log.flush.interval.ms") return std::to_string(config->log_flush_interval_ms());
      if (auto it = values.find(property); it != values.end() && it->second.value) return *it->second.value;
    }
    return std::string(key.default_value);
  }

  // ConfigHelper.configSynonyms: every synonym of `name` set dynamically for this broker, then cluster-wide,
  // then statically, then Kafka's non-null defaults; the entries before the first one for `name` itself are
  // dropped (Kafka's dropWhile).
  std::vector<synonym_t> synonyms(std::string_view name, bool sensitive) const {
    const auto names = broker_synonyms(name);
    std::vector<synonym_t> all;
    auto add = [&](std::string_view n, const std::optional<std::string>& value, config_source_id source) {
      synonym_t s;
      s.name = std::string(n);
      s.value = sensitive ? std::nullopt : value;
      s.source = wire(source);
      all.push_back(std::move(s));
    };
    for (auto n : names) {
      if (const auto* v = find_value(node_dynamic, n)) add(n, *v, config_source_id::dynamic_broker_config);
    }
    for (auto n : names) {
      if (const auto* v = find_value(cluster_dynamic, n))
        add(n, *v, config_source_id::dynamic_default_broker_config);
    }
    for (auto n : names) {
      if (auto v = static_value(n)) add(n, v, config_source_id::static_broker_config);
    }
    for (auto n : names) {
      if (auto v = describe_broker_key(n).default_value) add(n, v, config_source_id::default_config);
    }
    auto first = std::find_if(all.begin(), all.end(), [&](const synonym_t& s) { return s.name == name; });
    return {first, all.end()};
  }
};

result_t error_result(const resource_t& resource, error_code code, std::optional<std::string> message) {
  result_t r;
  r.resource_type = resource.resource_type;
  r.resource_name = resource.resource_name;
  r.error_code = to_wire(code);
  r.error_message = std::move(message);
  return r;
}

// The names asked for: null or empty means every config.
bool wanted(const resource_t& resource, std::string_view name) {
  if (!resource.configuration_keys || resource.configuration_keys->empty()) return true;
  const auto& keys = *resource.configuration_keys;
  return std::find(keys.begin(), keys.end(), name) != keys.end();
}

void finish_entry(entry_t& e, std::vector<synonym_t> all, bool include_synonyms, bool include_documentation,
                  std::optional<config_type> type, std::string_view doc) {
  e.config_source = all.empty() ? wire(config_source_id::default_config) : all.front().source;
  if (include_synonyms) e.synonyms = std::move(all);
  e.config_type = config_type_wire(type);
  // Kafka's documentationOf is null for keys it does not define.
  e.documentation =
      include_documentation && type ? std::optional<std::string>(std::string(doc)) : std::nullopt;
}

// ConfigHelper.createTopicConfigEntry.
entry_t topic_entry(const broker_view& view, const controller::topic_config_key& key,
                    const std::string* override_value, bool include_synonyms, bool include_documentation) {
  entry_t e;
  e.name = std::string(key.name);
  e.value = render(key.type, override_value ? *override_value : view.topic_default(key));
  e.read_only = false;
  e.is_sensitive = false;
  std::vector<synonym_t> all;
  if (override_value) {
    synonym_t s;
    s.name = e.name;
    s.value = e.value;
    s.source = wire(config_source_id::dynamic_topic_config);
    all.push_back(std::move(s));
  }
  if (!key.server_default_property.empty()) {
    for (auto& s : view.synonyms(key.server_default_property, false)) all.push_back(std::move(s));
  }
  finish_entry(e, std::move(all), include_synonyms, include_documentation, key.type, key.doc);
  return e;
}

// ConfigHelper.createBrokerConfigEntry; `per_broker` false for the cluster-wide default resource, whose
// synonyms are only the dynamic defaults.
entry_t broker_entry(const broker_view& view, const std::string& name, std::optional<std::string> value,
                     bool per_broker, bool include_synonyms, bool include_documentation) {
  const broker_key key = describe_broker_key(name);
  const bool sensitive = is_sensitive(key.type);
  entry_t e;
  e.name = name;
  e.value = sensitive ? std::nullopt : std::move(value);
  e.read_only = key.read_only;
  e.is_sensitive = sensitive;
  auto all = view.synonyms(name, sensitive);
  if (!per_broker) {
    std::erase_if(all, [](const synonym_t& s) {
      return s.source != wire(config_source_id::dynamic_default_broker_config);
    });
  }
  finish_entry(e, std::move(all), include_synonyms, include_documentation, key.type, key.doc);
  return e;
}

result_t describe_topic(const broker_view& view, const metadata::metadata_image& image,
                        const resource_t& resource, bool include_synonyms, bool include_documentation) {
  if (auto reason = invalid_topic_name_reason(resource.resource_name)) {
    return error_result(resource, error_code::invalid_topic_exception, *reason);
  }
  result_t r = error_result(resource, error_code::none, std::string());
  if (!image.find_topic(resource.resource_name)) {
    // Kafka sets only the code here (the message keeps the schema's default, "").
    r.error_code = to_wire(error_code::unknown_topic_or_partition);
    return r;
  }
  const auto* overrides = image.find_configs(metadata::config_resource_type::topic, resource.resource_name);
  for (const auto& key : controller::topic_config_keys()) {
    if (!wanted(resource, key.name)) continue;
    r.configs.push_back(
        topic_entry(view, key, find_value(overrides, key.name), include_synonyms, include_documentation));
  }
  return r;
}

result_t describe_broker(const broker_view& view, int32_t node_id, const resource_t& resource,
                         bool include_synonyms, bool include_documentation) {
  result_t r = error_result(resource, error_code::none, std::string());
  if (resource.resource_name.empty()) {
    if (view.cluster_dynamic) {
      for (const auto& [name, value] : *view.cluster_dynamic) {
        if (wanted(resource, name)) {
          r.configs.push_back(
              broker_entry(view, name, value, false, include_synonyms, include_documentation));
        }
      }
    }
    return r;
  }
  const auto id = parse_java_int(resource.resource_name);
  if (!id) {
    return error_result(resource, error_code::invalid_request,
                        "Broker id must be an integer, but it is: " + resource.resource_name);
  }
  if (*id != node_id) {
    return error_result(resource, error_code::invalid_request,
                        "Unexpected broker id, expected " + std::to_string(node_id) +
                            " or empty string, but received " + resource.resource_name);
  }
  std::set<std::string> names;
  for (const auto& key : known_config_keys()) names.emplace(key.name);
  for (const auto& key : controller::topic_config_keys()) {
    if (!key.server_default_property.empty()) names.emplace(key.server_default_property);
  }
  names.emplace("log.roll.jitter.hours");
  for (const auto* dynamic : {view.node_dynamic, view.cluster_dynamic}) {
    if (!dynamic) continue;
    for (const auto& [name, value] : *dynamic) names.insert(name);
  }
  for (const auto& name : names) {
    if (!wanted(resource, name)) continue;
    r.configs.push_back(
        broker_entry(view, name, view.current_value(name), true, include_synonyms, include_documentation));
  }
  return r;
}

result_t describe_broker_loggers(int32_t node_id, const resource_t& resource) {
  if (resource.resource_name.empty()) {
    return error_result(resource, error_code::invalid_request, "Broker id must not be empty");
  }
  const auto id = parse_java_int(resource.resource_name);
  if (!id) {
    return error_result(resource, error_code::invalid_request,
                        "Broker id must be an integer, but it is: " + resource.resource_name);
  }
  if (*id != node_id) {
    return error_result(resource, error_code::invalid_request,
                        "Unexpected broker id, expected " + std::to_string(node_id) + " but received " +
                            resource.resource_name);
  }
  result_t r = error_result(resource, error_code::none, std::string());
  for (auto& [name, level] : broker_logger_levels()) {
    if (!wanted(resource, name)) continue;
    entry_t e;
    e.name = name;
    e.value = level;
    e.config_source = wire(config_source_id::dynamic_broker_logger_config);
    r.configs.push_back(std::move(e));
  }
  return r;
}

result_t describe_client_metrics(const metadata::metadata_image& image, const resource_t& resource) {
  if (resource.resource_name.empty()) {
    return error_result(resource, error_code::invalid_request,
                        "Client metrics subscription name must not be empty");
  }
  // Kafka lists the subscription's configs as stored, without filtering by the requested names.
  result_t r = error_result(resource, error_code::none, std::string());
  if (const auto* configs =
          image.find_configs(metadata::config_resource_type::client_metrics, resource.resource_name)) {
    for (const auto& [name, value] : *configs) {
      entry_t e;
      e.name = name;
      e.value = value;
      e.config_source = wire(config_source_id::client_metrics_config);
      r.configs.push_back(std::move(e));
    }
  }
  return r;
}

// Kafka 4.0's GroupConfig: each key's default comes from the broker's group coordinator setting.
struct group_config_key {
  std::string_view name;
  std::string_view broker_property;
  std::string_view default_value;
  std::string_view doc;
};
constexpr group_config_key group_config_keys[] = {
    {"consumer.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms", "5000",
     "The heartbeat interval given to the members of a consumer group."},
    {"consumer.session.timeout.ms", "group.consumer.session.timeout.ms", "45000",
     "The timeout to detect client failures when using the consumer group protocol."},
    {"share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms", "5000",
     "The heartbeat interval given to the members of a share group."},
    {"share.record.lock.duration.ms", "group.share.record.lock.duration.ms", "30000",
     "The record acquisition lock duration in milliseconds for share groups."},
    {"share.session.timeout.ms", "group.share.session.timeout.ms", "45000",
     "The timeout to detect client failures when using the share group protocol."},
};

result_t describe_group(const broker_view& view, const metadata::metadata_image& image,
                        const resource_t& resource, bool include_synonyms, bool include_documentation) {
  if (resource.resource_name.empty()) {
    return error_result(resource, error_code::invalid_request, "Group name must not be empty");
  }
  const auto* overrides = image.find_configs(metadata::config_resource_type::group, resource.resource_name);
  result_t r = error_result(resource, error_code::none, std::string());
  for (const auto& key : group_config_keys) {
    if (!wanted(resource, key.name)) continue;
    const auto* override_value = find_value(overrides, key.name);
    entry_t e;
    e.name = std::string(key.name);
    e.value = render(config_type::int32,
                     override_value
                         ? *override_value
                         : view.current_value(key.broker_property).value_or(std::string(key.default_value)));
    std::vector<synonym_t> all;
    synonym_t s;
    s.name = e.name;
    s.value = e.value;
    s.source = wire(override_value ? config_source_id::group_config : config_source_id::default_config);
    all.push_back(std::move(s));
    finish_entry(e, std::move(all), include_synonyms, include_documentation, config_type::int32, key.doc);
    r.configs.push_back(std::move(e));
  }
  return r;
}

}  // namespace

describe_configs_handler::response describe_configs_handler::handle(request_context& ctx, const request& req,
                                                                    int16_t version) {
  response resp;
  // Kafka sorts resources by authorization first and throws on a type it does not know: the whole request
  // fails (DescribeConfigsRequest.getErrorResponse).
  for (const auto& resource : req.resources) {
    if (is_known_config_resource_type(resource.resource_type)) continue;
    for (const auto& each : req.resources) {
      resp.results.push_back(error_result(each, error_code::invalid_request,
                                          std::string(default_error_message(error_code::invalid_request))));
    }
    return resp;
  }
  const auto image = ctx.services.metadata->current();
  const int32_t node_id = ctx.services.node_id;
  const broker_view view(ctx.services.config, *image, node_id);
  const bool synonyms = req.include_synonyms;
  const bool documentation = version >= 3 && req.include_documentation;
  for (const auto& resource : req.resources) {
    if (const error_code refused = config_resource_refusal(ctx, acl_operation::describe_configs,
                                                           resource.resource_type, resource.resource_name);
        refused != error_code::none) {
      resp.results.push_back(error_result(resource, refused, std::nullopt));
      continue;
    }
    switch (resource.resource_type) {
      case config_resource_topic:
        resp.results.push_back(describe_topic(view, *image, resource, synonyms, documentation));
        break;
      case config_resource_broker:
        resp.results.push_back(describe_broker(view, node_id, resource, synonyms, documentation));
        break;
      case config_resource_broker_logger:
        resp.results.push_back(describe_broker_loggers(node_id, resource));
        break;
      case config_resource_client_metrics:
        resp.results.push_back(describe_client_metrics(*image, resource));
        break;
      default:
        resp.results.push_back(describe_group(view, *image, resource, synonyms, documentation));
        break;
    }
  }
  return resp;
}

}  // namespace mala::broker::handlers
