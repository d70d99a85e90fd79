// The mala binary: parses the command line, loads the configuration and runs one node (node.h) until
// SIGTERM/SIGINT.
#include <sys/resource.h>

#include <csignal>
#include <string>

#include "command_line.h"
#include "mala/common/config.h"
#include "mala/common/logging.h"
#include "node.h"

namespace {

// A broker keeps a descriptor per log segment (and per connection): thousands of partitions need more than
// the usual soft limit of 1024. Raise the soft limit to the hard one, as the JVM does for Kafka
// (-XX:+MaxFDLimit) and Seastar does; the hard limit stays the operator's (Kafka's docs ask for 100,000 or
// more).
void raise_open_files_limit(const std::shared_ptr<spdlog::logger>& log) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  log->info("open files limit raised from {} to {}", before, limit.rlim_cur);
}

}  // namespace

int main(int argc, char** argv) {
  // A write past RLIMIT_FSIZE must fail with EFBIG (the log dir goes offline), not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  auto cl = mala::app::parse_command_line(argc, argv);
  if (!cl) {
    mala::app::print_usage();
    return 2;
  }
  auto log = mala::subsystem_logger("main");
  raise_open_files_limit(log);
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
