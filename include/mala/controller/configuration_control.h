// Dynamic configs (Kafka's ConfigurationControlManager plus the checks of ConfigAdminManager.preprocess and
// ControllerConfigurationValidator): IncrementalAlterConfigs (SET / DELETE / APPEND / SUBTRACT) and the
// legacy AlterConfigs (replaces every override of a resource) for topics, brokers and client metrics
// subscriptions (client_metrics_config.h), validated with Kafka's
// names, types, ranges and messages and written as ConfigRecords; the topic configs a CreateTopics request
// carries.
//
// The resource-level checks both AlterConfigs flavours start with (check_alter_configs_resources) are the
// broker's and the controller's: the broker runs them before it forwards a request (naming its own node id
// for BROKER resources), the controller again on what it receives.
//
// Threads: a configuration_control is used on the controller's thread only (shard 0). The free functions are
// pure and safe from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mala/common/result.h"
#include "mala/controller/controller_records.h"
#include "mala/controller/topic_config.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/alter_configs_request.h"
#include "mala/protocol/messages/alter_configs_response.h"
#include "mala/protocol/messages/create_topics_request.h"
#include "mala/protocol/messages/incremental_alter_configs_request.h"
#include "mala/protocol/messages/incremental_alter_configs_response.h"

namespace mala::controller {

// ConfigResource.Type ids as the AlterConfigs and DescribeConfigs requests carry them.
inline constexpr int8_t config_resource_topic = 2;
inline constexpr int8_t config_resource_broker = 4;
inline constexpr int8_t config_resource_broker_logger = 8;
inline constexpr int8_t config_resource_client_metrics = 16;
inline constexpr int8_t config_resource_group = 32;

// AlterConfigOp.OpType ids (IncrementalAlterConfigs). DELETE is the one operation that may (and does) carry a
// null value.
inline constexpr int8_t config_op_set = 0;
inline constexpr int8_t config_op_delete = 1;
inline constexpr int8_t config_op_append = 2;
inline constexpr int8_t config_op_subtract = 3;

// Java's Integer.parseInt: optional sign and decimal digits, within int32.
std::optional<int32_t> parse_java_int(std::string_view text);

// Who runs check_alter_configs_resources and what it lets through.
struct alter_configs_check_rules {
  // Whether a BROKER resource's name is checked: "" (the cluster default) or a node id. False for a request
  // another node forwarded, which that node checked.
  bool check_broker_names = true;
  // A BROKER resource must name this node (ConfigAdminManager.validateResourceNameIsCurrentNodeId: the
  // broker that received the request); nullopt: any node id (ControllerConfigurationValidator).
  std::optional<int32_t> this_node;
  // GROUP passes: the broker forwards it; the controller, which does not store group configs, refuses it as
  // an unknown type. CLIENT_METRICS always passes: the controller stores the subscriptions.
  bool pass_group = false;
};

// A BROKER resource's name under `rules` (INVALID_REQUEST "Node id must be an integer, but it is: x" /
// "Unexpected broker id, expected N, but received x").
status check_broker_resource_name(const std::string& name, const alter_configs_check_rules& rules);

// The front of both AlterConfigs flavours (ConfigAdminManager.preprocess), per resource by position: a
// resource given twice (every occurrence), a config key given twice, a null value other than DELETE's, then
// `local(resource)` (a resource type the caller answers itself, e.g. the broker's BROKER_LOGGER: a status, or
// nullopt when it does not handle the type), then the resource type and a BROKER resource's name. nullopt:
// the resource passed.
template <typename Resource, typename LocalFn>
std::vector<std::optional<status>> check_alter_configs_resources(const std::vector<Resource>& resources,
                                                                 const alter_configs_check_rules& rules,
                                                                 LocalFn local) {
  std::vector<std::optional<status>> verdict(resources.size());
  std::map<std::pair<int8_t, std::string>, std::vector<size_t>> positions;
  for (size_t i = 0; i < resources.size(); ++i) {
    positions[{resources[i].resource_type, resources[i].resource_name}].push_back(i);
  }
  for (const auto& [key, at] : positions) {
    if (at.size() < 2) continue;
    for (size_t i : at)
      verdict[i] = status::error(error_code::invalid_request, "Each resource must appear at most once.");
  }
  for (size_t i = 0; i < resources.size(); ++i) {
    if (verdict[i]) continue;
    const auto& r = resources[i];
    std::set<std::string> names;
    bool duplicate = false;
    std::string null_updates;
    for (const auto& c : r.configs) {
      if (!names.insert(c.name).second) duplicate = true;
      bool is_delete = false;
      if constexpr (requires { c.config_operation; }) is_delete = c.config_operation == config_op_delete;
      if (!c.value && !is_delete) null_updates += (null_updates.empty() ? "" : ", ") + c.name;
    }
    if (duplicate) {
      verdict[i] = status::error(error_code::invalid_request, "Error due to duplicate config keys");
      continue;
    }
    if (!null_updates.empty()) {
      verdict[i] =
          status::error(error_code::invalid_request, "Null value not supported for : " + null_updates);
      continue;
    }
    if (std::optional<status> handled = local(r)) {
      verdict[i] = std::move(handled);
      continue;
    }
    switch (r.resource_type) {
      case config_resource_broker:
        if (auto st = check_broker_resource_name(r.resource_name, rules); !st.ok())
          verdict[i] = std::move(st);
        break;
      case config_resource_topic:
      case config_resource_client_metrics:
        break;
      case config_resource_group:
        if (rules.pass_group) break;
        [[fallthrough]];
      default:
        // Kafka also stores GROUP configs; Mala does not, so the controller gives them the answer Kafka gives
        // a type it does not know.
        verdict[i] = status::error(error_code::invalid_request,
                                   "Unknown resource type " + std::to_string(int{r.resource_type}));
    }
  }
  return verdict;
}

// The configs of a topic being created (ConfigurationControlManager.incrementalAlterConfig with
// newlyCreatedResource=true, as Kafka 4.x validates them): a null value (INVALID_CONFIG "Null value not
// supported for topic configs: a,b"), then every key and value as validate_topic_configs. A repeated name:
// the last value wins, as Kafka's HashMap does.
result<metadata::config_map> new_topic_configs(
    const std::vector<protocol::create_topics_request::creatable_topic_config>& configs);

// The ConfigRecord setting (or, with a null value, removing) one key of a resource.
protocol::config_record config_record_for(int8_t resource_type, const std::string& resource_name,
                                          const std::string& name, std::optional<std::string> value);

// Records that config changes imply elsewhere, appended to the same batch (KIP-966: a change of
// min.insync.replicas clears the ELRs chosen against the old value; replication_control supplies them).
using config_change_follow_up =
    std::function<void(const metadata::metadata_image& image, record_list& records)>;

class configuration_control {
 public:
  // node_id and static_config resolve broker property values in effect on this node (thread-pool changes
  // are measured against them).
  configuration_control(metadata_writer& writer, int32_t node_id, static_broker_config_lookup static_config,
                        config_change_follow_up follow_up);

