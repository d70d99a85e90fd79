// The KIP-584 features this binary implements, as ApiVersions v3+ advertises them (SupportedFeatures and
// FinalizedFeatures, what `kafka-features describe` prints) and as a broker registers them.
//
// metadata.version is finalized in the metadata log (FeatureLevelRecord); the others are behaviours Mala has
// unconditionally, so their finalized level is fixed: the eligible leader replicas of KIP-966 and the
// consumer group protocol of KIP-848 are always on, and kraft.version is 1 when the voter set lives in the
// metadata log (KIP-853, controller.quorum.bootstrap.servers) and 0 with static controller.quorum.voters.
// Transactions are not served, so transaction.version is not listed.
//
// Pure data and functions: safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "mala/controller/quorum_controller.h"

namespace mala::controller {

struct implemented_feature {
  std::string_view name;
  int16_t min_level;
  int16_t max_level;
  // The level in force whatever the metadata log says; -1 for metadata.version, which the log finalizes, and
  // for kraft.version, which depends on how the quorum's voters are configured.
  int16_t fixed_level;
};

inline constexpr std::string_view kraft_version_feature = "kraft.version";

inline constexpr std::array<implemented_feature, 4> implemented_features{{
    {metadata_version_feature, minimum_metadata_version, bootstrap_metadata_version, -1},
    {kraft_version_feature, 0, 1, -1},
    {"eligible.leader.replicas.version", 0, 1, 1},
    {"group.version", 0, 1, 1},
}};

}  // namespace mala::controller
