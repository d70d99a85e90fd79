// The options each subsystem of a node is built with, read from the node's configuration (Kafka's property
// names and defaults). Pure functions of the configuration and the identity the log dirs gave the node; the
// node (node.h) builds its subsystems with them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mala/broker/broker_lifecycle.h"
#include "mala/broker/controller_registration_manager.h"
#include "mala/common/config.h"
#include "mala/common/result.h"
#include "mala/common/uuid.h"
#include "mala/controller/quorum_controller.h"
#include "mala/net/http_server.h"
#include "mala/net/kafka_server.h"
#include "mala/raft/raft_node.h"
#include "mala/replication/alter_partition_manager.h"
#include "mala/replication/follower_fetcher.h"
#include "mala/replication/replica_manager.h"

namespace mala::app {

// How long a controller-bound request may wait for its controller (an answer, or the commit of its writes):
// Kafka's request.timeout.ms default.
inline constexpr int32_t controller_request_timeout_ms = 30'000;

int64_t wall_clock_ms();

// Looks up the value of a broker property as the node's configuration file (or --override) sets it; nullopt
// when it is left at its default. Topic-config defaults with several broker spellings (log.retention.hours /
// minutes / ms, log.roll.hours / ms) resolve to the millisecond property. Collected once: cheap per call.
std::function<std::optional<std::string>(std::string_view)> static_property_lookup(const node_config& config);

// metadata.log.dir (Kafka's KRaftConfigs): where __cluster_metadata-0 lives; the first log dir when unset.
std::filesystem::path metadata_log_dir(const node_config& config);

// KIP-853: the quorum's voters are found through controller.quorum.bootstrap.servers and kept in the
// metadata log (no controller.quorum.voters).
bool dynamic_quorum(const node_config& config);

// kafka-storage format's --standalone / --initial-controllers on a KIP-853 controller: the voters the raft
// node writes into a new metadata log's bootstrap checkpoint (nullopt when neither option was given), or
// invalid_config. `metadata_dir_id` is the directory id of the metadata log dir.
result<std::optional<std::vector<raft::voter_info>>> initial_voters(
    const node_config& config, bool standalone, const std::optional<std::string>& initial_controllers,
    const uuid& metadata_dir_id);

// Without checkpointed_high_watermark, which reads the node's logs.
// KIP-853: this node's voter-set entry as it should be (raft_config::local_voter): its first controller
// listener, advertised or bound, with a concrete host (a static quorum: its controller.quorum.voters entry);
// nullopt for a broker or a wildcard host.
std::optional<raft::voter_info> local_voter(const node_config& config, const uuid& metadata_dir_id);
replication::replica_manager_options replica_manager_options_from(const node_config& config);
// Every node runs a Raft replica of the metadata quorum; a single voter elects itself at once.
raft::raft_node_options raft_node_options_from(const node_config& config, const std::string& cluster_id);
controller::controller_options controller_options_from(const node_config& config,
                                                       const std::string& cluster_id);
// This controller's ControllerRegistration: node id, a fresh incarnation id, the CONTROLLER listeners, the
// features this binary implements.
broker::controller_registration_options controller_registration_options_from(const node_config& config);
// The registration this broker sends at every start, with a new incarnation id; `log_dir_ids` are the
// directory ids of log.dirs (not of a separate metadata.log.dir).
broker::broker_lifecycle_options broker_lifecycle_options_from(const node_config& config,
                                                               const std::string& cluster_id,
                                                               const std::vector<uuid>& log_dir_ids,
                                                               int64_t previous_broker_epoch);
replication::follower_fetcher_options follower_fetcher_options_from(const node_config& config);
net::server_limits server_limits_from(const node_config& config);
// metrics.listeners as endpoints: each http://host:port (IPv6 hosts in brackets). invalid_config naming the
// entry that is not one.
result<std::vector<net::http_endpoint>> metrics_endpoints_from(const node_config& config);

}  // namespace mala::app
