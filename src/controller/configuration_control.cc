#include "mala/controller/configuration_control.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "mala/common/config.h"
#include "mala/common/tls_settings.h"
#include "mala/controller/client_metrics_config.h"
#include "mala/controller/feature_control.h"
#include "mala/controller/topic_names.h"

namespace mala::controller {

using metadata::config_map;
using metadata::config_resource_type;

std::optional<int32_t> parse_java_int(std::string_view text) {
  // Integer.parseInt takes one sign only.
  if (text.size() >= 2 && text[0] == '+' && (text[1] == '-' || text[1] == '+')) return std::nullopt;
  const auto value = parse_config_long(text);
  if (!value || *value < std::numeric_limits<int32_t>::min() || *value > std::numeric_limits<int32_t>::max())
    return std::nullopt;
  return static_cast<int32_t>(*value);
}

status check_broker_resource_name(const std::string& name, const alter_configs_check_rules& rules) {
  if (!rules.check_broker_names || name.empty()) return status::success();
  const auto id = parse_java_int(name);
  if (!id)
    return status::error(error_code::invalid_request, "Node id must be an integer, but it is: " + name);
  if (rules.this_node && *id != *rules.this_node) {
    return status::error(
        error_code::invalid_request,
        "Unexpected broker id, expected " + std::to_string(*rules.this_node) + ", but received " + name);
  }
  return status::success();
}

result<config_map> new_topic_configs(
    const std::vector<protocol::create_topics_request::creatable_topic_config>& configs) {
  config_map out;
  std::string null_configs;
  for (const auto& c : configs) {
    if (!c.value) {
      null_configs += (null_configs.empty() ? "" : ",") + c.name;
    } else {
      out[c.name] = *c.value;
    }
  }
  if (!null_configs.empty()) {
    return status::error(error_code::invalid_config,
                         "Null value not supported for topic configs: " + null_configs);
  }
  if (!out.empty()) {
    if (auto st = validate_topic_configs(out); !st.ok()) return st;
  }
  return out;
}

protocol::config_record config_record_for(int8_t resource_type, const std::string& resource_name,
                                          const std::string& name, std::optional<std::string> value) {
  protocol::config_record r;
  r.resource_type = resource_type;
  r.resource_name = resource_name;
  r.name = name;
  r.value = std::move(value);
  return r;
}

namespace {

// Java's String.split(","): trailing empty strings dropped, inner ones kept.
std::vector<std::string> java_split(const std::string& value) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = value.find(',', start);
    parts.push_back(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  while (!parts.empty() && parts.back().empty()) parts.pop_back();
  return parts;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += separator;
    out += parts[i];
  }
  return out;
}

std::string_view op_name(int8_t op) {
  switch (op) {
    case config_op_set:
      return "SET";
    case config_op_delete:
      return "DELETE";
    case config_op_append:
      return "APPEND";
    default:
      return "SUBTRACT";
  }
}

// APPEND / SUBTRACT on a list value as ConfigurationControlManager does it: the current value (or the key's
// default) split on commas without empty parts; APPEND adds the values not present yet, SUBTRACT removes
// them.
std::string apply_list_op(int8_t op, const std::optional<std::string>& current,
                          std::string_view default_value, const std::string& operand) {
  std::vector<std::string> parts;
  for (auto& p : java_split(current ? *current : std::string(default_value)))
    if (!p.empty()) parts.push_back(std::move(p));
  for (const auto& v : java_split(operand)) {
    auto it = std::find(parts.begin(), parts.end(), v);
    if (op == config_op_append && it == parts.end()) parts.push_back(v);
    if (op == config_op_subtract && it != parts.end()) parts.erase(it);
  }
  return join(parts, ",");
}

// The broker properties that can be changed through AlterConfigs on a BROKER resource: the ones Kafka treats
// as dynamic (DynamicBrokerConfig.AllDynamicConfigs) that Mala honours: node_config's keys, and the broker
// defaults of topic configs that node_config does not list (validated as their topic config). All are
// cluster-wide in Kafka (settable at the cluster default "" and per broker). Of Kafka's per-broker-only ones,
// SSL listeners' key and trust stores are dynamic (listener.name.<listener>.ssl.keystore.*, checked apart);
// listeners are not.
struct dynamic_broker_property {
  std::string_view name;
  // DynamicThreadPool / the acceptor's num.network.threads: a change must stay within half and double of the
  // value in effect.
  bool thread_count = false;
};
constexpr dynamic_broker_property dynamic_broker_properties[] = {
    // DynamicLogConfig.ReconfigurableConfigs: the broker defaults of topic configs
    // (ServerTopicConfigSynonyms).
    {"log.cleanup.policy"},
    {"log.flush.interval.messages"},
    {"log.flush.interval.ms"},
    {"log.index.interval.bytes"},
    {"log.index.size.max.bytes"},
    {"log.message.timestamp.after.max.ms"},
    {"log.message.timestamp.before.max.ms"},
    {"log.message.timestamp.type"},
    {"log.retention.bytes"},
    {"log.retention.ms"},
    {"log.roll.jitter.ms"},
    {"log.roll.ms"},
    {"log.segment.bytes"},
    {"log.segment.delete.delay.ms"},
    {"message.max.bytes"},
    {"min.insync.replicas"},
    {"unclean.leader.election.enable"},
    // DynamicThreadPool.ReconfigurableConfigs and SocketServer's num.network.threads.
    {"num.io.threads", true},
    {"num.network.threads", true},
    {"num.recovery.threads.per.data.dir", true},
    {"num.replica.fetchers", true},
};

// KIP-1066's cordoned log dirs: dynamic, per broker only (its paths are the broker's own).
constexpr std::string_view cordoned_log_dirs_property = "cordoned.log.dirs";

const dynamic_broker_property* find_dynamic_broker_property(std::string_view name) {
  for (const auto& p : dynamic_broker_properties)
    if (p.name == name) return &p;
  return nullptr;
}

// node_config's description of a broker property, in the form topic_config's validator takes.
std::optional<topic_config_key> broker_key_for_validation(std::string_view name) {
  if (const topic_config_key* quota = find_broker_quota_property(name)) return *quota;
  const config_key* key = find_config_key(name);
  if (!key) {
    // A topic default node_config does not list (log.message.timestamp.before.max.ms, log.roll.jitter.ms):
    // the topic config's type and range, under the broker property's name (Kafka's broker keys share them).
    for (const auto& t : topic_config_keys()) {
      if (t.server_default_property != name) continue;
      topic_config_key out = t;
      out.name = t.server_default_property;
      return out;
    }
    return std::nullopt;
  }
  topic_config_key out;
  out.name = key->name;
  out.type = key->type;
  if (key->min) out.min = static_cast<double>(*key->min);
  if (key->max) out.max = static_cast<double>(*key->max);
  out.allowed = key->allowed;
  return out;
}

std::string_view broker_default(std::string_view name) {
  const config_key* key = find_config_key(name);
  return key && key->default_value ? *key->default_value : std::string_view();
}

// Scala's Set.toString, as Kafka's "Cannot update these configs dynamically: Set(a, b)" prints it.
std::string scala_set(const std::vector<std::string>& names) {
  return "Set(" + join(names, ", ") + ")";
}

}  // namespace

