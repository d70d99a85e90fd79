// The mala binary: parses the command line, loads the configuration and runs one node (node.h) until
// SIGTERM/SIGINT.
#include <csignal>
#include <string>

#include "command_line.h"
#include "mala/common/config.h"
#include "mala/common/logging.h"
#include "node.h"

int main(int argc, char** argv) {
  // A write past RLIMIT_FSIZE must fail with EFBIG (the log dir goes offline), not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  auto cl = mala::app::parse_command_line(argc, argv);
  if (!cl) {
    mala::app::print_usage();
    return 2;
  }
  auto log = mala::subsystem_logger("main");
  const std::filesystem::path* file = cl->config_file ? &*cl->config_file : nullptr;
  auto loaded = mala::node_config::load(file, cl->overrides);
  if (!loaded.ok()) {
    log->critical("invalid configuration: {}", loaded.error().message);
    return 1;
  }
  auto& config = loaded.value();
  mala::set_log_level(config.log_level());
  for (const auto& w : config.warnings()) log->warn("{}", w);
  log->info("starting node {} (roles: {}) from {}", config.node_id(), fmt::join(config.process_roles(), ","),
            file ? file->string() : std::string("the embedded default configuration"));

  auto node = mala::app::node::open(std::move(config), {cl->standalone, cl->initial_controllers});
  if (!node.ok()) {
    log->critical("{}", node.error().message);
    return 1;
  }
  return (*node)->run().ok() ? 0 : 1;
}
