#include "mala/controller/quorum_controller.h"

#include <fmt/ranges.h>
#include "mala/controller/partition_change.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "mala/common/config.h"
#include "mala/common/listener.h"
#include "mala/common/logging.h"
#include "mala/controller/replica_placement.h"
#include "mala/metadata/metadata_delta.h"

namespace mala::controller {

namespace {

using metadata::config_map;
using metadata::config_resource_type;
using metadata::metadata_image;
using metadata::versioned_metadata_record;
using record_list = std::vector<versioned_metadata_record>;

// The record versions Kafka writes at metadata.version 4.0-IV1 and later, as far as Mala's schemas go (see
// bootstrap_metadata_version): MetadataVersion.registerBrokerRecordVersion() / partitionRecordVersion(), v0
// for every record Kafka always writes at v0 (FeatureLevelRecord "cannot advance beyond 0").
constexpr int16_t register_broker_record_version = 3;
constexpr int16_t partition_record_version = 2;
constexpr int16_t v0 = 0;

// ConfigResource.Type ids as the AlterConfigs requests carry them.
// PartitionChangeRecord v2 from metadata.version 4.0-IV1 (MetadataVersion.partitionChangeRecordVersion).
constexpr int16_t partition_change_record_version = 2;
constexpr int8_t topic_resource = static_cast<int8_t>(config_resource_type::topic);
constexpr int8_t broker_resource = static_cast<int8_t>(config_resource_type::broker);

// AlterConfigOp.OpType ids (IncrementalAlterConfigs).
constexpr int8_t op_set = 0;
constexpr int8_t op_delete = 1;
constexpr int8_t op_append = 2;
constexpr int8_t op_subtract = 3;

// Kafka's ApiError: a code and a message that is null when Kafka sends none (ApiError.NONE, or an exception
// created without a message).
struct api_error {
  error_code code = error_code::none;
  std::optional<std::string> message;
  bool ok() const { return code == error_code::none; }
};

api_error error_of(error_code code, std::string message) {
  return {code, std::move(message)};
}
api_error error_of(const status& s) {
  return {s.code, s.message};
}
// The code a failed metadata write answers with in APIs whose errors are per request or partition
// (AlterPartition, ElectLeaders, AlterPartitionReassignments): NOT_CONTROLLER when the leadership was lost
// (the client retries elsewhere), UNKNOWN_SERVER_ERROR for anything else.
error_code write_failure_code(const status& s) {
  return s.code == error_code::not_controller ? error_code::not_controller : error_code::unknown_server_error;
}
// `new ApiError(Errors.X)`: the error's default message.
api_error default_error(error_code code) {
  switch (code) {
    case error_code::unknown_topic_or_partition:
      return {code, "This server does not host this topic-partition."};
    case error_code::unknown_topic_id:
      return {code, "This server does not host this topic ID."};
    default:
      return {code, std::string(error_name(code))};
  }
}

const api_error too_large_batch = {error_code::policy_violation,
                                   "Unable to perform excessively large batch operation."};

template <typename T>
versioned_metadata_record versioned(T record, int16_t version) {
  return versioned_metadata_record{metadata::metadata_record(std::move(record)), version};
}

// --- Topic names (org.apache.kafka.common.internals.Topic)

std::optional<std::string> invalid_topic_name(const std::string& name) {
  constexpr size_t max_name_length = 249;
  std::string why;
  if (name.empty()) {
    why = "the empty string is not allowed";
  } else if (name == ".") {
    why = "'.' is not allowed";
  } else if (name == "..") {
    why = "'..' is not allowed";
  } else if (name.size() > max_name_length) {
    why = "the length of '" + name + "' is longer than the max allowed length " +
          std::to_string(max_name_length);
  } else if (!std::all_of(name.begin(), name.end(), [](char c) {
               return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
             })) {
    why = "'" + name + "' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'";
  } else {
    return std::nullopt;
  }
  return "Topic name is invalid: " + why;
}

// Metric names cannot tell '.' from '_', so Kafka refuses a topic whose name differs from an existing one
// only there (Topic.hasCollisionChars / unifyCollisionChars).
bool has_collision_chars(const std::string& name) {
  return name.find_first_of("._") != std::string::npos;
}
std::string unify_collision_chars(std::string name) {
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

// --- Brokers

// ClusterControlManager.isActive: registered, unfenced and not in controlled shutdown.
bool is_active(const metadata_image& image, int32_t id) {
  auto it = image.brokers.find(id);
  return it != image.brokers.end() && !it->second.fenced && !it->second.in_controlled_shutdown;
}

std::vector<placement_broker> usable_brokers(const metadata_image& image) {
  std::vector<placement_broker> out;
  for (const auto& [id, b] : image.brokers) {
    if (!b.fenced && !b.in_controlled_shutdown) out.push_back({id, b.rack});
  }
  return out;
}

// ClusterControlManager.defaultDir (KIP-858): a broker with one log dir gets its new replicas there; one with
// several leaves the choice to the broker (UNASSIGNED); one that registered none predates directory ids
// (MIGRATING).
uuid default_dir(const metadata_image& image, int32_t id) {
  auto it = image.brokers.find(id);
  if (it == image.brokers.end()) return metadata::directory_unassigned;
  const auto& dirs = it->second.log_dirs;
  if (dirs.empty()) return metadata::directory_migrating;
  if (dirs.size() == 1) return dirs.front();
  return metadata::directory_unassigned;
}

bool reserved_directory(const uuid& id) {
  return id == metadata::directory_migrating || id == metadata::directory_unassigned ||
         id == metadata::directory_lost;
}

// A new partition as ReplicationControlManager.buildPartitionRegistration makes it: the ISR is the active
// replicas, the leader the first of them, epochs 0.
protocol::partition_record new_partition_record(const metadata_image& image, const uuid& topic_id,
                                                int32_t partition, const std::vector<int32_t>& replicas,
                                                std::vector<int32_t> isr) {
  protocol::partition_record r;
  r.partition_id = partition;
  r.topic_id = topic_id;
  r.replicas = replicas;
  r.leader = isr.front();
  r.isr = std::move(isr);
  r.leader_recovery_state = metadata::leader_recovered;
  r.leader_epoch = 0;
  r.partition_epoch = 0;
  for (int32_t replica : replicas) r.directories.push_back(default_dir(image, replica));
  return r;
}

std::vector<int32_t> active_replicas(const metadata_image& image, const std::vector<int32_t>& replicas) {
  std::vector<int32_t> out;
  for (int32_t r : replicas)
    if (is_active(image, r)) out.push_back(r);
  return out;
}

// ReplicationControlManager.validateManualPartitionAssignment.
api_error check_manual_assignment(const metadata_image& image, const std::vector<int32_t>& replicas,
                                  std::optional<size_t> replication_factor) {
  if (replicas.empty()) {
    return error_of(error_code::invalid_replica_assignment,
                    "The manual partition assignment includes an empty replica list.");
  }
  std::vector<int32_t> sorted = replicas;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (!image.brokers.contains(sorted[i])) {
      return error_of(error_code::invalid_replica_assignment,
                      "The manual partition assignment includes broker " + std::to_string(sorted[i]) +
                          ", but no such broker is registered.");
    }
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      return error_of(error_code::invalid_replica_assignment,
                      "The manual partition assignment includes the broker " + std::to_string(sorted[i]) +
                          " more than once.");
    }
  }
  if (replication_factor && sorted.size() != *replication_factor) {
    return error_of(error_code::invalid_replica_assignment,
                    "The manual partition assignment includes a partition with " +
                        std::to_string(sorted.size()) +
                        " replica(s), but this is not consistent with previous partitions, which have " +
                        std::to_string(*replication_factor) + " replica(s).");
  }
  return {};
}

// --- Configs

std::optional<int64_t> parse_int(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

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
    case op_set:
      return "SET";
    case op_delete:
      return "DELETE";
    case op_append:
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
    if (op == op_append && it == parts.end()) parts.push_back(v);
    if (op == op_subtract && it != parts.end()) parts.erase(it);
  }
  return join(parts, ",");
}

// The broker properties that can be changed through AlterConfigs on a BROKER resource: the ones Kafka treats
// as dynamic (DynamicBrokerConfig.AllDynamicConfigs) that Mala honours: node_config's keys, and the broker
// defaults of topic configs that node_config does not list (validated as their topic config). All are
// cluster-wide in Kafka (settable at the cluster default "" and per broker); Kafka's per-broker-only ones
// (listeners, SSL keystores) are not dynamic in Mala.
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

const dynamic_broker_property* find_dynamic_broker_property(std::string_view name) {
  for (const auto& p : dynamic_broker_properties)
    if (p.name == name) return &p;
  return nullptr;
}