configuration_control::configuration_control(metadata_writer& writer, int32_t node_id,
                                             static_broker_config_lookup static_config,
                                             config_change_follow_up follow_up)
    : _writer(writer),
      _node_id(node_id),
      _static_config(std::move(static_config)),
      _follow_up(std::move(follow_up)) {}

// The value of a broker property in effect on this node: dynamic per-broker, dynamic cluster-wide, static,
// default (DynamicBrokerConfig's precedence), with the dynamic maps given explicitly so that a change can be
// evaluated before it is written.
std::optional<std::string> configuration_control::broker_value(std::string_view name,
                                                               const config_map* per_broker,
                                                               const config_map* cluster) const {
  const std::string key(name);
  if (per_broker) {
    if (auto it = per_broker->find(key); it != per_broker->end()) return it->second;
  }
  if (cluster) {
    if (auto it = cluster->find(key); it != cluster->end()) return it->second;
  }
  if (_static_config) {
    if (auto v = _static_config(name)) return v;
  }
  if (const config_key* k = find_config_key(name); k && k->default_value)
    return std::string(*k->default_value);
  return std::nullopt;
}

api_error configuration_control::validate_broker_configs(const std::string& resource_name,
                                                         const config_map& props) const {
  std::vector<std::string> not_dynamic;
  std::vector<std::string> per_broker_only;
  for (const auto& [name, value] : props) {
    if (find_dynamic_broker_property(name) || find_broker_quota_property(name)) continue;
    // KIP-1066: per broker only (DynamicBrokerConfig.PerBrokerConfigs).
    if (name == cordoned_log_dirs_property) {
      if (resource_name.empty()) per_broker_only.push_back(name);
      continue;
    }
    // An SSL listener's key and trust stores (Kafka's reconfigurable SSL configs), per broker only: the files
    // are the broker's own.
    if (auto listener_key = parse_listener_ssl_key(name);
        listener_key && is_reconfigurable_tls_key(listener_key->second)) {
      if (resource_name.empty()) per_broker_only.push_back(name);
      continue;
    }
    not_dynamic.push_back(name);
  }
  if (!not_dynamic.empty()) {
    return error_of(error_code::invalid_request,
                    "Cannot update these configs dynamically: " + scala_set(not_dynamic));
  }
  if (!per_broker_only.empty()) {
    return error_of(error_code::invalid_request,
                    "Cannot update these configs at default cluster level, broker id must be specified: " +
                        scala_set(per_broker_only));
  }
  for (const auto& [name, value] : props) {
    auto key = broker_key_for_validation(name);
    if (!key) continue;
    if (auto st = validate_config_value(*key, value); !st.ok())
      return error_of(error_code::invalid_request, st.message);
  }
  if (auto it = props.find(std::string(cordoned_log_dirs_property)); it != props.end()) {
    // ConfigurationControlManager: only from metadata.version 4.3-IV0; ValidList.anyNonDuplicateValues; "*"
    // alone.
    if (_writer.image()->feature_level(std::string(metadata_version_feature)) <
        cordoned_log_dirs_metadata_version) {
      return error_of(error_code::invalid_config,
                      "The cordoned.log.dirs configuration value cannot be set because it requires "
                      "metadata.version >= 4.3-IV0");
    }
    const auto dirs = parse_config_list(it->second);
    for (size_t i = 0; i < dirs.size(); ++i) {
      if (std::find(dirs.begin(), dirs.begin() + static_cast<std::ptrdiff_t>(i), dirs[i]) !=
          dirs.begin() + static_cast<std::ptrdiff_t>(i))
        return error_of(error_code::invalid_request,
                        "Configuration 'cordoned.log.dirs' values must not be duplicated.");
    }
    if (dirs.size() > 1 && std::find(dirs.begin(), dirs.end(), "*") != dirs.end())
      return error_of(error_code::invalid_request,
                      "When cordoned.log.dirs is set to *, it must not contain other values");
  }
  // Thread pools may at most halve or double per change, measured against the value in effect on this node.
  const metadata::metadata_image& image = *_writer.image();
  const bool per_broker = !resource_name.empty();
  const config_map* node_dynamic = image.find_configs(config_resource_type::broker, std::to_string(_node_id));
  const config_map* cluster_dynamic = image.find_configs(config_resource_type::broker, "");
  for (const auto& [name, value] : props) {
    const auto* property = find_dynamic_broker_property(name);
    if (!property || !property->thread_count) continue;
    auto old_value = parse_config_long(broker_value(name, node_dynamic, cluster_dynamic).value_or("0"));
    auto new_value = parse_config_long(per_broker ? broker_value(name, &props, cluster_dynamic).value_or("0")
                                                  : broker_value(name, node_dynamic, &props).value_or("0"));
    if (!old_value || !new_value || *old_value == *new_value) continue;
    const std::string prefix =
        "Dynamic thread count update validation failed for " + name + "=" + std::to_string(*new_value);
    if (*new_value <= 0)
      return error_of(error_code::invalid_request, prefix + ", value should be at least 1");
    if (*new_value < *old_value / 2) {
      return error_of(
          error_code::invalid_request,
          prefix + ", value should be at least half the current value " + std::to_string(*old_value));
    }
    if (*new_value > *old_value * 2) {
      return error_of(error_code::invalid_request,
                      prefix + ", value should not be greater than double the current value " +
                          std::to_string(*old_value));
    }
  }
  return {};
}

