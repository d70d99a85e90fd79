// A node's static configuration: Apache Kafka's broker/controller property names, types, defaults and
// validation, read from YAML (flat `log.dirs:` keys or nested maps flattened with dots; lists as sequences or
// Kafka's comma-separated strings) or from a Java `.properties` file, with `--override key=value` applied
// last.
//
// `node_config::load` returns either a fully validated configuration or the first error, naming the key.
// Unknown keys are not errors (Kafka ignores them too); they come back in `warnings()` for the caller to log.
//
// A node_config is immutable once loaded: every const method may be called from any thread (any shard)
// without synchronisation. Dynamic (DescribeConfigs/IncrementalAlterConfigs) values will live in the metadata
// log, not here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "mala/common/listener.h"
#include "mala/common/result.h"

namespace mala {

// Kafka's ConfigDef.Type, in the order its documentation lists them.
enum class config_type { boolean, string, int32, int16, int64, float64, list, password, class_name };
// Kafka's ConfigDef.Importance.
enum class config_importance { high, medium, low };
// Kafka's "Update Mode" column: read-only, or dynamically changeable per broker or cluster-wide.
enum class config_update_mode { read_only, per_broker, cluster_wide };
// Where a value came from; DescribeConfigs reports DEFAULT_CONFIG / STATIC_BROKER_CONFIG from this.
enum class config_source { default_value, file, override_value };

std::string_view to_string(config_type type);  // "int", "long", "list", ... as Kafka's docs print them
std::string_view to_string(config_importance importance);
std::string_view to_string(config_update_mode mode);  // "read-only", "per-broker", "cluster-wide"
std::string_view to_string(config_source source);     // "default", "file", "override"

// One known key. Validation is data: an inclusive numeric range and/or a set of allowed strings (for a list,
// every element must be allowed). Checks that involve several keys live in node_config::load.
struct config_key {
  std::string_view name;
  config_type type;
  std::optional<std::string_view> default_value;  // nullopt: null (unset) unless `required`
  bool required = false;                          // Kafka "no default value": loading fails when absent
  std::optional<int64_t> min;
  std::optional<int64_t> max;
  std::vector<std::string_view> allowed;
  config_importance importance = config_importance::medium;
  config_update_mode update_mode = config_update_mode::read_only;
  std::string_view doc;
};

// Every key Mala knows, sorted by name.
std::span<const config_key> known_config_keys();
const config_key* find_config_key(std::string_view name);
// Kafka's docs form of a key's validator: "[1,...]", "[0,...,65535]", "[broker, controller]", or "".
std::string describe_valid_values(const config_key& key);

// The contents of config/server.yaml, compiled in: a working single node in combined mode.
std::string_view embedded_default_config();

// Parses Java properties text (key=value, key: value or key value; '#' and '!' comments; backslash line
// continuation; \t \n \r \f \uXXXX escapes) into (key, value) pairs in file order. Never fails: like
// java.util.Properties, every line that is not blank or a comment is a key with a possibly empty value.
std::vector<std::pair<std::string, std::string>> parse_java_properties(std::string_view text);

enum class config_format { yaml, properties };

// A value as DescribeConfigs would show it: nullopt for null, "[hidden]" for passwords.
struct config_entry {
  std::optional<std::string> value;
  config_source source = config_source::default_value;
  friend bool operator==(const config_entry&, const config_entry&) = default;
};

class node_config {
 public:
  // Loads `file` (nullptr: the embedded default), picking the format from the extension (`.properties` or
  // YAML), then applies `overrides` ("key=value", in order; later wins). A refused configuration is
  // invalid_config whose message starts with the offending key ("log.dirs: ..."), or with the file for
  // file-level problems (unreadable file, YAML syntax).
  static result<node_config> load(const std::filesystem::path* file,
                                  const std::vector<std::string>& overrides);
  // The same from text already in memory (tests, the embedded default).
  static result<node_config> load_from_string(std::string_view text, config_format format,
                                              const std::vector<std::string>& overrides);

  const std::vector<std::string>& warnings() const { return _warnings; }

