// The mala binary: parses the command line, loads the configuration, formats or checks the log dirs, builds
// the node's metadata image and serves the Kafka protocol until SIGTERM/SIGINT. It only wires subsystems
// together.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include "log_maintenance.h"
#include "mala/broker/broker_dispatcher.h"
#include "mala/broker/broker_lifecycle.h"
#include "mala/broker/controller_channel.h"
#include "mala/broker/fetch_sessions.h"
#include "mala/broker/group_coordinator_driver.h"
#include "mala/broker/handler_table.h"
#include "mala/broker/metadata_publisher.h"
#include "mala/broker/producer_id_allocator.h"
#include "mala/common/config.h"
#include "mala/common/logging.h"
#include "mala/common/uuid.h"
#include "mala/controller/features.h"
#include "mala/controller/metadata_loader.h"
#include "mala/controller/metadata_log.h"
#include "mala/controller/quorum_controller.h"
#include "mala/controller/raft_metadata_log.h"
#include "mala/metadata/metadata_image.h"
#include "mala/net/kafka_server.h"
#include "mala/net/peer_client.h"
#include "mala/net/shard_pool.h"
#include "mala/raft/raft_node.h"
#include "mala/raft/voter_set.h"
#include "mala/replication/alter_partition_manager.h"
#include "mala/replication/follower_fetcher.h"
#include "mala/replication/replica_manager.h"
#include "mala/storage/log_dir_format.h"
#include "mala/storage/log_manager.h"

namespace {

struct command_line {
  std::optional<std::filesystem::path> config_file;
  std::vector<std::string> overrides;
  // kafka-storage format's --standalone / --initial-controllers (KIP-853), used when the metadata log is new.
  bool standalone = false;
  std::optional<std::string> initial_controllers;
};

void print_usage() {
  std::fprintf(
      stderr,
      "usage: mala [--config FILE] [--override key=value]... [--standalone | --initial-controllers LIST]\n"
      "  FILE is YAML (Kafka property names as keys) or a .properties file; without --config mala runs\n"
      "  a single combined-mode node on localhost:9092 with its embedded default configuration.\n"
      "  With controller.quorum.bootstrap.servers (and no controller.quorum.voters), a controller whose\n"
      "  metadata log is new starts it with the initial voters, as kafka-storage format does:\n"
      "  --standalone (this node alone) or --initial-controllers id@host:port[:directory-id],...\n");
}

std::optional<command_line> parse_command_line(int argc, char** argv) {
  command_line cl;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string_view flag) -> std::optional<std::string> {
      if (arg.rfind(std::string(flag) + "=", 0) == 0) return arg.substr(flag.size() + 1);
      if (arg == flag && i + 1 < argc) return std::string(argv[++i]);
      return std::nullopt;
    };
    if (arg == "--help" || arg == "-h") return std::nullopt;
    if (arg.rfind("--config", 0) == 0) {
      auto v = value("--config");
      if (!v) return std::nullopt;
      cl.config_file = *v;
    } else if (arg == "--standalone" || arg == "-s") {
      cl.standalone = true;
    } else if (arg.rfind("--initial-controllers", 0) == 0 || arg == "-I") {
      auto v = arg == "-I" && i + 1 < argc ? std::optional<std::string>(argv[++i])
                                           : value("--initial-controllers");
      if (!v) return std::nullopt;
      cl.initial_controllers = *v;
    } else if (arg.rfind("--override", 0) == 0) {
      auto v = value("--override");
      if (!v) return std::nullopt;
      cl.overrides.push_back(*v);
    } else {
      std::fprintf(stderr, "mala: unknown argument '%s'\n", arg.c_str());
      return std::nullopt;
    }
  }
  if (cl.standalone && cl.initial_controllers) {
    std::fprintf(stderr, "mala: --standalone and --initial-controllers exclude each other\n");
    return std::nullopt;
  }
  return cl;
}

