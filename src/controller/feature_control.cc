#include "mala/controller/feature_control.h"

#include <utility>

namespace mala::controller {

record_list bootstrap_records(const metadata::metadata_image& image) {
  if (image.finalized_features.count(std::string(metadata_version_feature)) != 0) return {};
  protocol::feature_level_record feature;
  feature.name = std::string(metadata_version_feature);
  feature.feature_level = bootstrap_metadata_version;
  return {versioned(std::move(feature), record_v0)};
}

supported_feature_map registered_features(supported_feature_map supported) {
  supported.try_emplace(std::string(metadata_version_feature),
                        metadata::supported_feature{minimum_metadata_version, bootstrap_metadata_version});
  return supported;
}

status check_finalized_features_supported(const metadata::metadata_image& image,
                                          const supported_feature_map& supported) {
  for (const auto& [name, level] : image.finalized_features) {
    metadata::supported_feature range{0, 0};
    if (auto it = supported.find(name); it != supported.end()) range = it->second;
    if (level < range.min_version || level > range.max_version) {
      return status::error(error_code::unsupported_version,
                           "Unable to register because the broker does not support finalized version " +
                               std::to_string(level) + " of " + name +
                               ". The broker wants a version between " + std::to_string(range.min_version) +
                               " and " + std::to_string(range.max_version) + ", inclusive.");
    }
  }
  return status::success();
}

}  // namespace mala::controller