// node_config's description of a broker property, in the form topic_config's validator takes.
std::optional<topic_config_key> broker_key_for_validation(std::string_view name) {
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

// ---------------------------------------------------------------------------------------------------------------

struct quorum_controller::state {
  std::unique_ptr<metadata_log> log;
  controller_options options;
  metadata::metadata_image_ptr image;
  image_publisher publisher;
  std::mt19937_64 placement_rng;
  // Broker sessions (heartbeat times, controlled shutdown offsets), made on first use.
  std::optional<broker_heartbeat_manager> heartbeats;

  broker_heartbeat_manager& sessions() {
    if (!heartbeats) heartbeats.emplace(options.broker_session_timeout_ms);
    return *heartbeats;
  }
  bool active = true;
  int64_t next_leader_rebalance_ms = 0;  // 0: not scheduled yet

  // Applies `records` to a copy of the image (so that a record the image would refuse is never written),
  // appends them as one batch, and publishes the new image. Nothing changes when it fails.
  status commit(const record_list& records) {
    if (records.empty()) return status::success();
    auto build = [&](int64_t first_offset, int32_t epoch) -> result<metadata::metadata_image_ptr> {
      metadata::metadata_delta delta(image);
      for (size_t i = 0; i < records.size(); ++i) {
        if (auto st = delta.apply(records[i].record, first_offset + static_cast<int64_t>(i), epoch);
            !st.ok()) {
          return status::error(error_code::unknown_server_error,
                               "the controller generated a record the metadata image refuses: " + st.message);
        }
      }
      return delta.build();
    };
    const int64_t expected_first = log->end_offset();
    auto next = build(expected_first, log->epoch());
    if (!next.ok()) return next.error();
    auto appended = log->append(records);
    if (!appended.ok()) return appended.error();
    if (appended->first_offset != expected_first || appended->epoch != log->epoch()) {
      next = build(appended->first_offset, appended->epoch);
      if (!next.ok()) return next.error();
    }
    image = std::move(*next);
    // Only committed images go to the broker side: on a Raft quorum that is the metadata_loader's job.
    if (publisher && log->committed_offset() >= appended->last_offset) publisher(image);
    return status::success();
  }

  // A freshly formatted cluster: its first write finalizes metadata.version, which is what `kafka-storage
  // format` puts in bootstrap.checkpoint and the first controller writes to the log.
  status bootstrap_if_empty() {
    if (image->finalized_features.count(std::string(metadata_version_feature)) != 0) return status::success();
    protocol::feature_level_record feature;
    feature.name = std::string(metadata_version_feature);
    feature.feature_level = bootstrap_metadata_version;
    return commit({versioned(feature, v0)});
  }

  uint64_t next_placement_seed() { return placement_rng(); }

  const config_map* configs_of(config_resource_type type, const std::string& name) const {
    return image->find_configs(type, name);
  }

  // The value of a broker property in effect on this node: dynamic per-broker, dynamic cluster-wide, static,
  // default (DynamicBrokerConfig's precedence), with the dynamic maps given explicitly so that a change can
  // be evaluated before it is written.
  std::optional<std::string> broker_value(std::string_view name, const config_map* per_broker,
                                          const config_map* cluster) const {
    const std::string key(name);
    if (per_broker) {
      if (auto it = per_broker->find(key); it != per_broker->end()) return it->second;
    }
    if (cluster) {
      if (auto it = cluster->find(key); it != cluster->end()) return it->second;
    }
    if (options.static_config) {
      if (auto v = options.static_config(name)) return v;
    }
    if (const config_key* k = find_config_key(name); k && k->default_value)
      return std::string(*k->default_value);
    return std::nullopt;
  }

  // ConfigAdminManager.validateBrokerConfigChange + DynamicBrokerConfig.validate: `props` is the resource's
  // whole set of dynamic values after the change. Kafka answers every refusal here with INVALID_REQUEST
  // (KAFKA-13609).
  api_error validate_broker_configs(const std::string& resource_name, const config_map& props) const {
    std::vector<std::string> not_dynamic;
    for (const auto& [name, value] : props)
      if (!find_dynamic_broker_property(name)) not_dynamic.push_back(name);
    if (!not_dynamic.empty()) {
      return error_of(error_code::invalid_request,
                      "Cannot update these configs dynamically: " + scala_set(not_dynamic));
    }
    for (const auto& [name, value] : props) {
      auto key = broker_key_for_validation(name);
      if (!key) continue;
      if (auto st = validate_config_value(*key, value); !st.ok())
        return error_of(error_code::invalid_request, st.message);
    }
    // Thread pools may at most halve or double per change, measured against the value in effect on this node.
    const bool per_broker = !resource_name.empty();
    const config_map* node_dynamic =
        configs_of(config_resource_type::broker, std::to_string(options.node_id));
    const config_map* cluster_dynamic = configs_of(config_resource_type::broker, "");
    for (const auto& [name, value] : props) {
      if (!find_dynamic_broker_property(name)->thread_count) continue;
      auto old_value = parse_int(broker_value(name, node_dynamic, cluster_dynamic).value_or("0"));
      auto new_value = parse_int(per_broker ? broker_value(name, &props, cluster_dynamic).value_or("0")
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

  // ControllerConfigurationValidator for a BROKER resource: the cluster default ("") or a node id. That it
  // names the broker that received the request is that broker's check (ConfigAdminManager), made before it
  // forwards the request here.
  api_error validate_broker_resource_name(const std::string& name) const {
    if (name.empty()) return {};
    auto id = parse_int(name);
    if (!id || *id < std::numeric_limits<int32_t>::min() || *id > std::numeric_limits<int32_t>::max()) {
      return error_of(error_code::invalid_request, "Node id must be an integer, but it is: " + name);
    }
    return {};
  }

  // ControllerConfigurationValidator for a TOPIC resource, then the existence check of QuorumController's
  // ConfigResourceExistenceChecker (in that order: a bad config of a missing topic is INVALID_CONFIG).
  api_error validate_topic_resource(const std::string& name, const config_map& all_configs) const {
    if (name.empty())
      return error_of(error_code::invalid_request, "Default topic resources are not allowed.");
    if (auto why = invalid_topic_name(name)) return error_of(error_code::invalid_topic_exception, *why);
    if (auto st = validate_topic_configs(all_configs); !st.ok()) return error_of(st);
    if (!image->find_topic(name)) {
      return error_of(error_code::unknown_topic_or_partition, "The topic '" + name + "' does not exist.");
    }
    return {};
  }

  // The shared front of both AlterConfigs flavours (ConfigAdminManager.preprocess): duplicate resources,
  // duplicate keys, null values, resource types Mala stores.
  template <typename Resource>
  std::vector<api_error> preprocess_alter_configs(const std::vector<Resource>& resources) const {
    std::vector<api_error> errors(resources.size());
    std::map<std::pair<int8_t, std::string>, size_t> first_seen;
    for (size_t i = 0; i < resources.size(); ++i) {
      auto [it, inserted] =
          first_seen.emplace(std::make_pair(resources[i].resource_type, resources[i].resource_name), i);
      if (!inserted) {
        errors[it->second] = error_of(error_code::invalid_request, "Each resource must appear at most once.");
        errors[i] = errors[it->second];
      }
    }
    for (size_t i = 0; i < resources.size(); ++i) {
      if (!errors[i].ok()) continue;
      const auto& resource = resources[i];
      std::set<std::string> names;
      std::vector<std::string> null_values;
      bool duplicate = false;
      for (const auto& c : resource.configs) {
        if (!names.insert(c.name).second) duplicate = true;
        bool is_delete = false;
        if constexpr (requires { c.config_operation; }) is_delete = c.config_operation == op_delete;
        if (!c.value && !is_delete) null_values.push_back(c.name);
      }
      if (duplicate) {
        errors[i] = error_of(error_code::invalid_request, "Error due to duplicate config keys");
      } else if (!null_values.empty()) {
        errors[i] = error_of(error_code::invalid_request,
                             "Null value not supported for : " + join(null_values, ", "));
      } else if (resource.resource_type == broker_resource) {
        errors[i] = validate_broker_resource_name(resource.resource_name);
      } else if (resource.resource_type != topic_resource) {
        // Kafka also stores GROUP and CLIENT_METRICS configs and handles BROKER_LOGGER on the broker; Mala
        // has none of them, so they get the answer Kafka gives a type it does not know.
        errors[i] =
            error_of(error_code::invalid_request,
                     "Unknown resource type " + std::to_string(static_cast<int>(resource.resource_type)));
      }
    }
    return errors;
  }

  // The end of a user operation: a batch too large for one operation is refused whole
  // (max_records_per_user_op, POLICY_VIOLATION), a validate_only request writes nothing, anything else is
  // committed. Returns the error that then answers every item of the request (none when it went through).
  api_error commit_user_operation(const record_list& records, bool too_large, bool validate_only) {
    if (too_large) return too_large_batch;
    if (validate_only) return {};
    if (auto st = commit(records); !st.ok()) return error_of(st);
    return {};
  }

  // KIP-966: a change of min.insync.replicas (of a topic, or a broker or cluster default) empties the ELR and
  // last known ELR of the partitions it may concern (Kafka's getPartitionElrUpdatesForConfigChanges, written
  // as PartitionChangeRecords in the same batch): they were chosen against the old minimum.
  void append_elr_clears_for_min_isr_changes(record_list& records) const {
    std::set<std::string> topics;
    bool every_topic = false;
    for (const auto& r : records) {
      const auto* c = std::get_if<protocol::config_record>(&r.record);
      if (!c || c->name != "min.insync.replicas") continue;
      if (c->resource_type == topic_resource) {
        topics.insert(c->resource_name);
      } else if (c->resource_type == broker_resource) {
        every_topic = true;
      }
    }
    if (!every_topic && topics.empty()) return;
    for (const auto& [name, topic] : image->topics) {
      if (!every_topic && !topics.count(name)) continue;
      for (const auto& p : topic.partitions) {
        if (p.eligible_leader_replicas.empty() && p.last_known_elr.empty()) continue;
        protocol::partition_change_record change;
        change.topic_id = topic.id;
        change.partition_id = p.partition;
        change.eligible_leader_replicas = std::vector<int32_t>{};
        change.last_known_elr = std::vector<int32_t>{};
        records.push_back(versioned(std::move(change), partition_change_record_version));
      }
    }
  }

  // The course both AlterConfigs flavours share (ConfigurationControlManager.incrementalAlterConfigs and
  // legacyAlterConfigs): the front checks above, then records_for(resource, records) for each resource that
  // passed them (its records count only if it returns no error); the records of all resources are written as
  // one batch, so a batch too large for one user operation or a failed commit is every resource's error. One
  // answer per resource, in request order.
  template <typename Response, typename Request, typename RecordsFor>
  Response alter_resource_configs(const Request& request, RecordsFor records_for) {
    const metadata::metadata_image_ptr image_ptr = image;
    std::vector<api_error> errors = preprocess_alter_configs(request.resources);
    record_list records;
    for (size_t i = 0; i < request.resources.size(); ++i) {
      if (!errors[i].ok()) continue;
      record_list resource_records;
      errors[i] = records_for(request.resources[i], resource_records);
      if (!errors[i].ok()) continue;
      records.insert(records.end(), std::make_move_iterator(resource_records.begin()),
                     std::make_move_iterator(resource_records.end()));
    }
    append_elr_clears_for_min_isr_changes(records);

    if (auto e =
            commit_user_operation(records, records.size() > max_records_per_user_op, request.validate_only);
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
};

namespace {

protocol::config_record config_record_for(int8_t type, const std::string& resource, const std::string& name,
                                          std::optional<std::string> value) {
  protocol::config_record r;
  r.resource_type = type;
  r.resource_name = resource;
  r.name = name;
  r.value = std::move(value);
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

quorum_controller::quorum_controller(std::unique_ptr<state> s) : _state(std::move(s)) {}
quorum_controller::~quorum_controller() = default;

result<std::unique_ptr<quorum_controller>> quorum_controller::open(std::unique_ptr<metadata_log> log,
                                                                   controller_options options) {
  if (!log) return status::error(error_code::invalid_request, "quorum_controller needs a metadata log");
  auto base = std::make_shared<metadata_image>();
  base->cluster_id = options.cluster_id;
  base->controller_id = options.node_id;
  metadata::metadata_delta delta(base);
  // A standby on a Raft quorum learns the log from the metadata_loader (activate()); nothing is committed
  // before the quorum says so.
  const int64_t replay_from = options.wait_for_activation ? std::numeric_limits<int64_t>::max() : 0;
  auto replayed =
      log->replay(replay_from, [&](const versioned_metadata_record& r, int64_t offset, int32_t epoch) {
        if (auto st = delta.apply(r.record, offset, epoch); !st.ok()) {
          return status::error(st.code,
                               "metadata log record at offset " + std::to_string(offset) + ": " + st.message);
        }
        return status::success();
      });
  if (!replayed.ok()) return replayed;

  auto s = std::make_unique<state>();
  s->log = std::move(log);
  s->image = delta.build();
  s->active = !options.wait_for_activation;
  const uint64_t seed = options.placement_seed != 0 ? options.placement_seed : std::random_device{}();
  s->placement_rng.seed(seed);
  s->options = std::move(options);

  // An empty log is a freshly formatted cluster: its first batch finalizes metadata.version, which is what
  // `kafka-storage format` puts in bootstrap.checkpoint and the first controller writes to the log.
  if (s->active) {
    if (auto st = s->bootstrap_if_empty(); !st.ok()) return st;
  }
  return std::unique_ptr<quorum_controller>(new quorum_controller(std::move(s)));
}

bool quorum_controller::active() const {
  return _state->active;
}

bool quorum_controller::activate(metadata::metadata_image_ptr committed) {
  state& s = *_state;
  s.image = std::move(committed);
  s.active = true;
  if (auto st = s.bootstrap_if_empty(); !st.ok()) {
    // The next leader will try again; this one cannot write.
    s.active = false;
  }
  return s.active;
}

void quorum_controller::deactivate(metadata::metadata_image_ptr committed) {
  _state->image = std::move(committed);
  _state->active = false;
}

int64_t quorum_controller::last_written_offset() const {
  return _state->log->end_offset() - 1;
}

metadata::metadata_image_ptr quorum_controller::image() const {
  return _state->image;
}

void quorum_controller::set_publisher(image_publisher publisher) {
  _state->publisher = std::move(publisher);
}

// ---------------------------------------------------------------------------------------------------------------
// Broker lifecycle records (ReplicationControlManager.handleBrokerFenced / handleBrokerUnfenced /
// handleBrokerInControlledShutdown and the part of PartitionChangeBuilder they use)

namespace {

// Kafka writes PartitionChangeRecord v2 from metadata.version 4.0-IV1 (MetadataVersion.
// partitionChangeRecordVersion); BrokerRegistrationChangeRecord v0 for fencing changes and v1 for
// InControlledShutdown, the version that field needs.
constexpr int16_t controlled_shutdown_change_version = 1;

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// What a topic's configs say about its elections: min.insync.replicas (effective: capped at the replication
// factor) and unclean.leader.election.enable, resolved as every node resolves topic configs.
struct election_rules {
  int32_t min_insync_replicas = 1;
  bool unclean_leader_election = false;
};

election_rules election_rules_for(const metadata_image& image, const std::string& topic,
                                  const controller_options& options) {
  election_rules rules;
  for (const auto& e : resolve_topic_configs(image, topic, options.node_id, options.static_config)) {
    if (!e.value) continue;
    if (e.key->name == "min.insync.replicas") {
      if (auto v = parse_int(*e.value))
        rules.min_insync_replicas = static_cast<int32_t>(std::max<int64_t>(1, *v));
    } else if (e.key->name == "unclean.leader.election.enable") {
      rules.unclean_leader_election = *e.value == "true";
    }
  }
  return rules;
}

int32_t effective_min_isr(const election_rules& rules, const metadata::partition_state& p) {
  return std::max<int32_t>(
      1, std::min<int32_t>(rules.min_insync_replicas, static_cast<int32_t>(p.replicas.size())));
}

// The change request every election path starts from: the partition's ISR as target, a live (registered,
// unfenced, not shutting down) replica as acceptable leader, the topic's effective min ISR, and an unclean
// election when the topic's unclean.leader.election.enable says so. `image` must outlive the request.
partition_change_request change_request_for(const metadata_image& image, const controller_options& options,
                                            const std::string& topic, const uuid& topic_id,
                                            const metadata::partition_state& p) {
  const election_rules rules = election_rules_for(image, topic, options);
  partition_change_request request;
  request.topic_id = topic_id;
  request.target_isr = p.isr;
  request.acceptable_leader = [&image](int32_t r) { return is_active(image, r); };
  request.min_insync_replicas = effective_min_isr(rules, p);
  if (rules.unclean_leader_election) request.election = election_type::unclean;
  return request;
}

void log_election(const std::string& topic, const metadata::partition_state& p,
                  const partition_change& change) {
  if (!change.record || change.leader == p.leader) return;
  auto log = subsystem_logger("controller");
  if (change.unclean) {
    log->warn(
        "{}-{}: unclean leader election (unclean.leader.election.enable) chose {}, a replica outside the ISR "
        "[{}] and ELR [{}]: records the old ISR had beyond its log may be lost",
        topic, p.partition, change.leader, fmt::join(p.isr, ","), fmt::join(p.eligible_leader_replicas, ","));
  } else if (change.from_last_known_leader) {
    // KIP-966: every ISR and ELR member registered again after an unclean shutdown, and the leader they
    // last had is back. It had every committed record when the ISR emptied; only what its own crash kept
    // from reaching the disk can be missing, hence the ISR restarting from it alone (RECOVERING).
    log->info(
        "{}-{}: leader {} elected as the last known leader (KIP-966: every ISR and ELR member restarted "
        "without a clean shutdown); the ISR restarts from it",
        topic, p.partition, change.leader);
  } else if (change.from_elr) {
    log->info("{}-{}: leader {} elected from the ELR", topic, p.partition, change.leader);
  }
}

// generateLeaderAndIsrUpdates for one partition: the target ISR is the ISR without `brokers_to_remove` and
// `broker_with_unclean_shutdown`; an acceptable leader is active (registered, unfenced, not in controlled
// shutdown) or `broker_to_add` (the broker being unfenced, still fenced in the image), and never one of
// `brokers_to_remove` or `broker_with_unclean_shutdown`. Kafka removes one broker at a time; several are
// removed together only when several sessions expired at once (fence_stale_brokers). The topic's
// unclean.leader.election.enable makes it an unclean election. The ISR shrinking alone does not bump the
// leader epoch from metadata.version 3.6 (KAFKA-15021).
std::optional<protocol::partition_change_record> leader_and_isr_change(
    const metadata_image& image, const controller_options& options, const std::string& topic,
    const uuid& topic_id, const metadata::partition_state& p, const std::vector<int32_t>& brokers_to_remove,
    int32_t broker_to_add, int32_t broker_with_unclean_shutdown = metadata::no_leader) {
  partition_change_request request = change_request_for(image, options, topic, topic_id, p);
  const auto removed = [&](int32_t r) {
    return contains(brokers_to_remove, r) || r == broker_with_unclean_shutdown;
  };
  std::erase_if(request.target_isr, removed);
  request.acceptable_leader = [&](int32_t r) {
    return !removed(r) && (r == broker_to_add || is_active(image, r));
  };
  if (broker_with_unclean_shutdown != metadata::no_leader) {
    request.unclean_shutdown_replicas.push_back(broker_with_unclean_shutdown);
  }
  partition_change change = build_partition_change(p, request);
  log_election(topic, p, change);
  return std::move(change.record);
}

// generateLeaderAndIsrUpdates over the partitions `select` picks.
template <typename Select>
void append_leader_and_isr_changes(const metadata_image& image, const controller_options& options,
                                   const std::vector<int32_t>& brokers_to_remove, int32_t broker_to_add,
                                   Select select, record_list& records,
                                   int32_t broker_with_unclean_shutdown = metadata::no_leader) {
  for (const auto& [name, topic] : image.topics) {
    for (const auto& p : topic.partitions) {
      if (!select(p)) continue;
      if (auto change = leader_and_isr_change(image, options, name, topic.id, p, brokers_to_remove,
                                              broker_to_add, broker_with_unclean_shutdown))
        records.push_back(versioned(std::move(*change), partition_change_record_version));
    }
  }
}

bool leads_any(const metadata_image& image, int32_t id) {
  for (const auto& [name, topic] : image.topics)
    for (const auto& p : topic.partitions)
      if (p.leader == id) return true;
  return false;
}

// handleBrokerFenced for `ids` (registered brokers) together: off every ISR, each partition's leadership
// moved to an ISR member that is not being fenced, then BrokerRegistrationChangeRecord Fenced = 1 for each
// (Kafka 4.x's form; FenceBrokerRecord is for metadata.version < 3.3-IV2).
void append_fence_records(const metadata_image& image, const controller_options& options,
                          const std::vector<int32_t>& ids, record_list& records) {
  append_leader_and_isr_changes(
      image, options, ids, metadata::no_leader,
      [&ids](const metadata::partition_state& p) {
        return std::any_of(ids.begin(), ids.end(), [&](int32_t id) { return contains(p.isr, id); });
      },
      records);
  for (int32_t id : ids) {
    protocol::broker_registration_change_record change;
    change.broker_id = id;
    change.broker_epoch = image.brokers.at(id).epoch;
    change.fenced = metadata::fencing_change_fence;
    records.push_back(versioned(change, v0));
  }
}

// handleBrokerUnfenced: BrokerRegistrationChangeRecord Fenced = -1, then leaders for every leaderless
// partition, the newly unfenced broker counting as active.
void append_unfence_records(const metadata_image& image, const controller_options& options, int32_t id,
                            int64_t epoch, record_list& records) {
  protocol::broker_registration_change_record change;
  change.broker_id = id;
  change.broker_epoch = epoch;
  change.fenced = metadata::fencing_change_unfence;
  records.push_back(versioned(change, v0));
  append_leader_and_isr_changes(
      image, options, {}, id,
      [](const metadata::partition_state& p) { return p.leader == metadata::no_leader; }, records);
}

// handleBrokerInControlledShutdown: InControlledShutdown = 1 (once), then off every ISR it can leave, its
// leaderships moved to other active ISR members.
void append_controlled_shutdown_records(const metadata_image& image, const controller_options& options,
                                        int32_t id, int64_t epoch, record_list& records) {
  auto broker = image.brokers.find(id);
  if (broker != image.brokers.end() && !broker->second.in_controlled_shutdown) {
    protocol::broker_registration_change_record change;
    change.broker_id = id;
    change.broker_epoch = epoch;
    change.in_controlled_shutdown = metadata::controlled_shutdown_change_in_controlled_shutdown;
    records.push_back(versioned(change, controlled_shutdown_change_version));
  }
  append_leader_and_isr_changes(
      image, options, {id}, metadata::no_leader,
      [id](const metadata::partition_state& p) { return contains(p.isr, id); }, records);
}

// handleBrokerUncleanShutdown (KIP-966): a broker that comes back without having shut down cleanly may have
// lost the tail of its logs, so it leaves every ISR and ELR it is in and may not lead until it catches up.
void append_unclean_shutdown_records(const metadata_image& image, const controller_options& options,
                                     int32_t id, record_list& records) {
  append_leader_and_isr_changes(
      image, options, {}, metadata::no_leader,
      [id](const metadata::partition_state& p) {
        // A single replica has no better copy to wait for: it keeps its partition.
        return p.replicas.size() > 1 && (contains(p.isr, id) || contains(p.eligible_leader_replicas, id));
      },
      records, id);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// BrokerRegistration (ClusterControlManager.registerBroker)

result<int64_t> quorum_controller::register_broker(const metadata::broker_registration& registration,
                                                   int64_t previous_broker_epoch, int64_t now_ms) {
  state& s = *_state;
  const metadata::metadata_image_ptr image = s.image;
  const int32_t id = registration.id;
  if (id < 0) {
    return status::error(error_code::invalid_registration, "Invalid broker id " + std::to_string(id));
  }
  auto existing = image->brokers.find(id);
  if (existing != image->brokers.end() && existing->second.incarnation_id != registration.incarnation_id &&
      s.sessions().has_valid_session(id, !existing->second.fenced, now_ms)) {
    return status::error(error_code::duplicate_broker_registration,
                         "Another broker is registered with that broker id.");
  }

  // KIP-858 directory checks.
  std::set<std::string> dirs;
  for (const auto& dir : registration.log_dirs) {
    if (reserved_directory(dir))
      return status::error(error_code::invalid_registration, "Reserved directory ID in request");
    if (!dirs.insert(dir.to_string()).second) {
      return status::error(error_code::invalid_registration, "Duplicate directory ID in request");
    }
    for (const auto& [other_id, other] : image->brokers) {
      if (other_id == id) continue;
      if (std::find(other.log_dirs.begin(), other.log_dirs.end(), dir) != other.log_dirs.end()) {
        return status::error(error_code::invalid_registration, "Broker " + std::to_string(other_id) +
                                                                   " is already registered with directory " +
                                                                   dir.to_string());
      }
    }
  }

  // Every finalized feature must lie within the broker's supported range. A registration without a
  // metadata.version range is taken to support what this binary supports (Kafka assumes only level 1 there,
  // which no 4.x cluster runs; Mala's own node registers through this call).
  auto features = registration.supported_features;
  features.try_emplace(std::string(metadata_version_feature),
                       metadata::supported_feature{minimum_metadata_version, bootstrap_metadata_version});
  for (const auto& [name, level] : image->finalized_features) {
    metadata::supported_feature range{0, 0};
    if (auto it = features.find(name); it != features.end()) range = it->second;
    if (level < range.min_version || level > range.max_version) {
      return status::error(error_code::unsupported_version,
                           "Unable to register because the broker does not support finalized version " +
                               std::to_string(level) + " of " + name +
                               ". The broker wants a version between " + std::to_string(range.min_version) +
                               " and " + std::to_string(range.max_version) + ", inclusive.");
    }
  }

  protocol::register_broker_record record;
  record.broker_id = id;
  record.incarnation_id = registration.incarnation_id;
  record.rack = registration.rack;
  record.log_dirs = registration.log_dirs;
  for (const auto& e : registration.endpoints) {
    auto security = parse_security_protocol(e.security_protocol);
    if (!security) {
      return status::error(
          error_code::invalid_registration,
          "Unknown security protocol " + e.security_protocol + " of listener " + e.listener_name);
    }
    record.end_points.push_back({e.listener_name, e.host, e.port, static_cast<int16_t>(*security)});
  }
  for (const auto& [name, range] : features)
    record.features.push_back({name, range.min_version, range.max_version});

  // The same incarnation registering again amends its registration and keeps its epoch; a new incarnation (a
  // restart) gets a new epoch: the offset of its RegisterBrokerRecord.
  if (existing != image->brokers.end() && existing->second.incarnation_id == registration.incarnation_id) {
    record.broker_epoch = existing->second.epoch;
    record.fenced = existing->second.fenced;
    record.in_controlled_shutdown = existing->second.in_controlled_shutdown;
  } else {
    record.broker_epoch = s.log->end_offset();
    record.fenced = true;
    record.in_controlled_shutdown = false;
  }
  const int64_t epoch = record.broker_epoch;
  const bool new_incarnation =
      existing == image->brokers.end() || existing->second.incarnation_id != registration.incarnation_id;
  const bool unfence = record.fenced && s.options.unfence_on_registration;
  // KIP-966: a new incarnation whose previous broker epoch is not the one it last registered with did not
  // shut down cleanly (ClusterControlManager.registerBroker): it leaves the ISRs and ELRs first.
  const bool unclean_shutdown =
      existing != image->brokers.end() && new_incarnation && previous_broker_epoch != existing->second.epoch;
  record_list records;
  if (unclean_shutdown) {
    append_unclean_shutdown_records(*image, s.options, id, records);
    if (!records.empty()) {
      subsystem_logger("controller")
          ->info(
              "broker {} registered after an unclean shutdown (previous epoch {}, last registered {}): "
              "removed from {} ISR/ELR(s)",
              id, previous_broker_epoch, existing->second.epoch, records.size());
    }
  }
  records.push_back(versioned(std::move(record), register_broker_record_version));
  if (unfence) {
    // A single voter's broker has caught up with the metadata log as soon as it registers, so it is unfenced
    // in the same batch, as a heartbeat would (append_unfence_records: BrokerRegistrationChangeRecord v0
    // Fenced = -1, and leaders for the leaderless partitions whose ISR holds it). After an unclean shutdown
    // the elections must see the ISRs it left: the registration is committed first.
    if (unclean_shutdown && records.size() > 1) {
      if (auto st = s.commit(records); !st.ok()) return st;
      records.clear();
    }
    append_unfence_records(*s.image, s.options, id, epoch, records);
  }
  if (auto st = s.commit(records); !st.ok()) return st;
  // A new incarnation's session starts afresh (ClusterControlManager.registerBroker drops the old one).
  if (new_incarnation) s.sessions().remove(id);
  return epoch;
}

// ---------------------------------------------------------------------------------------------------------------
// CreateTopics (ControllerApis.createTopics + ReplicationControlManager.createTopics)

protocol::create_topics_response quorum_controller::create_topics(
    const protocol::create_topics_request& request, int16_t version) {
  (void)version;  // v5+ fields are filled always; the encoder leaves out what a version lacks
  state& s = *_state;
  const metadata::metadata_image_ptr image_ptr = s.image;
  const metadata_image& image = *image_ptr;
  using topic_result = protocol::create_topics_response::creatable_topic_result;

  std::map<std::string, int> occurrences;
  for (const auto& t : request.topics) ++occurrences[t.name];
  // Existing names by their collision-unified form.
  std::map<std::string, std::string> collision_names;
  for (const auto& [name, topic] : image.topics)
    if (has_collision_chars(name)) collision_names.emplace(unify_collision_chars(name), name);

  protocol::create_topics_response response;
  record_list records;
  bool too_large = false;

  auto create_one = [&](const protocol::create_topics_request::creatable_topic& topic, topic_result& result,
                        record_list& out) -> api_error {
    // Names.
    api_error name_error;
    if (auto why = invalid_topic_name(topic.name))
      name_error = error_of(error_code::invalid_topic_exception, *why);
    if (has_collision_chars(topic.name)) {
      if (auto it = collision_names.find(unify_collision_chars(topic.name)); it != collision_names.end()) {
        name_error = error_of(error_code::invalid_topic_exception,
                              "Topic '" + topic.name + "' collides with existing topic: " + it->second);
      }
    }
    if (image.topics.contains(topic.name)) {
      return error_of(error_code::topic_already_exists, "Topic '" + topic.name + "' already exists.");
    }
    if (!name_error.ok()) return name_error;

    // Configs. Kafka 4.x validates them through ConfigurationControlManager.incrementalAlterConfig with
    // newlyCreatedResource=true: a null value, an unknown name (InvalidConfigurationException) and a value
    // that does not parse or is out of range (ConfigException, turned into ApiError(INVALID_CONFIG, message)
    // by validateAlterConfig) all answer INVALID_CONFIG (40) with Kafka's message; nothing else is checked
    // first.
    config_map configs;
    std::vector<std::string> null_configs;
    for (const auto& c : topic.configs) {
      if (!c.value) {
        null_configs.push_back(c.name);
      } else {
        configs[c.name] = *c.value;  // a repeated name: the last value wins, as Kafka's HashMap does
      }
    }
    if (!null_configs.empty()) {
      return error_of(error_code::invalid_config,
                      "Null value not supported for topic configs: " + join(null_configs, ","));
    }
    if (!configs.empty()) {
      if (auto st = validate_topic_configs(configs); !st.ok()) return error_of(st);
    }

    // Replica assignment: manual, or placed over the usable brokers.
    std::vector<std::vector<int32_t>> replicas;
    std::vector<std::vector<int32_t>> isrs;
    if (!topic.assignments.empty()) {
      if (topic.replication_factor != -1) {
        return error_of(
            error_code::invalid_request,
            "A manual partition assignment was specified, but replication factor was not set to -1.");
      }
      if (topic.num_partitions != -1) {
        return error_of(error_code::invalid_request,
                        "A manual partition assignment was specified, but numPartitions was not set to -1.");
      }
      std::map<int32_t, std::vector<int32_t>> by_partition;
      std::optional<size_t> replication_factor;
      for (const auto& a : topic.assignments) {
        if (by_partition.contains(a.partition_index)) {
          return error_of(error_code::invalid_replica_assignment,
                          "Found multiple manual partition assignments for partition " +
                              std::to_string(a.partition_index));
        }
        if (auto e = check_manual_assignment(image, a.broker_ids, replication_factor); !e.ok()) return e;
        replication_factor = a.broker_ids.size();
        if (active_replicas(image, a.broker_ids).empty()) {
          return error_of(error_code::invalid_replica_assignment,
                          "All brokers specified in the manual partition assignment for partition " +
                              std::to_string(a.partition_index) + " are fenced or in controlled shutdown.");
        }
        by_partition.emplace(a.partition_index, a.broker_ids);
      }
      for (int32_t p = 0; p < static_cast<int32_t>(by_partition.size()); ++p) {
        if (!by_partition.contains(p)) {
          return error_of(error_code::invalid_replica_assignment,
                          "partitions should be a consecutive 0-based integer sequence");
        }
      }
      for (auto& [p, r] : by_partition) {
        isrs.push_back(active_replicas(image, r));
        replicas.push_back(std::move(r));
      }
    } else if (topic.replication_factor < -1 || topic.replication_factor == 0) {
      return error_of(error_code::invalid_replication_factor,
                      "Replication factor must be larger than 0, or -1 to use the default value.");
    } else if (topic.num_partitions < -1 || topic.num_partitions == 0) {
      return error_of(error_code::invalid_partitions,
                      "Number of partitions was set to an invalid non-positive value.");
    } else {
      const int32_t num_partitions =
          topic.num_partitions == -1 ? s.options.num_partitions : topic.num_partitions;
      const int16_t replication_factor =
          topic.replication_factor == -1 ? s.options.default_replication_factor : topic.replication_factor;
      if (static_cast<size_t>(num_partitions) + configs.size() + 1 > max_records_per_user_op) {
        too_large = true;
        return {};
      }
      auto placed =
          place_replicas(usable_brokers(image), num_partitions, replication_factor, s.next_placement_seed());
      if (!placed.ok()) {
        // Kafka counts fenced brokers as placeable followers; Mala places only on usable (unfenced) brokers,
        // so a factor above the live brokers is refused here rather than leaving the ISR short.
        return error_of(placed.error().code, "Unable to replicate the partition " +
                                                 std::to_string(replication_factor) +
                                                 " time(s): " + placed.error().message);
      }
      replicas = std::move(*placed);
      isrs = replicas;
    }

    uuid topic_id = uuid::random();
    while (image.find_topic(topic_id)) topic_id = uuid::random();
    result.topic_id = topic_id;
    result.num_partitions = static_cast<int32_t>(replicas.size());
    result.replication_factor = static_cast<int16_t>(replicas.front().size());
    result.topic_config_error_code = to_wire(error_code::none);
    result.configs.emplace();
    for (const auto& e : resolve_topic_configs(image, &configs, s.options.node_id, s.options.static_config)) {
      protocol::create_topics_response::creatable_topic_configs c;
      c.name = std::string(e.key->name);
      c.value = e.value;
      c.read_only = false;
      c.config_source = static_cast<int8_t>(e.source);
      c.is_sensitive = false;
      result.configs->push_back(std::move(c));
    }

    // TopicRecord, then its ConfigRecords, then the PartitionRecords (Kafka's order).
    protocol::topic_record topic_record;
    topic_record.name = topic.name;
    topic_record.topic_id = topic_id;
    out.push_back(versioned(std::move(topic_record), v0));
    for (const auto& [name, value] : configs) {
      out.push_back(versioned(config_record_for(topic_resource, topic.name, name, value), v0));
    }
    for (size_t p = 0; p < replicas.size(); ++p) {
      out.push_back(versioned(
          new_partition_record(image, topic_id, static_cast<int32_t>(p), replicas[p], std::move(isrs[p])),
          partition_record_version));
    }
    return {};
  };

  std::vector<std::string> duplicates;
  bool cluster_metadata_requested = false;
  for (const auto& topic : request.topics) {
    int& count = occurrences[topic.name];
    if (count > 1) duplicates.push_back(topic.name);
    if (count != 1) {
      count = -1;  // a duplicate: reported once, after the others (ControllerApis.createTopics)
      continue;
    }
    if (topic.name == metadata_topic_name) {
      cluster_metadata_requested = true;
      continue;
    }
    topic_result result;
    result.name = topic.name;
    record_list topic_records;
    api_error e = create_one(topic, result, topic_records);
    if (!e.ok()) {
      result = topic_result{};
      result.name = topic.name;
      result.error_code = to_wire(e.code);
      result.error_message = e.message;
    } else {
      result.error_message = std::nullopt;
      records.insert(records.end(), std::make_move_iterator(topic_records.begin()),
                     std::make_move_iterator(topic_records.end()));
      if (records.size() > max_records_per_user_op) too_large = true;
    }
    response.topics.push_back(std::move(result));
  }
  for (const auto& name : duplicates) {
    topic_result result;
    result.name = name;
    result.error_code = to_wire(error_code::invalid_request);
    result.error_message = "Duplicate topic name.";
    response.topics.push_back(std::move(result));
  }
  if (cluster_metadata_requested) {
    topic_result result;
    result.name = std::string(metadata_topic_name);
    result.error_code = to_wire(error_code::invalid_request);
    result.error_message =
        "Creation of internal topic " + std::string(metadata_topic_name) + " is prohibited.";
    response.topics.push_back(std::move(result));
  }

  // A failure of the whole operation answers every topic of the request with it (CreateTopicsRequest's
  // getErrorResponse).
  auto fail_all = [&](const api_error& e) {
    response.topics.clear();
    std::set<std::string> seen;
    for (const auto& t : request.topics) {
      if (!seen.insert(t.name).second) continue;
      topic_result result;
      result.name = t.name;
      result.error_code = to_wire(e.code);
      result.error_message = e.message;
      response.topics.push_back(std::move(result));
    }
  };
  if (auto e = s.commit_user_operation(records, too_large, request.validate_only); !e.ok()) fail_all(e);
  return response;
}

// ---------------------------------------------------------------------------------------------------------------
// DeleteTopics (ControllerApis.deleteTopics + ReplicationControlManager.deleteTopics)

protocol::delete_topics_response quorum_controller::delete_topics(
    const protocol::delete_topics_request& request, int16_t version) {
  state& s = *_state;
  const metadata::metadata_image_ptr image_ptr = s.image;
  const metadata_image& image = *image_ptr;
  using topic_result = protocol::delete_topics_response::deletable_topic_result;
  protocol::delete_topics_response response;

  auto append = [&](std::optional<std::string> name, const uuid& id, const api_error& e) {
    topic_result r;
    r.name = std::move(name);
    r.topic_id = id;
    r.error_code = to_wire(e.code);
    r.error_message = e.message;
    response.responses.push_back(std::move(r));
  };

  if (!s.options.delete_topic_enable) {
    // DeleteTopicsRequest.getErrorResponse: every topic of the request gets the error.
    const api_error e = version < 3 ? error_of(error_code::invalid_request, "Topic deletion is disabled.")
                                    : api_error{error_code::topic_deletion_disabled, std::nullopt};
    for (const auto& name : request.topic_names) append(name, uuid{}, e);
    for (const auto& t : request.topics) append(t.name, t.topic_id, e);
    return response;
  }

  // Collect names and ids, refusing duplicates and malformed entries.
  std::vector<std::string> names;  // request order, duplicates removed below
  std::map<std::string, int> name_count;
  std::vector<uuid> ids;
  std::map<std::string, int> id_count;  // by the id's text form
  auto add_name = [&](const std::string& name) {
    if (name_count[name]++ == 0) names.push_back(name);
  };
  for (const auto& name : request.topic_names) add_name(name);
  for (const auto& t : request.topics) {
    if (!t.name) {
      if (t.topic_id.is_zero()) {
        append(std::nullopt, uuid{},
               error_of(error_code::invalid_request, "Neither topic name nor id were specified."));
      } else if (id_count[t.topic_id.to_string()]++ == 0) {
        ids.push_back(t.topic_id);
      }
    } else if (t.topic_id.is_zero()) {
      add_name(*t.name);
    } else {
      append(t.name, t.topic_id,
             error_of(error_code::invalid_request, "You may not specify both topic name and topic id."));
    }
  }
  for (const auto& name : names) {
    if (name_count[name] > 1)
      append(name, uuid{}, error_of(error_code::invalid_request, "Duplicate topic name."));
  }
  for (const auto& id : ids) {
    if (id_count[id.to_string()] > 1)
      append(std::nullopt, id, error_of(error_code::invalid_request, "Duplicate topic id."));
  }

  // Resolve to (id, name) pairs, by id first, as Kafka does.
  std::vector<std::pair<uuid, std::string>> to_delete;
  std::set<std::string> chosen_ids;
  for (const auto& id : ids) {
    if (id_count[id.to_string()] > 1) continue;
    const metadata::topic_metadata* topic = image.find_topic(id);
    if (!topic) {
      append(std::nullopt, id, default_error(error_code::unknown_topic_id));
      continue;
    }
    to_delete.emplace_back(id, topic->name);
    chosen_ids.insert(id.to_string());
  }
  for (const auto& name : names) {
    if (name_count[name] > 1) continue;
    const metadata::topic_metadata* topic = image.find_topic(name);
    if (!topic) {
      append(name, uuid{}, default_error(error_code::unknown_topic_or_partition));
      continue;
    }
    if (chosen_ids.contains(topic->id.to_string()) || id_count[topic->id.to_string()] > 1) {
      // The name maps to an id the request also gave: neither is deleted.
      std::erase_if(to_delete, [&](const auto& p) { return p.first == topic->id; });
      chosen_ids.erase(topic->id.to_string());
      id_count[topic->id.to_string()] = 2;
      append(name, topic->id,
             error_of(error_code::invalid_request,
                      "The provided topic name maps to an ID that was already supplied."));
      continue;
    }
    to_delete.emplace_back(topic->id, name);
    chosen_ids.insert(topic->id.to_string());
  }

  record_list records;
  for (const auto& [id, name] : to_delete) {
    protocol::remove_topic_record r;
    r.topic_id = id;
    records.push_back(versioned(r, v0));
  }
  const api_error outcome =
      s.commit_user_operation(records, records.size() > max_records_per_user_op, /*validate_only=*/false);
  for (const auto& [id, name] : to_delete) append(name, id, outcome);
  return response;
}

// ---------------------------------------------------------------------------------------------------------------
// CreatePartitions (ControllerApis.createPartitions + ReplicationControlManager.createPartitions)

protocol::create_partitions_response quorum_controller::create_partitions(
    const protocol::create_partitions_request& request, int16_t version) {
  (void)version;
  state& s = *_state;
  const metadata::metadata_image_ptr image_ptr = s.image;
  const metadata_image& image = *image_ptr;
  using topic_result = protocol::create_partitions_response::create_partitions_topic_result;
  protocol::create_partitions_response response;

  auto result_of = [](const std::string& name, const api_error& e) {
    topic_result r;
    r.name = name;
    r.error_code = to_wire(e.code);
    r.error_message = e.message;
    return r;
  };

  std::map<std::string, int> occurrences;
  for (const auto& t : request.topics) ++occurrences[t.name];
  for (const auto& [name, count] : occurrences) {
    if (count > 1)
      response.results.push_back(
          result_of(name, error_of(error_code::invalid_request, "Duplicate topic name.")));
  }

  bool too_large = false;
  auto grow = [&](const protocol::create_partitions_request::create_partitions_topic& topic,
                  record_list& out) -> api_error {
    const metadata::topic_metadata* existing = image.find_topic(topic.name);
    if (!existing) return {error_code::unknown_topic_or_partition, std::nullopt};
    const auto current = static_cast<int32_t>(existing->partitions.size());
    if (topic.count == current) {
      return error_of(error_code::invalid_partitions,
                      "Topic already has " + std::to_string(current) + " partition(s).");
    }
    if (topic.count < current) {
      return error_of(error_code::invalid_partitions,
                      "The topic " + topic.name + " currently has " + std::to_string(current) +
                          " partition(s); " + std::to_string(topic.count) + " would not be an increase.");
    }
    const int32_t additional = topic.count - current;
    if (topic.assignments && topic.assignments->size() != static_cast<size_t>(additional)) {
      return error_of(error_code::invalid_replica_assignment,
                      "Attempted to add " + std::to_string(additional) +
                          " additional partition(s), but only " + std::to_string(topic.assignments->size()) +
                          " assignment(s) were specified.");
    }
    if (existing->partitions.empty()) {
      return error_of(error_code::unknown_server_error,
                      "Invalid state: topic " + topic.name + " appears to have no partitions.");
    }
    if (static_cast<size_t>(additional) > max_records_per_user_op) {
      too_large = true;
      return {};
    }
    const size_t replication_factor = existing->partitions.front().replicas.size();
    std::vector<std::vector<int32_t>> replicas;
    if (topic.assignments) {
      for (size_t i = 0; i < topic.assignments->size(); ++i) {
        const auto& ids = (*topic.assignments)[i].broker_ids;
        if (auto e = check_manual_assignment(image, ids, replication_factor); !e.ok()) return e;
        if (active_replicas(image, ids).empty()) {
          return error_of(error_code::invalid_replica_assignment,
                          "All brokers specified in the manual partition assignment for partition " +
                              std::to_string(current + static_cast<int32_t>(i)) +
                              " are fenced or in controlled shutdown.");
        }
        replicas.push_back(ids);
      }
    } else {
      auto placed = place_replicas(usable_brokers(image), additional,
                                   static_cast<int32_t>(replication_factor), s.next_placement_seed());
      if (!placed.ok()) return error_of(placed.error());
      replicas = std::move(*placed);
    }
    for (size_t i = 0; i < replicas.size(); ++i) {
      out.push_back(versioned(new_partition_record(image, existing->id, current + static_cast<int32_t>(i),
                                                   replicas[i], active_replicas(image, replicas[i])),
                              partition_record_version));
    }
    return {};
  };

  record_list records;
  for (const auto& topic : request.topics) {
    if (occurrences[topic.name] > 1) continue;
    record_list topic_records;
    api_error e = grow(topic, topic_records);
    if (e.ok()) {
      records.insert(records.end(), std::make_move_iterator(topic_records.begin()),
                     std::make_move_iterator(topic_records.end()));
      if (records.size() > max_records_per_user_op) too_large = true;
    }
    response.results.push_back(result_of(topic.name, e));
  }

  auto fail_all = [&](const api_error& e) {
    response.results.clear();
    std::set<std::string> seen;
    for (const auto& t : request.topics)
      if (seen.insert(t.name).second) response.results.push_back(result_of(t.name, e));
  };
  if (auto e = s.commit_user_operation(records, too_large, request.validate_only); !e.ok()) fail_all(e);
  return response;
}

// ---------------------------------------------------------------------------------------------------------------
// IncrementalAlterConfigs (ConfigAdminManager.preprocess +
// ConfigurationControlManager.incrementalAlterConfigs)

protocol::incremental_alter_configs_response quorum_controller::incremental_alter_configs(
    const protocol::incremental_alter_configs_request& request, int16_t version) {
  (void)version;
  state& s = *_state;
  auto records_for = [&s](const protocol::incremental_alter_configs_request::alter_configs_resource& resource,
                          record_list& records) -> api_error {
    const auto type = static_cast<config_resource_type>(resource.resource_type);
    const bool is_topic = resource.resource_type == topic_resource;
    const config_map* current = s.configs_of(type, resource.resource_name);
    config_map after = current ? *current : config_map{};
    for (const auto& c : resource.configs) {
      if (c.config_operation < op_set || c.config_operation > op_subtract) {
        return error_of(error_code::invalid_request,
                        "Unknown operations type " + std::to_string(static_cast<int>(c.config_operation)));
      }
      std::optional<std::string> old_value;
      if (auto it = after.find(c.name); it != after.end()) old_value = it->second;
      std::optional<std::string> new_value;
      if (c.config_operation == op_set) {
        new_value = c.value;
      } else if (c.config_operation == op_append || c.config_operation == op_subtract) {
        bool is_list = false;
        std::string_view default_value;
        if (is_topic) {
          const topic_config_key* key = find_topic_config_key(c.name);
          is_list = key && key->type == config_type::list;
          if (key) default_value = key->default_value;
        } else {
          const config_key* key = find_config_key(c.name);
          is_list = key && key->type == config_type::list;
          default_value = broker_default(c.name);
        }
        if (!is_list) {
          return is_topic
                     ? error_of(error_code::invalid_config,
                                "Can't " + std::string(op_name(c.config_operation)) + " to key " + c.name +
                                    " because its type is not LIST.")
                     : error_of(error_code::invalid_config,
                                "Config value " +
                                    std::string(c.config_operation == op_append ? "append" : "subtract") +
                                    " is not allowed for config key: " + c.name);
        }
        new_value = apply_list_op(c.config_operation, old_value, default_value, c.value.value_or(""));
      }
      if (new_value) {
        after[c.name] = *new_value;
      } else {
        after.erase(c.name);
      }
      // Topics: only changes are written. Brokers: every key named, changed or not (KAFKA-14136: the record
      // is what makes brokers reload the value).
      if (!is_topic || new_value != old_value) {
        records.push_back(versioned(
            config_record_for(resource.resource_type, resource.resource_name, c.name, new_value), v0));
      }
    }
    return is_topic ? s.validate_topic_resource(resource.resource_name, after)
                    : s.validate_broker_configs(resource.resource_name, after);
  };
  return s.alter_resource_configs<protocol::incremental_alter_configs_response>(request, records_for);
}

// ---------------------------------------------------------------------------------------------------------------
// AlterConfigs, the legacy flavour: the request's configs replace every override of the resource
// (ConfigurationControlManager.legacyAlterConfigs).

protocol::alter_configs_response quorum_controller::alter_configs(
    const protocol::alter_configs_request& request, int16_t version) {
  (void)version;
  state& s = *_state;
  auto records_for = [&s](const protocol::alter_configs_request::alter_configs_resource& resource,
                          record_list& records) -> api_error {
    const auto type = static_cast<config_resource_type>(resource.resource_type);
    const bool is_topic = resource.resource_type == topic_resource;
    config_map wanted;
    for (const auto& c : resource.configs) wanted[c.name] = c.value.value_or("");
    // The broker validates only the request's own set (validateBrokerConfigChange on the request props).
    api_error error = is_topic ? s.validate_topic_resource(resource.resource_name, wanted)
                               : s.validate_broker_configs(resource.resource_name, wanted);
    if (!error.ok()) return error;
    const config_map* current = s.configs_of(type, resource.resource_name);
    for (const auto& [name, value] : wanted) {
      std::optional<std::string> old_value;
      if (current) {
        if (auto it = current->find(name); it != current->end()) old_value = it->second;
      }
      if (!is_topic || old_value != value) {
        records.push_back(
            versioned(config_record_for(resource.resource_type, resource.resource_name, name, value), v0));
      }
    }
    if (current) {
      for (const auto& [name, value] : *current) {
        if (!wanted.contains(name)) {
          records.push_back(versioned(
              config_record_for(resource.resource_type, resource.resource_name, name, std::nullopt), v0));
        }
      }
    }
    return {};
  };
  return s.alter_resource_configs<protocol::alter_configs_response>(request, records_for);
}

// ---------------------------------------------------------------------------------------------------------------
// AlterPartition (ReplicationControlManager.alterPartition): a partition leader changes its ISR (and clears
// the RECOVERING state after an unclean election).

namespace {

// validateAlterPartitionData, in Kafka's order.
error_code validate_alter_partition(
    const metadata_image& image, int32_t broker_id, const metadata::partition_state& p,
    const protocol::alter_partition_request::partition_data& data,
    const std::vector<protocol::alter_partition_request::broker_state>& new_isr, int16_t version) {
  auto log = subsystem_logger("controller");
  // A leader ahead of the image: this controller is likely not the active one any more.
  if (data.leader_epoch > p.leader_epoch || data.partition_epoch > p.partition_epoch) {
    return error_code::not_controller;
  }
  if (data.leader_epoch < p.leader_epoch) return error_code::fenced_leader_epoch;
  if (broker_id != p.leader) return error_code::invalid_request;
  if (data.partition_epoch < p.partition_epoch) return error_code::invalid_update_version;
  std::vector<int32_t> ids;
  for (const auto& b : new_isr) {
    if (!contains(p.replicas, b.broker_id) || contains(ids, b.broker_id)) return error_code::invalid_request;
    ids.push_back(b.broker_id);
  }
  if (!contains(ids, p.leader)) return error_code::invalid_request;
  if (data.leader_recovery_state == metadata::leader_recovering && ids.size() > 1) {
    return error_code::invalid_request;
  }
  if (p.leader_recovery_state == metadata::leader_recovered &&
      data.leader_recovery_state == metadata::leader_recovering) {
    return error_code::invalid_request;
  }
  for (const auto& b : new_isr) {
    auto reg = image.brokers.find(b.broker_id);
    std::string why;
    if (reg == image.brokers.end()) {
      why = "not registered";
    } else if (reg->second.in_controlled_shutdown) {
      why = "shutting down";
    } else if (reg->second.fenced) {
      why = "fenced";
    } else if (b.broker_epoch != -1 && b.broker_epoch != reg->second.epoch) {
      why = "broker epoch mismatch: requested=" + std::to_string(b.broker_epoch) +
            " VS expected=" + std::to_string(reg->second.epoch);
    }
    if (!why.empty()) {
      log->info("rejecting AlterPartition from node {}: replica {} is ineligible for the ISR ({})", broker_id,
                b.broker_id, why);
      return version > 1 ? error_code::ineligible_replica : error_code::operation_not_attempted;
    }
  }
  return error_code::none;
}

}  // namespace

protocol::alter_partition_response quorum_controller::alter_partition(
    const protocol::alter_partition_request& request, int16_t version) {
  state& s = *_state;
  const metadata::metadata_image_ptr image = s.image;
  protocol::alter_partition_response response;
  auto broker = image->brokers.find(request.broker_id);
  if (broker == image->brokers.end() || broker->second.epoch != request.broker_epoch) {
    response.error_code = to_wire(error_code::stale_broker_epoch);
    return response;
  }
  record_list records;
  // Partitions whose change is written: their answer is filled once the batch is committed.
  struct written {
    size_t topic_index;
    size_t partition_index;
    std::string topic;
    int32_t partition;
  };
  std::vector<written> pending;
  for (const auto& topic_data : request.topics) {
    protocol::alter_partition_response::topic_data out_topic;
    out_topic.topic_name = topic_data.topic_name;
    out_topic.topic_id = topic_data.topic_id;
    const metadata::topic_metadata* topic =
        version > 1 ? image->find_topic(topic_data.topic_id) : image->find_topic(topic_data.topic_name);
    for (const auto& data : topic_data.partitions) {
      protocol::alter_partition_response::partition_data out;
      out.partition_index = data.partition_index;
      auto fail = [&](error_code code) {
        out.error_code = to_wire(code);
        out_topic.partitions.push_back(out);
      };
      if (!topic) {
        fail(version > 1 ? error_code::unknown_topic_id : error_code::unknown_topic_or_partition);
        continue;
      }
      if (data.partition_index < 0 ||
          data.partition_index >= static_cast<int32_t>(topic->partitions.size())) {
        fail(error_code::unknown_topic_or_partition);
        continue;
      }
      const metadata::partition_state& p = topic->partitions[static_cast<size_t>(data.partition_index)];
      std::vector<protocol::alter_partition_request::broker_state> new_isr = data.new_isr_with_epochs;
      if (version < 3) {
        new_isr.clear();
        for (int32_t id : data.new_isr) new_isr.push_back({id, -1});
      }
      if (auto e = validate_alter_partition(*image, request.broker_id, p, data, new_isr, version);
          e != error_code::none) {
        fail(e);
        continue;
      }
      partition_change_request change_request =
          change_request_for(*image, s.options, topic->name, topic->id, p);
      change_request.target_isr.clear();
      for (const auto& b : new_isr) change_request.target_isr.push_back(b.broker_id);
      change_request.target_leader_recovery_state = data.leader_recovery_state;
      partition_change change = build_partition_change(p, change_request);
      if (change.record) {
        if (change.leader != p.leader) {
          // Only a reassignment that this ISR change completes may move the leadership (the leader was
          // removed): the change is written and the leader told NEW_LEADER_ELECTED to wait for the metadata.
          if (change.reassignment_completed) {
            records.push_back(versioned(std::move(*change.record), partition_change_record_version));
          }
          fail(version > 1 ? error_code::new_leader_elected : error_code::fenced_leader_epoch);
          continue;
        }
        records.push_back(versioned(std::move(*change.record), partition_change_record_version));
      }
      pending.push_back({response.topics.size(), out_topic.partitions.size(), topic->name, p.partition});
      out_topic.partitions.push_back(out);
    }
    response.topics.push_back(std::move(out_topic));
  }
  if (auto st = s.commit(records); !st.ok()) {
    response.error_code = to_wire(write_failure_code(st));
    return response;
  }
  // The state after the change (or as it was, when nothing changed).
  for (const written& w : pending) {
    const metadata::topic_metadata* topic = s.image->find_topic(w.topic);
    auto& out = response.topics[w.topic_index].partitions[w.partition_index];
    if (!topic || w.partition >= static_cast<int32_t>(topic->partitions.size())) {
      out.error_code = to_wire(error_code::unknown_topic_or_partition);
      continue;
    }
    const metadata::partition_state& p = topic->partitions[static_cast<size_t>(w.partition)];
    out.error_code = 0;
    out.leader_id = p.leader;
    out.leader_epoch = p.leader_epoch;
    out.isr = p.isr;
    out.leader_recovery_state = p.leader_recovery_state;
    out.partition_epoch = p.partition_epoch;
  }
  if (!records.empty()) {
    subsystem_logger("controller")
        ->info("node {} altered the ISR of {} partition(s)", request.broker_id, records.size());
  }
  return response;
}

// ---------------------------------------------------------------------------------------------------------------
// ElectLeaders (ReplicationControlManager.electLeaders): a preferred election moves leadership to the first
// replica when it is in sync and alive; an unclean one elects a leader for a leaderless partition, from
// outside the ISR if it must.

protocol::elect_leaders_response quorum_controller::elect_leaders(
    const protocol::elect_leaders_request& request, int16_t version) {
  state& s = *_state;
  const metadata::metadata_image_ptr image = s.image;
  const bool unclean = version > 0 && request.election_type == 1;
  protocol::elect_leaders_response response;
  // Every partition when the request names none (kafka-leader-election --all-topic-partitions).
  std::vector<std::pair<std::string, std::vector<int32_t>>> wanted;
  if (!request.topic_partitions) {
    for (const auto& [name, topic] : image->topics) {
      std::vector<int32_t> ids;
      for (const auto& p : topic.partitions) ids.push_back(p.partition);
      wanted.emplace_back(name, std::move(ids));
    }
  } else {
    for (const auto& t : *request.topic_partitions) wanted.emplace_back(t.topic, t.partitions);
  }
  record_list records;
  for (const auto& [name, ids] : wanted) {
    protocol::elect_leaders_response::replica_election_result result;
    result.topic = name;
    const metadata::topic_metadata* topic = image->find_topic(name);
    for (int32_t id : ids) {
      protocol::elect_leaders_response::partition_result_data out;
      out.partition_id = id;
      auto answer = [&](error_code code, std::string message) {
        // Electing every partition answers only for those that needed an election (as Kafka does).
        if (!request.topic_partitions && code == error_code::election_not_needed) return;
        out.error_code = to_wire(code);
        out.error_message =
            code == error_code::none ? std::nullopt : std::optional<std::string>(std::move(message));
        result.partition_result.push_back(out);
      };
      if (!topic || id < 0 || id >= static_cast<int32_t>(topic->partitions.size())) {
        answer(error_code::unknown_topic_or_partition, "The partition does not exist.");
        continue;
      }
      const metadata::partition_state& p = topic->partitions[static_cast<size_t>(id)];
      if (!unclean && !p.replicas.empty() && p.leader == p.replicas.front()) {
        answer(error_code::election_not_needed, "The preferred replica is already the leader.");
        continue;
      }
      if (unclean && p.leader != metadata::no_leader) {
        answer(error_code::election_not_needed, "The partition has a leader.");
        continue;
      }
      partition_change_request change_request = change_request_for(*image, s.options, name, topic->id, p);
      change_request.election = unclean ? election_type::unclean : election_type::preferred;
      partition_change change = build_partition_change(p, change_request);
      if (!change.record || change.record->leader == metadata::no_leader_change ||
          change.leader == metadata::no_leader) {
        answer(
            unclean ? error_code::eligible_leaders_not_available : error_code::preferred_leader_not_available,
            unclean ? "No live replica can lead." : "The preferred replica is not in the ISR or not alive.");
        continue;
      }
      log_election(name, p, change);
      records.push_back(versioned(std::move(*change.record), partition_change_record_version));
      answer(error_code::none, "");
    }
    response.replica_election_results.push_back(std::move(result));
  }
  if (auto st = s.commit(records); !st.ok()) {
    const error_code code = write_failure_code(st);
    for (auto& r : response.replica_election_results)
      for (auto& p : r.partition_result)
        if (p.error_code == 0) p.error_code = to_wire(code);
  }
  return response;
}

// ---------------------------------------------------------------------------------------------------------------
// AlterPartitionReassignments / ListPartitionReassignments (ReplicationControlManager, KIP-455)

protocol::alter_partition_reassignments_response quorum_controller::alter_partition_reassignments(
    const protocol::alter_partition_reassignments_request& request, int16_t version) {
  (void)version;
  state& s = *_state;
  const metadata::metadata_image_ptr image = s.image;
  protocol::alter_partition_reassignments_response response;
  record_list records;
  auto log = subsystem_logger("controller");
  for (const auto& t : request.topics) {
    protocol::alter_partition_reassignments_response::reassignable_topic_response out_topic;
    out_topic.name = t.name;
    const metadata::topic_metadata* topic = image->find_topic(t.name);
    for (const auto& part : t.partitions) {
      protocol::alter_partition_reassignments_response::reassignable_partition_response out;
      out.partition_index = part.partition_index;
      auto answer = [&](error_code code, std::string message) {
        out.error_code = to_wire(code);
        out.error_message =
            code == error_code::none ? std::nullopt : std::optional<std::string>(std::move(message));
        out_topic.partitions.push_back(out);
      };
      if (!topic || part.partition_index < 0 ||
          part.partition_index >= static_cast<int32_t>(topic->partitions.size())) {
        answer(error_code::unknown_topic_or_partition, "The topic or partition does not exist.");
        continue;
      }
      const metadata::partition_state& p = topic->partitions[static_cast<size_t>(part.partition_index)];
      const bool in_progress = !p.adding_replicas.empty() || !p.removing_replicas.empty();
      // The replicas before any reassignment in progress (Kafka's PartitionReassignmentRevert).
      std::vector<int32_t> original;
      for (int32_t r : p.replicas)
        if (!contains(p.adding_replicas, r)) original.push_back(r);
      std::vector<int32_t> target;
      if (!part.replicas) {
        if (!in_progress) {
          answer(error_code::no_reassignment_in_progress,
                 "No reassignment is in progress for this partition.");
          continue;
        }
        target = original;
      } else {
        target = *part.replicas;
        std::vector<int32_t> seen;
        std::string problem;
        if (target.empty()) problem = "The replica list is empty.";
        for (int32_t r : target) {
          if (contains(seen, r)) problem = "Duplicate replica " + std::to_string(r) + ".";
          if (image->brokers.find(r) == image->brokers.end()) {
            problem = "Replica " + std::to_string(r) + " is not a registered broker.";
          }
          seen.push_back(r);
        }
        if (!problem.empty()) {
          answer(error_code::invalid_replica_assignment, problem);
          continue;
        }
      }
      // From the original assignment to the target: the target first, then the replicas that go.
      std::vector<int32_t> merged = target, adding, removing;
      for (int32_t r : target)
        if (!contains(original, r)) adding.push_back(r);
      for (int32_t r : original) {
        if (!contains(target, r)) {
          removing.push_back(r);
          merged.push_back(r);
        }
      }
      // A clean election if the leader goes (Kafka's reassignment changes do not elect uncleanly).
      partition_change_request change_request =
          change_request_for(*image, s.options, topic->name, topic->id, p);
      change_request.election = election_type::online;
      std::erase_if(change_request.target_isr, [&](int32_t r) { return !contains(merged, r); });
      change_request.target_replicas = merged;
      change_request.target_adding = adding;
      change_request.target_removing = removing;
      partition_change change = build_partition_change(p, change_request);
      if (change.record) {
        log->info("{}-{}: reassignment {} replicas {} (adding {}, removing {}){}", topic->name, p.partition,
                  part.replicas ? "to" : "cancelled, back to", fmt::join(target, ","), fmt::join(adding, ","),
                  fmt::join(removing, ","), change.reassignment_completed ? ": complete at once" : "");
        records.push_back(versioned(std::move(*change.record), partition_change_record_version));
      }
      answer(error_code::none, "");
    }
    response.responses.push_back(std::move(out_topic));
  }
  if (auto st = s.commit(records); !st.ok()) {
    response.error_code = to_wire(write_failure_code(st));
    response.error_message = st.message;
  }
  return response;
}

protocol::list_partition_reassignments_response quorum_controller::list_partition_reassignments(
    const protocol::list_partition_reassignments_request& request) const {
  const metadata::metadata_image_ptr image = _state->image;
  protocol::list_partition_reassignments_response response;
  auto add = [&](const metadata::topic_metadata& topic, const metadata::partition_state& p) {
    if (p.adding_replicas.empty() && p.removing_replicas.empty()) return;
    auto it = std::find_if(response.topics.begin(), response.topics.end(),
                           [&](const auto& t) { return t.name == topic.name; });
    if (it == response.topics.end()) {
      response.topics.emplace_back().name = topic.name;
      it = response.topics.end() - 1;
    }
    auto& out = it->partitions.emplace_back();
    out.partition_index = p.partition;
    out.replicas = p.replicas;
    out.adding_replicas = p.adding_replicas;
    out.removing_replicas = p.removing_replicas;
  };
  if (!request.topics) {
    for (const auto& [name, topic] : image->topics)
      for (const auto& p : topic.partitions) add(topic, p);
  } else {
    for (const auto& t : *request.topics) {
      const metadata::topic_metadata* topic = image->find_topic(t.name);
      if (!topic) continue;
      for (int32_t id : t.partition_indexes)
        if (id >= 0 && id < static_cast<int32_t>(topic->partitions.size()))
          add(*topic, topic->partitions[static_cast<size_t>(id)]);
    }
  }
  return response;
}

// ---------------------------------------------------------------------------------------------------------------
// AllocateProducerIds (ProducerIdControlManager.generateNextProducerId, KIP-730)

result<producer_id_block> quorum_controller::allocate_producer_ids(int32_t broker_id, int64_t broker_epoch) {
  state& s = *_state;
  const metadata::metadata_image_ptr image = s.image;
  auto broker = image->brokers.find(broker_id);
  if (broker == image->brokers.end()) {
    return status::error(error_code::stale_broker_epoch,
                         "No broker registration found for broker id " + std::to_string(broker_id));
  }
  if (broker->second.epoch != broker_epoch) {
    return status::error(error_code::stale_broker_epoch,
                         "Expected broker epoch " + std::to_string(broker->second.epoch) +
                             ", but got broker epoch " + std::to_string(broker_epoch));
  }
  const int64_t first = image->next_producer_id;
  if (first > std::numeric_limits<int64_t>::max() - producer_id_block_size) {
    return status::error(
        error_code::unknown_server_error,
        "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type "
        "limit");
  }
  protocol::producer_ids_record record;
  record.broker_id = broker_id;
  record.broker_epoch = broker_epoch;
  record.next_producer_id = first + producer_id_block_size;
  if (auto st = s.commit({versioned(record, v0)}); !st.ok()) return st;
  return producer_id_block{broker_id, first, producer_id_block_size};
}

// ---------------------------------------------------------------------------------------------------------------
// BrokerHeartbeat (QuorumController / ReplicationControlManager.processBrokerHeartbeat)

protocol::broker_heartbeat_response quorum_controller::broker_heartbeat(
    const protocol::broker_heartbeat_request& request, int64_t now_ms) {
  state& s = *_state;
  const metadata::metadata_image_ptr image_ptr = s.image;
  const metadata_image& image = *image_ptr;
  const int32_t id = request.broker_id;
  protocol::broker_heartbeat_response response;  // IsFenced true, IsCaughtUp false: what an error answers
  auto fail = [&](error_code code, const std::string& why) {
    subsystem_logger("controller")->debug("heartbeat from broker {} refused: {}", id, why);
    response.error_code = to_wire(code);
    return response;
  };

  // ClusterControlManager.checkBrokerEpoch (StaleBrokerEpochException).
  auto broker = image.brokers.find(id);
  if (broker == image.brokers.end()) {
    return fail(error_code::stale_broker_epoch,
                "Receive a heartbeat from broker " + std::to_string(id) + " before registration");
  }
  const int64_t epoch = broker->second.epoch;
  if (request.broker_epoch != epoch) {
    return fail(error_code::stale_broker_epoch, "Expected broker epoch " + std::to_string(epoch) +
                                                    ", but got broker epoch " +
                                                    std::to_string(request.broker_epoch));
  }

  broker_heartbeat_manager& sessions = s.sessions();
  broker_control_state current = broker_control_state::unfenced;
  if (broker->second.fenced) {
    current = broker_control_state::fenced;
  } else if (sessions.in_controlled_shutdown(id)) {
    current = broker_control_state::controlled_shutdown;
  }
  heartbeat_facts facts;
  facts.want_fence = request.want_fence;
  facts.want_shut_down = request.want_shut_down;
  // The broker epoch is the offset of its RegisterBrokerRecord.
  facts.caught_up = request.current_metadata_offset >= epoch;
  facts.has_leaderships = leads_any(image, id);
  if (current == broker_control_state::controlled_shutdown) {
    std::vector<int32_t> active;
    for (const auto& [other, b] : image.brokers) {
      if (other != id && !b.fenced && !sessions.in_controlled_shutdown(other)) active.push_back(other);
    }
    facts.shutdown_offset_reached =
        *sessions.controlled_shutdown_offset(id) <= sessions.lowest_offset(active);
  }
  const broker_control_state next = next_broker_state(current, facts);

  record_list records;
  if (next != current) {
    switch (next) {
      case broker_control_state::fenced:
      case broker_control_state::shutdown_now:
        // Kafka writes the fencing again for a fenced broker that shuts down; Mala writes nothing then.
        if (!broker->second.fenced) append_fence_records(image, s.options, {id}, records);
        break;
      case broker_control_state::unfenced:
        append_unfence_records(image, s.options, id, epoch, records);
        break;
      case broker_control_state::controlled_shutdown:
        append_controlled_shutdown_records(image, s.options, id, epoch, records);
        break;
    }
  }
  if (auto st = s.commit(records); !st.ok()) {
    // The heartbeat still counts for the session; the state stays as it was.
    sessions.touch(id, now_ms, request.current_metadata_offset, broker->second.fenced);
    return fail(st.code, st.message);
  }
  if (next != current) {
    subsystem_logger("controller")
        ->info("broker {} (epoch {}) heartbeat: {} -> {} ({} record(s))", id, epoch, to_string(current),
               to_string(next), records.size());
  }
  sessions.touch(id, now_ms, request.current_metadata_offset, is_fenced(next));
  // The controlled shutdown is complete once every active broker has replayed past the records that moved
  // its leaderships (QuorumController's processBatchEndOffset).
  if (next == broker_control_state::controlled_shutdown)
    sessions.maybe_set_controlled_shutdown_offset(id, s.log->end_offset() - 1);

  response.is_caught_up = facts.caught_up;
  response.is_fenced = is_fenced(next);
  response.should_shut_down = should_shut_down(next);
  return response;
}

// ---------------------------------------------------------------------------------------------------------------
// Session expiry (ReplicationControlManager.maybeFenceOneStaleBroker)

void quorum_controller::fence_stale_brokers(int64_t now_ms) {
  state& s = *_state;
  std::vector<int32_t> unfenced;
  for (const auto& [id, b] : s.image->brokers)
    if (!b.fenced) unfenced.push_back(id);
  const std::vector<int32_t> stale = s.sessions().stale_brokers(unfenced, now_ms);
  if (stale.empty()) return;
  // The brokers whose sessions expired by now are fenced in one batch. Kafka fences one stale broker at a
  // time (maybeFenceOneStaleBroker), each fencing handing its leaderships to an ISR member that is still
  // unfenced in the image even when that member's session has expired too and it is fenced next. After a
  // whole-cluster crash every session expires at once (they all restarted when the new controller became
  // active), and that cascade made the last broker fenced the last known leader of every partition, so all of
  // them came back under it. Fenced together, no partition is handed to a broker that is being fenced: each
  // keeps its own last leader (the last known leader once its ISR is empty), and the ELR keeps every ISR
  // member that left at once, which all had every committed record.
  record_list records;
  append_fence_records(*s.image, s.options, stale, records);
  if (auto st = s.commit(records); !st.ok()) {
    subsystem_logger("controller")
        ->error("cannot fence broker(s) {} after their sessions timed out: {}", fmt::join(stale, ","),
                st.message);
    return;
  }
  subsystem_logger("controller")
      ->info("fenced broker(s) {} because their sessions have timed out ({} record(s))",
             fmt::join(stale, ","), records.size());
  for (int32_t id : stale) s.sessions().fenced(id);
}

void quorum_controller::elect_unclean_leaders() {
  state& s = *_state;
  const metadata::metadata_image_ptr image = s.image;
  record_list records;
  for (const auto& [name, topic] : image->topics) {
    bool leaderless = false;
    for (const auto& p : topic.partitions) leaderless = leaderless || p.leader == metadata::no_leader;
    if (!leaderless || !election_rules_for(*image, name, s.options).unclean_leader_election) continue;
    for (const auto& p : topic.partitions) {
      if (p.leader != metadata::no_leader) continue;
      if (auto change = leader_and_isr_change(*image, s.options, name, topic.id, p, {}, metadata::no_leader))
        records.push_back(versioned(std::move(*change), partition_change_record_version));
    }
  }
  if (records.empty()) return;
  if (auto st = s.commit(records); !st.ok()) {
    subsystem_logger("controller")->error("cannot write the unclean leader elections: {}", st.message);
  }
}

void quorum_controller::maybe_rebalance_leaders(int64_t now_ms) {
  state& s = *_state;
  if (!s.options.auto_leader_rebalance) return;
  if (s.next_leader_rebalance_ms == 0)
    s.next_leader_rebalance_ms = now_ms + s.options.leader_imbalance_check_interval_ms;
  if (now_ms < s.next_leader_rebalance_ms) return;
  s.next_leader_rebalance_ms = now_ms + s.options.leader_imbalance_check_interval_ms;
  const metadata::metadata_image_ptr image = s.image;
  record_list records;
  for (const auto& [name, topic] : image->topics) {
    for (const auto& p : topic.partitions) {
      if (p.replicas.empty() || p.leader == p.replicas.front()) continue;
      const int32_t preferred = p.replicas.front();
      if (!contains(p.isr, preferred) || !is_active(*image, preferred)) continue;
      partition_change_request request = change_request_for(*image, s.options, name, topic.id, p);
      request.election = election_type::preferred;
      partition_change change = build_partition_change(p, request);
      if (change.record && change.leader == preferred) {
        records.push_back(versioned(std::move(*change.record), partition_change_record_version));
      }
    }
  }
  if (records.empty()) return;
  if (auto st = s.commit(records); !st.ok()) {
    subsystem_logger("controller")->error("cannot write the preferred leader elections: {}", st.message);
    return;
  }
  subsystem_logger("controller")
      ->info("moved leadership back to the preferred replica of {} partition(s)", records.size());
}

void quorum_controller::reset_heartbeat_deadlines(int64_t now_ms) {
  state& s = *_state;
  std::vector<int32_t> ids;
  for (const auto& [id, b] : s.image->brokers) ids.push_back(id);
  s.sessions().reset(ids, now_ms);
}

}  // namespace mala::controller