// kafka-storage format's --standalone / --initial-controllers on a KIP-853 controller: the voters the raft
// node writes into a new metadata log's bootstrap checkpoint (nullopt when neither option was given, or for a
// node that is no such controller), or what is wrong with the list.
std::variant<std::optional<std::vector<mala::raft::voter_info>>, std::string> initial_voters(
    const command_line& cl, const mala::node_config& config, const mala::uuid& metadata_dir_id) {
  if (!config.has_role("controller") || !config.quorum_voters().empty()) return std::nullopt;
  const std::string listener_name = config.controller_listener_names().front();
  if (cl.standalone) {
    // This node, reached on its first controller listener, with its metadata log dir's directory id.
    mala::raft::voter_info self;
    self.id = config.node_id();
    self.directory_id = metadata_dir_id;
    self.listener_name = listener_name;
    for (const auto& l : config.listeners()) {
      if (l.name == listener_name) self.endpoint = {l.host.empty() ? "localhost" : l.host, l.port};
    }
    return std::vector<mala::raft::voter_info>{self};
  }
  if (!cl.initial_controllers) return std::nullopt;
  auto parsed = mala::raft::parse_initial_controllers(*cl.initial_controllers, listener_name);
  if (auto* err = std::get_if<mala::parse_error>(&parsed))
    return "invalid --initial-controllers: " + err->message;
  return std::get<std::vector<mala::raft::voter_info>>(std::move(parsed));
}

std::string local_host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// The image a single node starts with: itself as the only broker (and the controller clients are told about).
// The controller quorum replaces this with the replicated metadata log.
mala::metadata::metadata_image initial_image(const mala::node_config& config, const std::string& cluster_id) {
  mala::metadata::metadata_image image;
  image.cluster_id = cluster_id;
  if (config.has_role("broker")) {
    mala::metadata::broker_registration self;
    self.id = config.node_id();
    self.rack = config.broker_rack();
    for (const auto& l : config.advertised_listeners()) {
      // A listener bound to every interface and not advertised explicitly is advertised under the machine's
      // host name, as Kafka does (it uses the canonical host name).
      std::string host = l.host.empty() ? local_host_name() : l.host;
      self.endpoints.push_back({l.name, host, l.port, std::string(mala::to_string(l.protocol))});
    }
    image.brokers[self.id] = self;
    // In KRaft mode Kafka tells clients a live broker as the controller (it forwards controller-bound
    // requests); the admin client sends CreateTopics and friends to it.
    image.controller_id = self.id;
  }
  return image;
}

// How long a controller-bound request may wait for its controller (an answer, or the commit of its writes):
// Kafka's request.timeout.ms default.
constexpr int32_t controller_request_timeout_ms = 30'000;
// How long SIGTERM waits for the controller to move this broker's leaderships (WantShutDown) before the node
// stops anyway. Kafka's broker waits up to 5 minutes; 5 s keeps a stop prompt when the controller is gone.
constexpr int32_t controlled_shutdown_timeout_ms = 5'000;

int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The value of a broker property as the node's configuration file (or --override) sets it; nullopt when it is
// left at its default. Topic-config defaults with several broker spellings (log.retention.hours / minutes /
// ms, log.roll.hours / ms) resolve to the millisecond property.
std::optional<std::string> static_property(const mala::node_config& config, std::string_view property) {
  const auto values = config.all_values();
  auto is_set = [&](std::string_view name) {
    auto it = values.find(name);
    return it != values.end() && it->second.source != mala::config_source::default_value;
  };
  if (property == "log.retention.ms") {
    if (is_set("log.retention.ms") || is_set("log.retention.minutes") || is_set("log.retention.hours"))
      return std::to_string(config.log_retention_ms());
    return std::nullopt;
  }
  if (property == "log.roll.ms") {
    if (is_set("log.roll.ms") || is_set("log.roll.hours")) return std::to_string(config.log_roll_ms());
    return std::nullopt;
  }
  if (!is_set(property)) return std::nullopt;
  return values.find(property)->second.value;
}

}  // namespace