api_error configuration_control::validate_client_metrics_resource(const std::string& name,
                                                                  const config_map& configs) {
  auto parsed = parse_client_metrics_configs(name, configs);
  if (!parsed) return error_of(parsed.error());
  return {};
}

api_error configuration_control::validate_topic_resource(const std::string& name,
                                                         const config_map& all_configs) const {
  if (name.empty()) return error_of(error_code::invalid_request, "Default topic resources are not allowed.");
  if (auto why = invalid_topic_name_reason(name)) return error_of(error_code::invalid_topic_exception, *why);
  if (auto st = validate_topic_configs(all_configs); !st.ok()) return error_of(st);
  if (!_writer.image()->find_topic(name)) {
    return error_of(error_code::unknown_topic_or_partition, "The topic '" + name + "' does not exist.");
  }
  return {};
}

// The course both AlterConfigs flavours share (ConfigurationControlManager.incrementalAlterConfigs and
// legacyAlterConfigs): the front checks (check_alter_configs_resources, a BROKER resource any node id), then
// records_for(resource, records) for each resource that passed them (its records count only if it returns no
// error); the records of all resources, with the follow-up records they imply, are written as one batch, so
// a batch too large for one user operation or a failed write is every resource's error. One answer per
// resource, in request order.
template <typename Response, typename Request, typename RecordsFor>
Response configuration_control::alter_resource_configs(const Request& request, RecordsFor records_for) {
  const metadata::metadata_image_ptr image = _writer.image();
  const auto verdict =
      check_alter_configs_resources(request.resources, alter_configs_check_rules{},
                                    [](const auto&) -> std::optional<status> { return std::nullopt; });
  std::vector<api_error> errors(request.resources.size());
  for (size_t i = 0; i < verdict.size(); ++i)
    if (verdict[i]) errors[i] = error_of(*verdict[i]);
  record_list records;
  for (size_t i = 0; i < request.resources.size(); ++i) {
    if (!errors[i].ok()) continue;
    record_list resource_records;
    errors[i] = records_for(request.resources[i], resource_records);
    if (!errors[i].ok()) continue;
    records.insert(records.end(), std::make_move_iterator(resource_records.begin()),
                   std::make_move_iterator(resource_records.end()));
  }
  if (_follow_up) _follow_up(*image, records);

  if (auto e = write_user_operation(_writer, records, records.size() > max_records_per_user_op,
                                    request.validate_only);
      !e.ok()) {
    for (auto& error : errors) error = e;
  }
  Response response;
  for (size_t i = 0; i < request.resources.size(); ++i) {
    auto& r = response.responses.emplace_back();
    r.error_code = to_wire(errors[i].code);
    r.error_message = errors[i].message;
    r.resource_type = request.resources[i].resource_type;
    r.resource_name = request.resources[i].resource_name;
  }
  return response;
}

