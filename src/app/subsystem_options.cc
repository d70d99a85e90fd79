#include "subsystem_options.h"

#include <chrono>
#include <map>
#include <memory>

#include <unistd.h>

#include <fmt/format.h>

#include "mala/controller/feature_control.h"
#include "mala/controller/metadata_log.h"

namespace mala::app {

namespace {

std::string local_host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::function<std::optional<std::string>(std::string_view)> static_property_lookup(
    const node_config& config) {
  // The configuration file does not change while the node runs: the properties it sets are collected once
  // (the controller resolves a topic's configs for every partition it elects a leader of).
  auto set = std::make_shared<std::map<std::string, std::optional<std::string>, std::less<>>>();
  const auto values = config.all_values();
  auto is_set = [&](std::string_view name) {
    auto it = values.find(name);
    return it != values.end() && it->second.source != config_source::default_value;
  };
  for (const auto& [name, entry] : values) {
    if (entry.source != config_source::default_value) (*set)[name] = entry.value;
  }
  (*set).erase("log.retention.ms");
  (*set).erase("log.roll.ms");
  if (is_set("log.retention.ms") || is_set("log.retention.minutes") || is_set("log.retention.hours"))
    (*set)["log.retention.ms"] = std::to_string(config.log_retention_ms());
  if (is_set("log.roll.ms") || is_set("log.roll.hours"))
    (*set)["log.roll.ms"] = std::to_string(config.log_roll_ms());
  return [set](std::string_view property) -> std::optional<std::string> {
    auto it = set->find(property);
    return it == set->end() ? std::nullopt : it->second;
  };
}

std::filesystem::path metadata_log_dir(const node_config& config) {
  const auto configured = config.get_string("metadata.log.dir");
  return configured && !configured->empty() ? std::filesystem::path(*configured)
                                            : std::filesystem::path(config.log_dirs().front());
}

bool dynamic_quorum(const node_config& config) {
  return config.quorum_voters().empty() && !config.quorum_bootstrap_servers().empty();
}

result<std::optional<std::vector<raft::voter_info>>> initial_voters(
    const node_config& config, bool standalone, const std::optional<std::string>& initial_controllers,
    const uuid& metadata_dir_id) {
  if (!config.has_role("controller") || !config.quorum_voters().empty()) {
    return std::optional<std::vector<raft::voter_info>>();
  }
  const std::string listener_name = config.controller_listener_names().front();
  if (standalone) {
    // This node, reached on its first controller listener, with its metadata log dir's directory id.
    raft::voter_info self;
    self.id = config.node_id();
    self.directory_id = metadata_dir_id;
    self.listener_name = listener_name;
    for (const auto& l : config.listeners()) {
      if (l.name == listener_name) self.endpoint = {l.host.empty() ? "localhost" : l.host, l.port};
    }
    return std::optional<std::vector<raft::voter_info>>(std::vector<raft::voter_info>{self});
  }
  if (!initial_controllers) return std::optional<std::vector<raft::voter_info>>();
  auto parsed = raft::parse_initial_controllers(*initial_controllers, listener_name);
  if (!parsed.ok()) {
    return status::error(parsed.error().code, "invalid --initial-controllers: " + parsed.error().message);
  }
  return std::optional<std::vector<raft::voter_info>>(std::move(parsed.value()));
}

std::optional<raft::voter_info> local_voter(const node_config& config, const uuid& metadata_dir_id) {
  if (!config.has_role("controller") || config.controller_listener_names().empty()) return std::nullopt;
  const std::string& name = config.controller_listener_names().front();
  raft::voter_info self;
  self.id = config.node_id();
  self.directory_id = metadata_dir_id;
  self.listener_name = name;
  // A static quorum (kraft.version 0): the endpoint controller.quorum.voters gives this node.
  if (!config.quorum_voters().empty()) {
    for (const auto& v : config.quorum_voters()) {
      if (v.id != self.id) continue;
      self.endpoint = {v.host, v.port};
      return self;
    }
    return std::nullopt;
  }
  // The advertised endpoint of the controller listener, else its bound one when it names a host: a
  // wildcard or empty host is no address for the other voters, and nothing is sent then.
  for (const auto* listeners : {&config.advertised_listeners(), &config.listeners()}) {
    for (const auto& l : *listeners) {
      if (l.name != name) continue;
      if (l.host.empty() || l.host == "0.0.0.0" || l.host == "::" || l.host == "[::]") return std::nullopt;
      self.endpoint = {l.host, l.port};
      return self;
    }
  }
  return std::nullopt;
}

replication::replica_manager_options replica_manager_options_from(const node_config& config) {
  replication::replica_manager_options options;
  options.local_replica_id = config.node_id();
  options.replica_lag_time_max_ms = config.get_long("replica.lag.time.max.ms").value_or(30'000);
  options.clock_ms = wall_clock_ms;
  options.producer_state.producer_id_expiration_ms =
      config.get_int("producer.id.expiration.ms").value_or(storage::default_producer_id_expiration_ms);
  options.producer_id_expiration_check_interval_ms =
      config.get_int("producer.id.expiration.check.interval.ms")
          .value_or(storage::default_producer_id_expiration_check_interval_ms);
  return options;
}

raft::raft_node_options raft_node_options_from(const node_config& config, const std::string& cluster_id) {
  raft::raft_node_options options;
  options.config.node_id = config.node_id();
  for (const auto& v : config.quorum_voters()) {
    options.config.voters.push_back(v.id);
    options.voter_endpoints[v.id] = {v.host, v.port};
  }
  options.config.election_timeout_ms = config.controller_quorum_election_timeout_ms();
  options.config.fetch_timeout_ms = config.controller_quorum_fetch_timeout_ms();
  options.config.election_backoff_max_ms = config.controller_quorum_election_backoff_max_ms();
  // A controller write is up to max_records_per_user_op entries: a follower gets a whole write in one Fetch
  // answer, so the high watermark does not stop inside one in the common case.
  options.config.fetch_max_entries = static_cast<int32_t>(controller::max_records_per_user_op);
  options.config.random_seed = static_cast<uint64_t>(wall_clock_ms()) ^ (uint64_t(config.node_id()) << 32);
  options.cluster_id = cluster_id;
  for (const auto& b : config.quorum_bootstrap_servers())
    options.bootstrap_servers.push_back({b.host, b.port});
  options.metadata_log_dir = metadata_log_dir(config);
  options.segments.segment_bytes = config.get_int("metadata.log.segment.bytes");
  options.segments.segment_ms = config.get_long("metadata.log.segment.ms");
  return options;
}

controller::controller_options controller_options_from(const node_config& config,
                                                       const std::string& cluster_id) {
  controller::controller_options options;
  options.node_id = config.node_id();
  options.cluster_id = cluster_id;
  options.num_partitions = config.get_int("num.partitions").value_or(1);
  options.default_replication_factor =
      static_cast<int16_t>(config.get_int("default.replication.factor").value_or(1));
  options.static_config = static_property_lookup(config);
  options.delete_topic_enable = config.get_bool("delete.topic.enable").value_or(true);
  options.placement_seed = static_cast<uint64_t>(wall_clock_ms());
  options.clock_ms = wall_clock_ms;
  options.broker_session_timeout_ms = config.get_int("broker.session.timeout.ms").value_or(9000);
  options.auto_leader_rebalance = config.get_bool("auto.leader.rebalance.enable").value_or(true);
  options.leader_imbalance_check_interval_ms =
      config.get_long("leader.imbalance.check.interval.seconds").value_or(300) * 1000;
  return options;
}

broker::broker_lifecycle_options broker_lifecycle_options_from(const node_config& config,
                                                               const std::string& cluster_id,
                                                               const std::vector<uuid>& log_dir_ids,
                                                               int64_t previous_broker_epoch) {
  broker::broker_lifecycle_options options;
  auto& reg = options.registration;
  reg.broker_id = config.node_id();
  reg.cluster_id = cluster_id;
  reg.incarnation_id = uuid::random();
  reg.rack = config.broker_rack();
  for (const auto& l : config.advertised_listeners()) {
    // A listener bound to every interface and not advertised explicitly is advertised under the machine's
    // host name, as Kafka does (it uses the canonical host name).
    reg.listeners.push_back(
        {l.name, l.host.empty() ? local_host_name() : l.host, l.port, static_cast<int16_t>(l.protocol)});
  }
  for (const auto& f : controller::implemented_features) {
    reg.features.push_back({std::string(f.name), f.min_level, f.max_level});
  }
  reg.log_dirs = log_dir_ids;
  // KIP-966: the broker epoch the clean-shutdown markers hold (-1 after an unclean shutdown), so the
  // controller can tell a clean restart from an unclean one.
  reg.previous_broker_epoch = previous_broker_epoch;
  options.heartbeat_interval_ms = config.get_int("broker.heartbeat.interval.ms").value_or(2000);
  options.log_dir_failure_timeout_ms = config.get_int("log.dir.failure.timeout.ms").value_or(30000);
  options.clock_ms = wall_clock_ms;
  return options;
}

broker::controller_registration_options controller_registration_options_from(const node_config& config) {
  broker::controller_registration_options options;
  auto& reg = options.registration;
  reg.controller_id = config.node_id();
  reg.incarnation_id = uuid::random();
  reg.zk_migration_ready = false;
  for (const auto& l : config.controller_listeners()) {
    // As the broker's registration: a listener bound to every interface is named by the host name.
    reg.listeners.push_back(
        {l.name, l.host.empty() ? local_host_name() : l.host, l.port, static_cast<int16_t>(l.protocol)});
  }
  for (const auto& f : controller::implemented_features) {
    reg.features.push_back({std::string(f.name), f.min_level, f.max_level});
  }
  return options;
}

replication::follower_fetcher_options follower_fetcher_options_from(const node_config& config) {
  replication::follower_fetcher_options options;
  options.node_id = config.node_id();
  options.listener_name = config.inter_broker_listener_name();
  if (options.listener_name.empty() && !config.advertised_listeners().empty()) {
    options.listener_name = config.advertised_listeners().front().name;
  }
  options.max_wait_ms = config.get_int("replica.fetch.wait.max.ms").value_or(500);
  options.min_bytes = config.get_int("replica.fetch.min.bytes").value_or(1);
  options.max_bytes = config.get_int("replica.fetch.response.max.bytes").value_or(10 * 1024 * 1024);
  options.partition_max_bytes = config.get_int("replica.fetch.max.bytes").value_or(1024 * 1024);
  options.backoff_ms = config.get_int("replica.fetch.backoff.ms").value_or(1000);
  options.request_timeout_ms = config.get_int("replica.socket.timeout.ms").value_or(30'000);
  options.fetchers_per_leader = config.get_int("num.replica.fetchers").value_or(1);
  return options;
}

net::server_limits server_limits_from(const node_config& config) {
  net::server_limits limits{config.socket_request_max_bytes(), config.connections_max_idle_ms(),
                            config.socket_send_buffer_bytes(), config.socket_receive_buffer_bytes(),
                            config.queued_max_requests(),      config.queued_max_request_bytes()};
  limits.sasl_max_receive_bytes = config.get_int("sasl.server.max.receive.size").value_or(524288);
  return limits;
}

}  // namespace mala::app

namespace mala::app {

result<std::vector<net::http_endpoint>> metrics_endpoints_from(const node_config& config) {
  std::vector<net::http_endpoint> endpoints;
  for (const auto& entry : config.get_list("metrics.listeners").value_or(std::vector<std::string>{})) {
    auto invalid = [&entry](std::string_view why) {
      return status::error(error_code::invalid_config,
                           fmt::format("metrics.listeners: '{}' is not http://host:port ({})", entry, why));
    };
    std::string_view rest = entry;
    if (!rest.starts_with("http://")) return invalid("only http:// is served");
    rest.remove_prefix(7);
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return invalid("no port");
    std::string host(rest.substr(0, colon));
    const std::string_view port_text = rest.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    int port = 0;
    if (port_text.empty() || port_text.size() > 5) return invalid("bad port");
    for (char c : port_text) {
      if (c < '0' || c > '9') return invalid("bad port");
      port = port * 10 + (c - '0');
    }
    if (port > 65535) return invalid("bad port");
    endpoints.push_back({host, static_cast<uint16_t>(port)});
  }
  return endpoints;
}

}  // namespace mala::app
