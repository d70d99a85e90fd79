#include "mala/controller/feature_control.h"

#include <utility>

namespace mala::controller {

namespace {

protocol::feature_level_record feature_level(std::string_view name, int16_t level) {
  protocol::feature_level_record feature;
  feature.name = std::string(name);
  feature.feature_level = level;
  return feature;
}

status invalid_update_version(const feature_update& update, const std::string& reason) {
  return status::error(error_code::invalid_update_version, "Invalid update version " +
                                                               std::to_string(update.level) +
                                                               " for feature " + update.name + ". " + reason);
}

// QuorumFeatures.reasonNotSupported: "<who> does not support this feature." for a range [0, 0], else
// "<who> only supports versions <range>" (VersionRange's "a" or "a-b").
std::string not_supported_reason(const std::string& who, metadata::supported_feature range) {
  if (range.max_version == 0) return who + " does not support this feature.";
  std::string versions = std::to_string(range.min_version);
  if (range.max_version != range.min_version) versions += "-" + std::to_string(range.max_version);
  return who + " only supports versions " + versions;
}

bool within(metadata::supported_feature range, int16_t level) {
  return level >= range.min_version && level <= range.max_version;
}

int16_t level_in_force(const metadata::metadata_image& image, const implemented_feature& feature,
                       const feature_update_context& context) {
  if (feature.name == kraft_version_feature) return context.kraft_version;
  return finalized_feature_level(image, feature.name);
}

}  // namespace

const implemented_feature* find_implemented_feature(std::string_view name) {
  for (const auto& f : implemented_features) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

record_list bootstrap_records(const metadata::metadata_image& image) {
  if (image.finalized_features.count(std::string(metadata_version_feature)) != 0) return {};
  record_list records{
      versioned(feature_level(metadata_version_feature, bootstrap_metadata_version), record_v0)};
  if (bootstrap_transaction_version > 0) {
    records.push_back(
        versioned(feature_level(transaction_version_feature, bootstrap_transaction_version), record_v0));
  }
  return records;
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

result<record_list> update_features(const metadata::metadata_image& image, int32_t local_node_id,
                                    const std::vector<feature_update>& updates,
                                    const feature_update_context& context) {
  record_list records;
  for (const auto& update : updates) {
    if (update.type != feature_upgrade_type::upgrade && update.type != feature_upgrade_type::safe_downgrade &&
        update.type != feature_upgrade_type::unsafe_downgrade) {
      return invalid_update_version(update, "The controller does not support the given upgrade type.");
    }
    if (update.level < 0) return invalid_update_version(update, "A feature version cannot be less than 0.");
    // This binary is the local controller's: a feature it does not implement is [0, 0].
    const implemented_feature* feature = find_implemented_feature(update.name);
    const metadata::supported_feature local =
        feature ? metadata::supported_feature{feature->min_level, feature->max_level}
                : metadata::supported_feature{0, 0};
    if (!within(local, update.level)) {
      return invalid_update_version(
          update, not_supported_reason("Local controller " + std::to_string(local_node_id), local));
    }
    // FeatureControlManager.reasonNotSupported: every registered broker, then (metadata.version 3.7+) every
    // registered controller; a feature one does not name is [0, 0] for it.
    auto range_of = [&update](const std::map<std::string, metadata::supported_feature>& features) {
      auto it = features.find(update.name);
      return it == features.end() ? metadata::supported_feature{0, 0} : it->second;
    };
    for (const auto& [id, broker] : image.brokers) {
      const auto range = range_of(broker.supported_features);
      if (!within(range, update.level)) {
        return invalid_update_version(update, not_supported_reason("Broker " + std::to_string(id), range));
      }
    }
    for (const auto& [id, controller] : image.controllers) {
      const auto range = range_of(controller.supported_features);
      if (!within(range, update.level)) {
        return invalid_update_version(update,
                                      not_supported_reason("Controller " + std::to_string(id), range));
      }
    }
    // Within the local range, so implemented (a [0, 0] range would have refused any level but 0, and level 0
    // of an unknown feature is what it already is: nothing to write).
    if (!feature) continue;
    const int16_t current = level_in_force(image, *feature, context);
    if (update.level < current && update.type == feature_upgrade_type::upgrade) {
      return invalid_update_version(update,
                                    "Can't downgrade the version of this feature without setting the upgrade "
                                    "type to either safe or unsafe downgrade.");
    }
    if (update.level > current && update.type != feature_upgrade_type::upgrade) {
      return invalid_update_version(update, "Can't downgrade to a newer version.");
    }
    if (feature->name == kraft_version_feature) {
      if (update.level == current) continue;  // already in force: nothing to write
      if (update.type != feature_upgrade_type::upgrade) {
        return invalid_update_version(update, "Can't downgrade the version of this feature.");
      }
      // FeatureControlManager: the Raft client appends the KRaftVersionRecord and VotersRecord itself; a
      // NoOpRecord gives the answer an offset to wait on.
      if (!context.upgrade_kraft_version) {
        return invalid_update_version(update, "This controller's metadata log has no quorum to upgrade.");
      }
      if (auto upgraded = context.upgrade_kraft_version(update.level, context.validate_only);
          !upgraded.ok()) {
        if (upgraded.code == error_code::invalid_update_version)
          return invalid_update_version(update, upgraded.message);
        return upgraded;
      }
      records.push_back(versioned(protocol::no_op_record{}, record_v0));
      continue;
    }
    if (feature->fixed_level >= 0) {
      if (update.level == current) continue;  // already in force: nothing to write
      return invalid_update_version(update, "Mala always has this feature on at level " +
                                                std::to_string(current) + "; it cannot be changed.");
    }
    if (feature->name == metadata_version_feature && update.level < current) {
      // Kafka 4.x refuses a downgrade that might delete metadata (every one between its production
      // levels) and any unsafe one; Mala writes its records at the newest versions, so it refuses them all.
      return status::error(error_code::invalid_update_version,
                           "Invalid metadata.version " + std::to_string(update.level) + ". " +
                               (update.type == feature_upgrade_type::unsafe_downgrade
                                    ? "Unsafe metadata downgrade is not supported in this version."
                                    : "Refusing to perform the requested downgrade because it might delete "
                                      "metadata information."));
    }
    records.push_back(versioned(feature_level(feature->name, update.level), record_v0));
  }
  return records;
}

}  // namespace mala::controller