  // Generic access by name, for DescribeConfigs and for keys without a typed getter. nullopt when the value
  // is null, the key is unknown, or the key has another type (int covers int and short; string covers string,
  // password and class).
  std::optional<int32_t> get_int(std::string_view name) const;
  std::optional<int64_t> get_long(std::string_view name) const;
  std::optional<double> get_double(std::string_view name) const;
  std::optional<bool> get_bool(std::string_view name) const;
  std::optional<std::string> get_string(std::string_view name) const;
  std::optional<std::vector<std::string>> get_list(std::string_view name) const;
  // Every known key, sorted by name.
  std::map<std::string, config_entry, std::less<>> all_values() const;

  // --- Roles and identity
  int32_t node_id() const { return _node_id; }
  const std::vector<std::string>& process_roles() const { return _process_roles; }
  bool has_role(std::string_view role) const;
  std::optional<std::string> cluster_id() const {
    return get_string("cluster.id");
  }  // Mala: fixed id for format
  std::optional<std::string> broker_rack() const { return get_string("broker.rack"); }

  // --- Listeners (security protocols resolved through the effective listener.security.protocol.map)
  const std::vector<listener_config>& listeners() const { return _listeners; }
  // What the node publishes to clients: advertised.listeners, or listeners minus controller listeners.
  const std::vector<listener_config>& advertised_listeners() const { return _advertised_listeners; }
  const std::vector<std::string>& controller_listener_names() const { return _controller_listener_names; }
  // The listeners (from `listeners`) named in controller.listener.names; empty on a broker-only node.
  std::vector<listener_config> controller_listeners() const;
  // inter.broker.listener.name, or the listener named after security.inter.broker.protocol.
  const std::string& inter_broker_listener_name() const { return _inter_broker_listener_name; }
  // A per-listener override as written (Kafka's listener.name.<listener, lower case>.<key>), or nullopt.
  // Values may be secrets (JAAS configurations): never log them.
  std::optional<std::string> listener_setting(std::string_view listener, std::string_view key) const;

  // --- KRaft quorum
  const std::vector<quorum_voter>& quorum_voters() const { return _quorum_voters; }
  const std::vector<host_port>& quorum_bootstrap_servers() const { return _quorum_bootstrap_servers; }
  int32_t controller_quorum_election_timeout_ms() const {
    return int_value("controller.quorum.election.timeout.ms");
  }
  int32_t controller_quorum_fetch_timeout_ms() const {
    return int_value("controller.quorum.fetch.timeout.ms");
  }
  int32_t controller_quorum_election_backoff_max_ms() const {
    return int_value("controller.quorum.election.backoff.max.ms");
  }
  int32_t broker_heartbeat_interval_ms() const { return int_value("broker.heartbeat.interval.ms"); }
  int32_t broker_session_timeout_ms() const { return int_value("broker.session.timeout.ms"); }
  int64_t metadata_log_max_record_bytes_between_snapshots() const {
    return long_value("metadata.log.max.record.bytes.between.snapshots");
  }

  // --- Network and threads
  int32_t socket_request_max_bytes() const { return int_value("socket.request.max.bytes"); }
  int64_t connections_max_idle_ms() const { return long_value("connections.max.idle.ms"); }
  int32_t queued_max_requests() const { return int_value("queued.max.requests"); }
  int64_t queued_max_request_bytes() const { return long_value("queued.max.request.bytes"); }
  int32_t socket_send_buffer_bytes() const { return int_value("socket.send.buffer.bytes"); }
  int32_t socket_receive_buffer_bytes() const { return int_value("socket.receive.buffer.bytes"); }
  int32_t num_network_threads() const { return int_value("num.network.threads"); }
  int32_t num_io_threads() const { return int_value("num.io.threads"); }
  int32_t shards() const { return int_value("mala.shards"); }  // 0 = one per core
  std::string log_level() const { return string_value("log.level"); }

