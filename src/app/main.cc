// The mala binary: parses the command line, loads the configuration, formats or checks the log dirs, builds
// the node's metadata image and serves the Kafka protocol until SIGTERM/SIGINT. It only wires subsystems
// together.
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
#include "mala/broker/handler_table.h"
#include "mala/common/config.h"
#include "mala/common/logging.h"
#include "mala/metadata/metadata_image.h"
#include "mala/net/kafka_server.h"
#include "mala/net/shard_pool.h"
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

  mala::metadata::metadata_cache metadata;
  metadata.publish(
      std::make_shared<const mala::metadata::metadata_image>(initial_image(config, dirs.cluster_id)));

  mala::broker::handler_table handlers;
  mala::broker::broker_services services{config.node_id(), &metadata, &handlers};
  mala::broker::broker_dispatcher dispatcher(services);

  const size_t shard_count = config.shards() > 0 ? static_cast<size_t>(config.shards())
                                                 : std::max(1u, std::thread::hardware_concurrency());
  mala::net::shard_pool shards(shard_count);
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
  // Flushes and closes every log, writes the checkpoints and the clean-shutdown marker, so the next start
  // skips the recovery scan.
  if (auto st = logs->shutdown(); !st.ok()) {
    log->error("log shutdown: {}", st.message);
    return 1;
  }
  log->info("stopped cleanly");
  return 0;
}