  protocol::incremental_alter_configs_response incremental_alter_configs(
      const protocol::incremental_alter_configs_request& request);
  protocol::alter_configs_response alter_configs(const protocol::alter_configs_request& request);

  // ControllerConfigurationValidator for a TOPIC resource, then QuorumController's existence check (in that
  // order: a bad config of a missing topic is INVALID_CONFIG).
  api_error validate_topic_resource(const std::string& name, const metadata::config_map& all_configs) const;
  // ConfigAdminManager.validateBrokerConfigChange + DynamicBrokerConfig.validate: `props` is the resource's
  // whole set of dynamic values after the change (INVALID_REQUEST for every refusal, KAFKA-13609).
  api_error validate_broker_configs(const std::string& resource_name,
                                    const metadata::config_map& props) const;
  // ControllerConfigurationValidator for a CLIENT_METRICS resource: its whole set of configs after the change
  // (parse_client_metrics_configs).
  static api_error validate_client_metrics_resource(const std::string& name,
                                                    const metadata::config_map& configs);

 private:
  std::optional<std::string> broker_value(std::string_view name, const metadata::config_map* per_broker,
                                          const metadata::config_map* cluster) const;
  template <typename Response, typename Request, typename RecordsFor>
  Response alter_resource_configs(const Request& request, RecordsFor records_for);

  metadata_writer& _writer;
  int32_t _node_id;
  static_broker_config_lookup _static_config;
  config_change_follow_up _follow_up;
};

}  // namespace mala::controller
