#include "mala/broker/cordoned_log_dirs.h"

#include <algorithm>

#include "mala/controller/topic_config.h"

namespace mala::broker {

std::vector<std::string> cordoned_log_dirs(const node_config& config, const metadata::metadata_image& image,
                                           int32_t node_id) {
  std::vector<std::string> entries;
  const auto* dynamic = image.find_configs(metadata::config_resource_type::broker, std::to_string(node_id));
  const auto found =
      dynamic ? dynamic->find(std::string(cordoned_log_dirs_config)) : metadata::config_map::const_iterator{};
  if (dynamic && found != dynamic->end()) {
    entries = controller::parse_config_list(found->second);
  } else if (auto configured = config.get_list(cordoned_log_dirs_config)) {
    entries = *configured;
  }
  const bool all = std::find(entries.begin(), entries.end(), "*") != entries.end();
  std::vector<std::string> out;
  for (const auto& dir : config.log_dirs()) {
    if (all || std::find(entries.begin(), entries.end(), dir) != entries.end()) out.push_back(dir);
  }
  return out;
}

}  // namespace mala::broker
