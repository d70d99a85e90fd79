// The mala binary's command line: the configuration file, --override key=value pairs, and kafka-storage
// format's --standalone / --initial-controllers (KIP-853) for a controller whose metadata log is new.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace mala::app {

struct command_line {
  std::optional<std::filesystem::path> config_file;  // nullopt: the embedded default configuration
  std::vector<std::string> overrides;                // "key=value", applied in order
  bool standalone = false;
  std::optional<std::string> initial_controllers;
};

// nullopt for --help and for a command line that is not understood (after printing why to stderr).
std::optional<command_line> parse_command_line(int argc, char** argv);
void print_usage();

}  // namespace mala::app
