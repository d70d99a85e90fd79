#include "command_line.h"

#include <cstdio>
#include <string_view>

namespace mala::app {

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

}  // namespace mala::app