int main(int argc, char** argv) {
  // A write past RLIMIT_FSIZE must fail with EFBIG (the log dir goes offline), not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  auto cl = parse_command_line(argc, argv);
  if (!cl) {
    print_usage();
    return 2;
  }
  auto log = mala::subsystem_logger("main");
  const std::filesystem::path* file = cl->config_file ? &*cl->config_file : nullptr;
  auto loaded = mala::node_config::load(file, cl->overrides);
  if (auto* err = std::get_if<mala::config_error>(&loaded)) {
    if (err->key.empty()) {
      log->critical("invalid configuration: {}", err->message);
    } else {
      log->critical("invalid configuration: {}: {}", err->key, err->message);
    }
    return 1;
  }
  const auto& config = std::get<mala::node_config>(loaded);
  mala::set_log_level(config.log_level());
  for (const auto& w : config.warnings()) log->warn("{}", w);
  log->info("starting node {} (roles: {}) from {}", config.node_id(), fmt::join(config.process_roles(), ","),
            file ? file->string() : std::string("the embedded default configuration"));

  // metadata.log.dir (Kafka's KRaftConfigs): where __cluster_metadata-0 lives; the first log dir when unset.
  // A separate dir is formatted and checked like the log dirs, as `kafka-storage format` does, but it holds
  // no partitions and is not registered as a log dir.
  const auto configured_metadata_dir = config.get_string("metadata.log.dir");
  const std::filesystem::path metadata_log_dir = configured_metadata_dir && !configured_metadata_dir->empty()
                                                     ? *configured_metadata_dir
                                                     : config.log_dirs().front();
  std::vector<std::string> formatted_dirs = config.log_dirs();
  const bool separate_metadata_dir =
      std::none_of(formatted_dirs.begin(), formatted_dirs.end(), [&](const std::string& d) {
        return std::filesystem::path(d).lexically_normal() == metadata_log_dir.lexically_normal();
      });
  if (separate_metadata_dir) formatted_dirs.push_back(metadata_log_dir.string());
  auto identity =
      mala::storage::format_or_check_log_dirs(formatted_dirs, config.node_id(), config.cluster_id());
  if (auto* err = std::get_if<std::string>(&identity)) {
    log->critical("cannot use log dirs: {}", *err);
    return 1;
  }
  const auto& dirs = std::get<mala::storage::log_dirs_identity>(identity);
  for (size_t i = 0; i < dirs.dirs.size(); ++i) {
    const auto& d = dirs.dirs[i];
    log->info("{} {} (directory id {}){}", i < config.log_dirs().size() ? "log dir" : "metadata log dir",
              d.path, d.directory_id.to_string(), d.formatted_now ? ", formatted now" : "");
  }
  log->info("cluster id {}", dirs.cluster_id);

  mala::storage::log_manager_options log_options;
  for (const auto& d : config.log_dirs()) log_options.dirs.emplace_back(d);
  log_options.defaults = mala::app::log_defaults_from(config);
  log_options.recovery_threads_per_dir = config.get_int("num.recovery.threads.per.data.dir").value_or(1);
  auto opened_logs = mala::storage::log_manager::open(std::move(log_options));
  if (!opened_logs.ok()) {
    log->critical("cannot open the logs: {}", opened_logs.error().message);
    return 1;
  }
  std::unique_ptr<mala::storage::log_manager> logs = std::move(opened_logs.value());

  // The shards exist (their threads start later) before anything that lives on shard 0's io_context.
  const size_t shard_count = config.shards() > 0 ? static_cast<size_t>(config.shards())
                                                 : mala::net::shard_pool::default_shard_count();
  mala::net::shard_pool shards(shard_count);

  auto static_config = [&config](std::string_view property) { return static_property(config, property); };
  const mala::metadata::metadata_image self_image = initial_image(config, dirs.cluster_id);
  mala::metadata::metadata_cache metadata;

  // Partition replicas live on the home shard (shard 0), like the controller.
  mala::replication::replica_manager_options replica_options;
  replica_options.local_replica_id = config.node_id();
  replica_options.replica_lag_time_max_ms = config.get_long("replica.lag.time.max.ms").value_or(30'000);
  replica_options.clock_ms = wall_clock_ms;
  // A restarted replica resumes from the high watermark it had checkpointed (replication-offset-checkpoint).
  replica_options.checkpointed_high_watermark = [&logs](const mala::storage::topic_partition& tp) {
    return logs->checkpointed_high_watermark(tp);
  };
  replica_options.producer_state.producer_id_expiration_ms =
      config.get_int("producer.id.expiration.ms").value_or(mala::storage::default_producer_id_expiration_ms);
  replica_options.producer_id_expiration_check_interval_ms =
      config.get_int("producer.id.expiration.check.interval.ms")
          .value_or(mala::storage::default_producer_id_expiration_check_interval_ms);
  mala::replication::replica_manager replicas(*logs, replica_options);
  // A log dir that fails stops its replicas (Kafka's ReplicaManager.handleLogDirFailure).
  logs->set_offline_listener([&replicas](const std::filesystem::path&,
                                         const std::vector<mala::storage::topic_partition>& partitions) {
    replicas.mark_offline(partitions);
  });
  mala::broker::metadata_publisher publisher(config.node_id(), replicas, metadata, static_config);

  // The controller role: a single-voter metadata log (__cluster_metadata-0 in metadata.log.dir), replayed
  // into the image this node serves; the local broker registers with it at every start.
  std::unique_ptr<mala::controller::quorum_controller> controller;
  int64_t broker_epoch = -1;
  // The group coordinator runs on the home shard; created once the shards exist, it follows every image the
  // controller publishes from then on (a newly created __consumer_offsets partition is loaded at once).
  mala::broker::group_coordinator_driver* groups = nullptr;
  // A quorum of more than one voter runs Raft (raft_node on shard 0): the controller starts as a standby,
  // the metadata_loader publishes what the quorum commits and activates the controller on the leader, and
  // the broker registers and heartbeats through the controller channel. A single voter keeps the local log.
  std::vector<int32_t> voter_ids;
  for (const auto& v : config.quorum_voters()) voter_ids.push_back(v.id);
  // KIP-853: without static voters the quorum is found through controller.quorum.bootstrap.servers and its
  // voters are in the metadata log, so it always runs Raft (even a --standalone single voter, which
  // observers may fetch from).
  const bool dynamic_quorum = voter_ids.empty() && !config.quorum_bootstrap_servers().empty();
  const bool raft_quorum = voter_ids.size() > 1 || dynamic_quorum;
  if ((cl->standalone || cl->initial_controllers) && !(dynamic_quorum && config.has_role("controller"))) {
    log->critical(
        "--standalone / --initial-controllers need the controller role, controller.quorum.bootstrap.servers "
        "and no controller.quorum.voters");
    return 1;
  }
  const auto metadata_dir_id = (separate_metadata_dir ? dirs.dirs.back() : dirs.dirs.front()).directory_id;
  auto initial = initial_voters(*cl, config, metadata_dir_id);
  if (auto* err = std::get_if<std::string>(&initial)) {
    log->critical("{}", *err);
    return 1;
  }
  std::unique_ptr<mala::net::peer_client> peers;
  std::unique_ptr<mala::raft::raft_node> raft;
  std::unique_ptr<mala::controller::metadata_loader> loader;
  std::unique_ptr<mala::broker::controller_channel> controller_link;
  std::unique_ptr<mala::broker::broker_lifecycle> lifecycle;
  if (raft_quorum) {
    peers = std::make_unique<mala::net::peer_client>(shards.context(0),
                                                     "mala-" + std::to_string(config.node_id()));
    mala::raft::raft_node_options raft_options;
    raft_options.config.node_id = config.node_id();
    raft_options.config.voters = voter_ids;
    raft_options.config.election_timeout_ms = config.controller_quorum_election_timeout_ms();
    raft_options.config.fetch_timeout_ms = config.controller_quorum_fetch_timeout_ms();
    raft_options.config.election_backoff_max_ms = config.controller_quorum_election_backoff_max_ms();
    // A controller write is up to max_records_per_user_op entries: a follower gets a whole write in one Fetch
    // answer, so the high watermark does not stop inside one in the common case.
    raft_options.config.fetch_max_entries = static_cast<int32_t>(mala::controller::max_records_per_user_op);
    raft_options.config.random_seed =
        static_cast<uint64_t>(wall_clock_ms()) ^ (uint64_t(config.node_id()) << 32);
    raft_options.cluster_id = dirs.cluster_id;
    for (const auto& v : config.quorum_voters()) raft_options.voter_endpoints[v.id] = {v.host, v.port};
    for (const auto& b : config.quorum_bootstrap_servers())
      raft_options.bootstrap_servers.push_back({b.host, b.port});
    raft_options.initial_voters = std::get<std::optional<std::vector<mala::raft::voter_info>>>(initial);
    raft_options.metadata_log_dir = metadata_log_dir;
    raft_options.segments.segment_bytes = config.get_int("metadata.log.segment.bytes");
    raft_options.segments.segment_ms = config.get_long("metadata.log.segment.ms");
    auto opened_raft = mala::raft::raft_node::open(shards.context(0), std::move(raft_options));
    if (!opened_raft) {
      log->critical("cannot open the metadata quorum: {}", opened_raft.error().message);
      return 1;
    }
    raft = std::move(opened_raft.value());
    if (dynamic_quorum && config.has_role("controller") && raft->voters().empty()) {
      log->warn(
          "the metadata log holds no voter set (start a new controller with --standalone or "
          "--initial-controllers): this controller runs as an observer; Mala does not serve AddRaftVoter");
    } else if (dynamic_quorum && !raft->voters().empty()) {
      log->info("KIP-853 quorum: voters {} from the metadata log, bootstrap servers {}",
                fmt::join(raft->voters(), ","), config.quorum_bootstrap_servers().size());
    } else if (dynamic_quorum) {
      log->info("KIP-853 quorum: an observer finding the leader through {} bootstrap server(s)",
                config.quorum_bootstrap_servers().size());
    }
  }
  if (config.has_role("controller")) {
    std::unique_ptr<mala::controller::metadata_log> metadata_log;
    if (raft) {
      metadata_log = std::make_unique<mala::controller::raft_metadata_log>(*raft);
    } else {
      auto local_log = mala::controller::local_metadata_log::open(metadata_log_dir);
      if (!local_log) {
        log->critical("cannot open the metadata log: {}", local_log.error().message);
        return 1;
      }
      metadata_log = std::move(local_log.value());
    }
    mala::controller::controller_options controller_options;
    controller_options.node_id = config.node_id();
    controller_options.cluster_id = dirs.cluster_id;
    controller_options.num_partitions = config.get_int("num.partitions").value_or(1);
    controller_options.default_replication_factor =
        static_cast<int16_t>(config.get_int("default.replication.factor").value_or(1));
    controller_options.static_config = static_config;
    controller_options.delete_topic_enable = config.get_bool("delete.topic.enable").value_or(true);
    controller_options.placement_seed = static_cast<uint64_t>(wall_clock_ms());
    controller_options.clock_ms = wall_clock_ms;
    controller_options.wait_for_activation = raft_quorum;
    controller_options.unfence_on_registration = !raft_quorum;
    controller_options.broker_session_timeout_ms = config.get_int("broker.session.timeout.ms").value_or(9000);
    controller_options.auto_leader_rebalance = config.get_bool("auto.leader.rebalance.enable").value_or(true);
    controller_options.leader_imbalance_check_interval_ms =
        config.get_long("leader.imbalance.check.interval.seconds").value_or(300) * 1000;
    auto opened = mala::controller::quorum_controller::open(std::move(metadata_log), controller_options);
    if (!opened) {
      log->critical("cannot start the controller: {}", opened.error().message);
      return 1;
    }
    controller = std::move(opened.value());
    // Clients are told a live broker as the controller (KRaft brokers forward controller-bound requests);
    // in combined mode that is this node.
    auto with_controller_id = [&config](mala::metadata::metadata_image_ptr image) {
      if (image->controller_id >= 0 || !config.has_role("broker")) return image;
      auto copy = std::make_shared<mala::metadata::metadata_image>(*image);
      copy->controller_id = config.node_id();
      return mala::metadata::metadata_image_ptr(std::move(copy));
    };
    // On a Raft quorum the metadata_loader publishes what the quorum commits; the controller's own image may
    // hold writes not committed yet.
    if (!raft_quorum) {
      controller->set_publisher(
          [&publisher, &groups, with_controller_id](const mala::metadata::metadata_image_ptr& image) {
            publisher.publish(with_controller_id(image));
            if (groups) groups->on_metadata(*image);
          });
    }
    if (config.has_role("broker") && !raft_quorum) {
      mala::metadata::broker_registration registration = self_image.brokers.at(config.node_id());
      registration.incarnation_id = mala::uuid::random();
      // Only log.dirs are registered (a separate metadata.log.dir is last in dirs.dirs).
      for (size_t i = 0; i < config.log_dirs().size(); ++i)
        registration.log_dirs.push_back(dirs.dirs[i].directory_id);
      auto epoch = controller->register_broker(registration, logs->loaded().previous_broker_epoch);
      if (!epoch) {
        log->critical("cannot register the broker: {}", epoch.error().message);
        return 1;
      }
      broker_epoch = epoch.value();
    }
    if (!raft_quorum) {
      // The image as replayed (and registered): replicas are created and led before any client connects.
      auto image = with_controller_id(controller->image());
      publisher.publish(image);
      log->info("metadata log replayed to offset {}; {} topic(s), {} local replica(s), broker epoch {}",
                image->metadata_offset, image->topics.size(), replicas.size(), broker_epoch);
    }
  }
  if (raft_quorum) {
    // Until the quorum has committed something this node serves an image without brokers: clients retry.
    auto base = std::make_shared<mala::metadata::metadata_image>();
    base->cluster_id = dirs.cluster_id;
    metadata.publish(base);
    controller_link = std::make_unique<mala::broker::controller_channel>(
        &shards, 0, controller.get(), raft.get(), peers.get(), controller_request_timeout_ms);
    mala::controller::metadata_loader_hooks hooks;
    hooks.publish = [&publisher, &groups](const mala::metadata::metadata_image_ptr& image) {
      publisher.publish(image);
      if (groups) groups->on_metadata(*image);
    };
    hooks.on_activation = [&controller, &controller_link](bool active) {
      if (active) {
        controller->reset_heartbeat_deadlines(wall_clock_ms());
      } else {
        controller_link->on_deactivated();
      }
    };
    hooks.on_commit = [&controller_link](int64_t high_watermark) {
      controller_link->on_commit(high_watermark);
    };
    hooks.clock_ms = wall_clock_ms;
    hooks.max_bytes_between_snapshots =
        config.get_long("metadata.log.max.record.bytes.between.snapshots").value_or(20 * 1024 * 1024);
    loader =
        std::make_unique<mala::controller::metadata_loader>(*raft, controller.get(), base, std::move(hooks));
  } else if (!config.has_role("controller")) {
    // A broker without the controller role joins a quorum with issue 6; until then it serves its own image.
    metadata.publish(std::make_shared<const mala::metadata::metadata_image>(self_image));
  }

  mala::broker::fetch_session_cache_config fetch_session_options;
  fetch_session_options.max_slots = config.get_int("max.incremental.fetch.session.cache.slots")
                                        .value_or(mala::broker::default_fetch_session_cache_slots);
  mala::broker::fetch_session_cache fetch_sessions(fetch_session_options);
  mala::broker::producer_id_allocator producer_ids;
  mala::broker::handler_table handlers;
  mala::broker::broker_services services{config.node_id(), &metadata, &handlers,
                                         [&logs](const std::string& topic, int32_t partition) {
                                           return logs->is_offline({topic, partition});
                                         }};

  services.config = &config;
  services.shards = &shards;
  services.home_shard = 0;
  services.replicas = &replicas;
  services.controller = controller.get();
  services.controller_link = controller_link.get();
  services.raft = raft.get();
  services.fetch_sessions = &fetch_sessions;
  services.producer_ids = &producer_ids;
  services.clock_ms = wall_clock_ms;
  // Owned after the shards: its timers belong to shard 0's io_context and must go first.
  std::unique_ptr<mala::broker::group_coordinator_driver> group_driver;
  if (config.has_role("broker")) {
    auto group_options = mala::broker::group_coordinator_options_from(config);
    group_options.clock_ms = wall_clock_ms;
    group_driver = std::make_unique<mala::broker::group_coordinator_driver>(shards.context(0), replicas,
                                                                            std::move(group_options));
    groups = group_driver.get();
    services.groups = &groups->coordinator();
    // The __consumer_offsets partitions this node already leads are replayed now (their groups answer
    // COORDINATOR_LOAD_IN_PROGRESS until they are).
    groups->on_metadata(*metadata.current());
    groups->start();
  }
  // Periodic work of the active controller on a Raft quorum: fence brokers whose heartbeats stopped.
  asio::steady_timer fencing_timer(shards.context(0));
  std::function<void()> schedule_fencing = [&] {
    fencing_timer.expires_after(std::chrono::milliseconds(250));
    fencing_timer.async_wait([&](const std::error_code& ec) {
      if (ec) return;
      if (controller && controller->active()) {
        controller->fence_stale_brokers(wall_clock_ms());
        controller->elect_unclean_leaders();
        controller->maybe_rebalance_leaders(wall_clock_ms());
      }
      schedule_fencing();
    });
  };
  if (raft_quorum && config.has_role("broker")) {
    mala::broker::broker_lifecycle_options lifecycle_options;
    auto& reg = lifecycle_options.registration;
    const auto& self = self_image.brokers.at(config.node_id());
    reg.broker_id = config.node_id();
    reg.cluster_id = dirs.cluster_id;
    reg.incarnation_id = mala::uuid::random();
    reg.rack = self.rack;
    for (const auto& e : self.endpoints) {
      auto protocol = mala::parse_security_protocol(e.security_protocol);
      reg.listeners.push_back({e.listener_name, e.host, static_cast<uint16_t>(e.port),
                               static_cast<int16_t>(protocol.value_or(mala::security_protocol::plaintext))});
    }
    for (const auto& f : mala::controller::implemented_features) {
      reg.features.push_back({std::string(f.name), f.min_level, f.max_level});
    }
    for (size_t i = 0; i < config.log_dirs().size(); ++i) reg.log_dirs.push_back(dirs.dirs[i].directory_id);
    // KIP-966: the broker epoch the clean-shutdown markers hold (-1 after an unclean shutdown), so the
    // controller can tell a clean restart from an unclean one.
    reg.previous_broker_epoch = logs->loaded().previous_broker_epoch;
    lifecycle_options.heartbeat_interval_ms = config.get_int("broker.heartbeat.interval.ms").value_or(2000);
    lifecycle_options.applied_metadata_offset = [&loader] { return loader->applied_offset(); };
    lifecycle_options.clock_ms = wall_clock_ms;
    lifecycle = std::make_unique<mala::broker::broker_lifecycle>(shards.context(0), *controller_link,
                                                                 std::move(lifecycle_options));
  }
  // Follower replicas fetch from their leaders (replication factor > 1 needs more than one node, so only on
  // a Raft quorum). Its loops run on shard 0 with the replicas.
  std::unique_ptr<mala::replication::follower_fetcher> fetcher;
  if (raft_quorum && config.has_role("broker")) {
    mala::replication::follower_fetcher_options fetcher_options;
    fetcher_options.node_id = config.node_id();
    fetcher_options.listener_name = config.inter_broker_listener_name();
    if (fetcher_options.listener_name.empty() && !config.advertised_listeners().empty()) {
      fetcher_options.listener_name = config.advertised_listeners().front().name;
    }
    fetcher_options.max_wait_ms = config.get_int("replica.fetch.wait.max.ms").value_or(500);
    fetcher_options.min_bytes = config.get_int("replica.fetch.min.bytes").value_or(1);
    fetcher_options.max_bytes = config.get_int("replica.fetch.response.max.bytes").value_or(10 * 1024 * 1024);
    fetcher_options.partition_max_bytes = config.get_int("replica.fetch.max.bytes").value_or(1024 * 1024);
    fetcher_options.backoff_ms = config.get_int("replica.fetch.backoff.ms").value_or(1000);
    fetcher_options.request_timeout_ms = config.get_int("replica.socket.timeout.ms").value_or(30'000);
    fetcher_options.fetchers_per_leader = config.get_int("num.replica.fetchers").value_or(1);
    fetcher = std::make_unique<mala::replication::follower_fetcher>(shards.context(0), replicas, metadata,
                                                                    std::move(fetcher_options));
  }
  // Leaders change their ISRs through AlterPartition (only on a Raft quorum: a single node's replicas are
  // their whole ISR).
  std::unique_ptr<mala::replication::alter_partition_manager> isr_changes;
  if (raft_quorum && config.has_role("broker") && lifecycle) {
    mala::replication::alter_partition_manager_options isr_options;
    isr_options.node_id = config.node_id();
    isr_options.broker_epoch = [&lifecycle] { return lifecycle->broker_epoch(); };
    isr_options.clock_ms = wall_clock_ms;
    isr_changes = std::make_unique<mala::replication::alter_partition_manager>(
        shards.context(0), replicas, metadata, mala::broker::alter_partition_sender(*controller_link),
        std::move(isr_options));
  }
  mala::broker::broker_dispatcher dispatcher(services);
  mala::net::server_limits limits{config.socket_request_max_bytes(), config.connections_max_idle_ms(),
                                  config.socket_send_buffer_bytes(), config.socket_receive_buffer_bytes()};
  mala::net::kafka_server server(shards, dispatcher, limits);

  // Every listener speaks the Kafka protocol; the controller listener serves the same handler table until the
  // controller quorum has its own RPCs. On a Raft quorum a broker's other listeners are bound now but open
  // only once the controller says it has caught up with the metadata log (Kafka's BrokerServer waits for
  // that too): before, it would answer clients from an empty or stale image (UNKNOWN_TOPIC_OR_PARTITION, a
  // leader that moved), and a producer's first batch answered so could be overtaken by its second.
  const auto& controller_names = config.controller_listener_names();
  const bool open_after_catch_up = raft_quorum && lifecycle != nullptr;
  std::vector<mala::net::listen_endpoint> now_endpoints, later_endpoints;
  for (const auto& l : config.listeners()) {
    const bool controller_listener =
        std::find(controller_names.begin(), controller_names.end(), l.name) != controller_names.end();
    (open_after_catch_up && !controller_listener ? later_endpoints : now_endpoints)
        .push_back({l.name, l.host, l.port});
  }
  if (auto err = server.listen(now_endpoints); !err.empty()) {
    log->critical("{}", err);
    return 1;
  }
  if (auto err = server.bind(later_endpoints); !err.empty()) {
    log->critical("{}", err);
    return 1;
  }
  if (!later_endpoints.empty()) {
    lifecycle->set_on_caught_up([&server, &log] {
      // As Kafka's BrokerServer, a broker whose listener cannot open stops (nothing was served yet).
      if (auto err = server.start(); !err.empty()) {
        log->critical("{}", err);
        std::_Exit(1);
      }
    });
  }

  // Replicas live on shard 0, where the maintenance timers run.
  auto replica_high_watermark =
      [&replicas](const mala::storage::topic_partition& tp) -> std::optional<int64_t> {
    if (const auto* p = replicas.get(tp)) return p->high_watermark();
    return std::nullopt;
  };
  mala::app::log_maintenance maintenance(shards.context(0), *logs, config, replica_high_watermark);
  maintenance.start();

  asio::signal_set signals(shards.context(0), SIGTERM, SIGINT);
  signals.async_wait([&](const std::error_code& ec, int signal) {
    if (ec) return;
    log->info("received {}, shutting down", signal == SIGTERM ? "SIGTERM" : "SIGINT");
    auto stop_serving = [&] {
      server.stop();
      maintenance.stop();
      if (groups) groups->stop();
      fencing_timer.cancel();
      if (lifecycle) lifecycle->stop();
      if (fetcher) fetcher->stop();
      if (isr_changes) isr_changes->stop();
    };
    if (!raft) {
      stop_serving();
      shards.stop();
      return;
    }
    // On a Raft quorum: controlled shutdown (KIP-631 WantShutDown) moves leadership away first; then the Raft
    // leader resigns (EndQuorumEpoch, so the other voters elect a successor at once rather than after their
    // fetch timeout) and is given a moment to send it.
    asio::co_spawn(
        shards.context(0),
        [&, stop_serving]() -> asio::awaitable<void> {
          if (lifecycle) co_await lifecycle->controlled_shutdown(controlled_shutdown_timeout_ms);
          stop_serving();
          const bool leads = raft->state().current_role() == mala::raft::role::leader;
          raft->resign();
          if (leads) {
            asio::steady_timer grace(shards.context(0), std::chrono::milliseconds(200));
            std::error_code ignored;
            co_await grace.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
          }
          raft->stop();
          shards.stop();
        },
        asio::detached);
  });
  if (raft) {
    raft->start();
    loader->update();
    schedule_fencing();
  }
  if (lifecycle) lifecycle->start();
  if (raft && fetcher) fetcher->start();
  if (isr_changes) isr_changes->start();
  std::signal(SIGPIPE, SIG_IGN);
  shards.start();
  log->info("node {} ready with {} shard(s)", config.node_id(), shard_count);
  shards.join();
  fetcher.reset();
  isr_changes.reset();
  groups = nullptr;
  group_driver.reset();
  if (lifecycle) broker_epoch = lifecycle->broker_epoch();
  lifecycle.reset();
  // The high watermarks are checkpointed while the replicas still exist; then the replicas stop before their
  // logs close (parked requests are gone with the shards).
  if (auto st = logs->checkpoint_high_watermarks(replica_high_watermark); !st.ok()) {
    log->error("high watermark checkpoint: {}", st.message);
  }
  for (const auto& tp : replicas.partitions()) (void)replicas.remove_partition(tp, /*delete_log=*/false);
  controller.reset();
  loader.reset();
  controller_link.reset();
  raft.reset();
  peers.reset();
  // Flushes and closes every log, writes the checkpoints and the clean-shutdown marker, so the next start
  // skips the recovery scan.
  if (auto st = logs->shutdown(broker_epoch); !st.ok()) {
    log->error("log shutdown: {}", st.message);
    return 1;
  }
  log->info("stopped cleanly");
  return 0;
}