  // --- Topics and logs
  // log.dirs, else log.dir.
  const std::vector<std::string>& log_dirs() const { return _log_dirs; }
  int32_t num_partitions() const { return int_value("num.partitions"); }
  int32_t default_replication_factor() const { return int_value("default.replication.factor"); }
  int32_t min_insync_replicas() const { return int_value("min.insync.replicas"); }
  bool auto_create_topics_enable() const { return bool_value("auto.create.topics.enable"); }
  bool delete_topic_enable() const { return bool_value("delete.topic.enable"); }
  int32_t message_max_bytes() const { return int_value("message.max.bytes"); }
  int32_t log_segment_bytes() const { return int_value("log.segment.bytes"); }
  // log.roll.ms, else log.roll.hours.
  int64_t log_roll_ms() const;
  // log.retention.ms, else .minutes, else .hours; any negative value means unlimited and is returned as -1.
  int64_t log_retention_ms() const;
  int64_t log_retention_bytes() const { return long_value("log.retention.bytes"); }
  int64_t log_retention_check_interval_ms() const { return long_value("log.retention.check.interval.ms"); }
  int32_t log_index_interval_bytes() const { return int_value("log.index.interval.bytes"); }
  int32_t log_index_size_max_bytes() const { return int_value("log.index.size.max.bytes"); }
  int64_t log_flush_interval_messages() const { return long_value("log.flush.interval.messages"); }
  // log.flush.interval.ms, else log.flush.scheduler.interval.ms.
  int64_t log_flush_interval_ms() const;
  std::vector<std::string> log_cleanup_policy() const { return list_value("log.cleanup.policy"); }

  // --- Replication
  bool unclean_leader_election_enable() const { return bool_value("unclean.leader.election.enable"); }
  bool auto_leader_rebalance_enable() const { return bool_value("auto.leader.rebalance.enable"); }
  int64_t replica_lag_time_max_ms() const { return long_value("replica.lag.time.max.ms"); }
  int32_t replica_fetch_max_bytes() const { return int_value("replica.fetch.max.bytes"); }
  int32_t replica_fetch_wait_max_ms() const { return int_value("replica.fetch.wait.max.ms"); }
  int32_t replica_fetch_min_bytes() const { return int_value("replica.fetch.min.bytes"); }
  int32_t num_replica_fetchers() const { return int_value("num.replica.fetchers"); }

  // --- Coordinators
  int32_t offsets_topic_num_partitions() const { return int_value("offsets.topic.num.partitions"); }
  int16_t offsets_topic_replication_factor() const {
    return static_cast<int16_t>(int_value("offsets.topic.replication.factor"));
  }
  int32_t offsets_retention_minutes() const { return int_value("offsets.retention.minutes"); }
  int32_t group_initial_rebalance_delay_ms() const { return int_value("group.initial.rebalance.delay.ms"); }
  int32_t group_max_size() const { return int_value("group.max.size"); }
  int16_t transaction_state_log_replication_factor() const {
    return static_cast<int16_t>(int_value("transaction.state.log.replication.factor"));
  }
  int32_t transaction_state_log_min_isr() const { return int_value("transaction.state.log.min.isr"); }

  // A parsed value: null, boolean, integer (int/short/long), double, string (string/password/class) or list.
  using value = std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<std::string>>;

 private:
  struct stored_value {
    value parsed;
    config_source source = config_source::default_value;
  };
  friend class node_config_loader;

  node_config() = default;
  const stored_value* find(std::string_view name) const;
  // For keys that are non-null after validation; a miss is a programming error and aborts.
  int32_t int_value(std::string_view name) const;
  int64_t long_value(std::string_view name) const;
  bool bool_value(std::string_view name) const;
  std::string string_value(std::string_view name) const;
  std::vector<std::string> list_value(std::string_view name) const;

  std::map<std::string, stored_value, std::less<>> _values;
  std::vector<std::string> _warnings;
  int32_t _node_id = -1;
  std::vector<std::string> _process_roles;
  std::vector<listener_config> _listeners;
  std::vector<listener_config> _advertised_listeners;
  std::vector<std::string> _controller_listener_names;
  std::string _inter_broker_listener_name;
  std::vector<quorum_voter> _quorum_voters;
  std::vector<host_port> _quorum_bootstrap_servers;
  std::vector<std::string> _log_dirs;
  std::map<std::string, std::string, std::less<>> _listener_settings;  // listener.name.* as written
};

}  // namespace mala