protocol::incremental_alter_configs_response configuration_control::incremental_alter_configs(
    const protocol::incremental_alter_configs_request& request) {
  auto records_for = [this](
                         const protocol::incremental_alter_configs_request::alter_configs_resource& resource,
                         record_list& records) -> api_error {
    const auto type = static_cast<config_resource_type>(resource.resource_type);
    const bool is_topic = resource.resource_type == config_resource_topic;
    const bool is_client_metrics = resource.resource_type == config_resource_client_metrics;
    const config_map* current = _writer.image()->find_configs(type, resource.resource_name);
    config_map after = current ? *current : config_map{};
    for (const auto& c : resource.configs) {
      if (c.config_operation < config_op_set || c.config_operation > config_op_subtract) {
        return error_of(error_code::invalid_request,
                        "Unknown operations type " + std::to_string(static_cast<int>(c.config_operation)));
      }
      std::optional<std::string> old_value;
      if (auto it = after.find(c.name); it != after.end()) old_value = it->second;
      std::optional<std::string> new_value;
      if (c.config_operation == config_op_set) {
        new_value = c.value;
      } else if (c.config_operation == config_op_append || c.config_operation == config_op_subtract) {
        bool is_list = false;
        std::string_view default_value;
        if (is_topic) {
          const topic_config_key* key = find_topic_config_key(c.name);
          is_list = key && key->type == config_type::list;
          if (key) default_value = key->default_value;
        } else if (is_client_metrics) {
          is_list = is_client_metrics_list_config(c.name);  // both default to the empty list
        } else {
          const config_key* key = find_config_key(c.name);
          is_list = key && key->type == config_type::list;
          default_value = broker_default(c.name);
        }
        if (!is_list) {
          return is_topic || is_client_metrics
                     ? error_of(error_code::invalid_config,
                                "Can't " + std::string(op_name(c.config_operation)) + " to key " + c.name +
                                    " because its type is not LIST.")
                     : error_of(
                           error_code::invalid_config,
                           "Config value " +
                               std::string(c.config_operation == config_op_append ? "append" : "subtract") +
                               " is not allowed for config key: " + c.name);
        }
        new_value = apply_list_op(c.config_operation, old_value, default_value, c.value.value_or(""));
      }
      if (new_value) {
        after[c.name] = *new_value;
      } else {
        after.erase(c.name);
      }
      // Topics and subscriptions: only changes are written. Brokers: every key named, changed or not
      // (KAFKA-14136: the record is what makes brokers reload the value).
      if (resource.resource_type == config_resource_broker || new_value != old_value) {
        records.push_back(versioned(
            config_record_for(resource.resource_type, resource.resource_name, c.name, new_value), record_v0));
      }
    }
    if (is_client_metrics) return validate_client_metrics_resource(resource.resource_name, after);
    return is_topic ? validate_topic_resource(resource.resource_name, after)
                    : validate_broker_configs(resource.resource_name, after);
  };
  return alter_resource_configs<protocol::incremental_alter_configs_response>(request, records_for);
}

