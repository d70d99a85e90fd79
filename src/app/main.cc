// The mala binary: parses the command line, loads the configuration, formats or checks the log dirs, builds
// the node's metadata image and serves the Kafka protocol until SIGTERM/SIGINT. It only wires subsystems
// together.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <asio/signal_set.hpp>

#include "log_maintenance.h"
#include "mala/broker/broker_dispatcher.h"
#include "mala/broker/fetch_sessions.h"
#include "mala/broker/handler_table.h"
#include "mala/broker/metadata_publisher.h"
#include "mala/broker/producer_id_allocator.h"
#include "mala/common/config.h"
#include "mala/common/logging.h"
#include "mala/common/uuid.h"
#include "mala/controller/metadata_log.h"
#include "mala/controller/quorum_controller.h"
#include "mala/metadata/metadata_image.h"
#include "mala/net/kafka_server.h"
#include "mala/net/shard_pool.h"
#include "mala/replication/replica_manager.h"
#include "mala/storage/log_dir_format.h"
#include "mala/storage/log_manager.h"

namespace {

struct command_line {
  std::optional<std::filesystem::path> config_file;
  std::vector<std::string> overrides;
};

void print_usage() {
  std::fprintf(
      stderr,
      "usage: mala [--config FILE] [--override key=value]...\n"
      "  FILE is YAML (Kafka property names as keys) or a .properties file; without --config mala runs\n"
      "  a single combined-mode node on localhost:9092 with its embedded default configuration.\n");
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
    } else if (arg.rfind("--override", 0) == 0) {
      auto v = value("--override");
      if (!v) return std::nullopt;
      cl.overrides.push_back(*v);
    } else {
      std::fprintf(stderr, "mala: unknown argument '%s'\n", arg.c_str());
      return std::nullopt;
    }
  }
  return cl;
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

int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
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

  auto identity =
      mala::storage::format_or_check_log_dirs(config.log_dirs(), config.node_id(), config.cluster_id());
  if (auto* err = std::get_if<std::string>(&identity)) {
    log->critical("cannot use log dirs: {}", *err);
    return 1;
  }
  const auto& dirs = std::get<mala::storage::log_dirs_identity>(identity);
  for (const auto& d : dirs.dirs) {
    log->info("log dir {} (directory id {}){}", d.path, d.directory_id.to_string(),
              d.formatted_now ? ", formatted now" : "");
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

  auto static_config = [&config](std::string_view property) { return static_property(config, property); };
  const mala::metadata::metadata_image self_image = initial_image(config, dirs.cluster_id);
  mala::metadata::metadata_cache metadata;

  // Partition replicas live on the home shard (shard 0), like the controller.
  mala::replication::replica_manager_options replica_options;
  replica_options.local_replica_id = config.node_id();
  replica_options.replica_lag_time_max_ms = config.get_long("replica.lag.time.max.ms").value_or(30'000);
  replica_options.clock_ms = wall_clock_ms;
  mala::replication::replica_manager replicas(*logs, replica_options);
  mala::broker::metadata_publisher publisher(config.node_id(), replicas, metadata, static_config);

  // The controller role: a single-voter metadata log in the first log dir (__cluster_metadata-0), replayed
  // into the image this node serves; the local broker registers with it at every start.
  std::unique_ptr<mala::controller::quorum_controller> controller;
  int64_t broker_epoch = -1;
  if (config.has_role("controller")) {
    auto metadata_log = mala::controller::local_metadata_log::open(config.log_dirs().front());
    if (!metadata_log) {
      log->critical("cannot open the metadata log: {}", metadata_log.error().message);
      return 1;
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
    auto opened = mala::controller::quorum_controller::open(std::move(metadata_log.value()), controller_options);
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
    controller->set_publisher([&publisher, with_controller_id](const mala::metadata::metadata_image_ptr& image) {
      publisher.publish(with_controller_id(image));
    });
    if (config.has_role("broker")) {
      mala::metadata::broker_registration registration = self_image.brokers.at(config.node_id());
      registration.incarnation_id = mala::uuid::random();
      for (const auto& d : dirs.dirs) registration.log_dirs.push_back(d.directory_id);
      auto epoch = controller->register_broker(registration);
      if (!epoch) {
        log->critical("cannot register the broker: {}", epoch.error().message);
        return 1;
      }
      broker_epoch = epoch.value();
    }
    // The image as replayed (and registered): replicas are created and led before any client connects.
    auto image = with_controller_id(controller->image());
    publisher.publish(image);
    log->info("metadata log replayed to offset {}; {} topic(s), {} local replica(s), broker epoch {}",
              image->metadata_offset, image->topics.size(), replicas.size(), broker_epoch);
  } else {
    // A broker without the controller role joins a quorum with issue 6; until then it serves its own image.
    metadata.publish(std::make_shared<const mala::metadata::metadata_image>(self_image));
  }

  mala::broker::fetch_session_cache fetch_sessions;
  mala::broker::producer_id_allocator producer_ids;
  mala::broker::handler_table handlers;
  mala::broker::broker_services services{config.node_id(), &metadata, &handlers,
                                         [&logs](const std::string& topic, int32_t partition) {
                                           return logs->is_offline({topic, partition});
                                         }};

  const size_t shard_count = config.shards() > 0 ? static_cast<size_t>(config.shards())
                                                 : std::max(1u, std::thread::hardware_concurrency());
  mala::net::shard_pool shards(shard_count);
  services.config = &config;
  services.shards = &shards;
  services.home_shard = 0;
  services.replicas = &replicas;
  services.logs = logs.get();
  services.controller = controller.get();
  services.fetch_sessions = &fetch_sessions;
  services.producer_ids = &producer_ids;
  services.clock_ms = wall_clock_ms;
  mala::broker::broker_dispatcher dispatcher(services);
  mala::net::server_limits limits{config.socket_request_max_bytes(), config.connections_max_idle_ms()};
  mala::net::kafka_server server(shards, dispatcher, limits);

  // Every listener speaks the Kafka protocol; the controller listener serves the same handler table until the
  // controller quorum has its own RPCs.
  std::vector<mala::net::listen_endpoint> endpoints;
  for (const auto& l : config.listeners()) endpoints.push_back({l.name, l.host, l.port});
  if (auto err = server.listen(endpoints); !err.empty()) {
    log->critical("{}", err);
    return 1;
  }

  mala::app::log_maintenance maintenance(shards.context(0), *logs, config);
  maintenance.start();

  asio::signal_set signals(shards.context(0), SIGTERM, SIGINT);
  signals.async_wait([&](const std::error_code& ec, int signal) {
    if (ec) return;
    log->info("received {}, shutting down", signal == SIGTERM ? "SIGTERM" : "SIGINT");
    server.stop();
    maintenance.stop();
    shards.stop();
  });
  std::signal(SIGPIPE, SIG_IGN);
  shards.start();
  log->info("node {} ready with {} shard(s)", config.node_id(), shard_count);
  shards.join();
  // Replicas stop before their logs close (parked requests are gone with the shards).
  for (const auto& tp : replicas.partitions()) (void)replicas.remove_partition(tp, /*delete_log=*/false);
  controller.reset();
  // Flushes and closes every log, writes the checkpoints and the clean-shutdown marker, so the next start
  // skips the recovery scan.
  if (auto st = logs->shutdown(broker_epoch); !st.ok()) {
    log->error("log shutdown: {}", st.message);
    return 1;
  }
  log->info("stopped cleanly");
  return 0;
}