// The legacy flavour: the request's configs replace every override of the resource
// (ConfigurationControlManager.legacyAlterConfigs).
protocol::alter_configs_response configuration_control::alter_configs(
    const protocol::alter_configs_request& request) {
  auto records_for = [this](const protocol::alter_configs_request::alter_configs_resource& resource,
                            record_list& records) -> api_error {
    const auto type = static_cast<config_resource_type>(resource.resource_type);
    const bool is_topic = resource.resource_type == config_resource_topic;
    config_map wanted;
    for (const auto& c : resource.configs) wanted[c.name] = c.value.value_or("");
    // The broker validates only the request's own set (validateBrokerConfigChange on the request props).
    api_error error = resource.resource_type == config_resource_client_metrics
                          ? validate_client_metrics_resource(resource.resource_name, wanted)
                      : is_topic ? validate_topic_resource(resource.resource_name, wanted)
                                 : validate_broker_configs(resource.resource_name, wanted);
    if (!error.ok()) return error;
    const config_map* current = _writer.image()->find_configs(type, resource.resource_name);
    for (const auto& [name, value] : wanted) {
      std::optional<std::string> old_value;
      if (current) {
        if (auto it = current->find(name); it != current->end()) old_value = it->second;
      }
      if (resource.resource_type == config_resource_broker || old_value != value) {
        records.push_back(versioned(
            config_record_for(resource.resource_type, resource.resource_name, name, value), record_v0));
      }
    }
    if (current) {
      for (const auto& [name, value] : *current) {
        if (!wanted.contains(name)) {
          records.push_back(
              versioned(config_record_for(resource.resource_type, resource.resource_name, name, std::nullopt),
                        record_v0));
        }
      }
    }
    return {};
  };
  return alter_resource_configs<protocol::alter_configs_response>(request, records_for);
}

}  // namespace mala::controller
