// Finalized features (Kafka's FeatureControlManager, KIP-584): the KIP-584 features this binary implements,
// as ApiVersions v3+ advertises them (SupportedFeatures and FinalizedFeatures, what `kafka-features
// describe` prints) and as a broker registers them; the records an empty metadata log is bootstrapped with;
// the check that a registering broker supports every finalized level; and UpdateFeatures (`kafka-features
// upgrade / downgrade`), validated as Kafka 4.x's FeatureControlManager validates it.
//
// metadata.version and transaction.version are finalized in the metadata log (FeatureLevelRecord; level 0
// removes a feature). transaction.version (KIP-890) goes 0..2: 1 enables the flexible transaction log
// records, 2 the transactions v2 flow (epoch bump at every end, EndTxn v5); a new cluster is bootstrapped
// at bootstrap_transaction_version. The others are behaviours Mala has unconditionally, so their finalized
// level is fixed and UpdateFeatures refuses to change it: the eligible leader replicas of KIP-966 and the
// consumer group protocol of KIP-848 are always on (Kafka can turn both off; Mala cannot), and kraft.version
// is 1 when the voter set lives in the metadata log (KIP-853, controller.quorum.bootstrap.servers) and 0
// with static controller.quorum.voters. metadata.version can be upgraded within this binary's range but
// never downgraded (Kafka 4.x refuses every downgrade that might lose metadata, and Mala writes its records
// at the newest versions its schemas define).
//
// Pure data and functions: safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/result.h"
#include "mala/controller/controller_records.h"
#include "mala/metadata/metadata_image.h"

namespace mala::controller {

// KIP-778's metadata.version feature, the first record of every metadata log.
inline constexpr std::string_view metadata_version_feature = "metadata.version";
inline constexpr std::string_view kraft_version_feature = "kraft.version";
// The level an empty log is bootstrapped with, and the newest Mala supports: what `kafka-storage format`
// writes by default in the newest Kafka release, 4.4 (MetadataVersion.LATEST_PRODUCTION = IBP_4_4_IV2,
// feature level 33). What the levels past 4.0 gate, and Mala: 4.3-IV0 (30) KIP-1066 cordoned log dirs
// (RegisterBrokerRecord v4 / BrokerRegistrationChangeRecord v3; brokers send them in heartbeats v2 and fully
// cordoned brokers get no new replicas); 4.4-IV0 (31)
// only share.version 2 (share groups' dead-letter queues); 4.4-IV1 (32) KIP-1276 CIDR ACL hosts
// (metadata/acl_host.h); 4.4-IV2 (33) KIP-1312 UnregisterControllerRecord (applied; the UnregisterController
// API is not served). Records are written at the versions Kafka reads at every level Mala supports
// (RegisterBrokerRecord v3, PartitionRecord v2, ...).
inline constexpr int16_t bootstrap_metadata_version = 33;
// MetadataVersion.MINIMUM_VERSION in Kafka 4.x (IBP_3_3_IV3): the oldest level a 4.x broker supports. Used as
// the lower bound for a registration that names no metadata.version range.
inline constexpr int16_t minimum_metadata_version = 7;
// MetadataVersion.IBP_4_3_IV0: from this level brokers send their cordoned log dirs (KIP-1066) and the
// controller records them (BrokerRegistrationChangeRecord v3).
inline constexpr int16_t cordoned_log_dirs_metadata_version = 30;
// BrokerRegistrationChangeRecord v2 (KIP-858): LogDirs, the dirs a broker has online.
inline constexpr int16_t broker_registration_change_log_dirs_version = 2;
inline constexpr int16_t broker_registration_change_cordoned_version = 3;
// MetadataVersion.IBP_3_7_IV0: from this level controllers register (ControllerRegistration, KIP-919).
inline constexpr int16_t controller_registration_metadata_version = 15;
// MetadataVersion.IBP_3_7_IV2: from this level brokers tell the controller which log dir holds each replica
// (AssignReplicasToDirs, KIP-858).
inline constexpr int16_t directory_assignment_metadata_version = 17;

struct implemented_feature {
  std::string_view name;
  int16_t min_level;
  int16_t max_level;
  // The level in force whatever the metadata log says; -1 for metadata.version, which the log finalizes, and
  // for kraft.version, which depends on how the quorum's voters are configured.
  int16_t fixed_level;
};

inline constexpr std::string_view transaction_version_feature = "transaction.version";
// The transaction.version a new cluster is bootstrapped with: 2 (transactions v2, KIP-890 part 2), what
// Kafka 4.x's `kafka-storage format` writes by default.
inline constexpr int16_t bootstrap_transaction_version = 2;

inline constexpr std::array<implemented_feature, 5> implemented_features{{
    {metadata_version_feature, minimum_metadata_version, bootstrap_metadata_version, -1},
    {kraft_version_feature, 0, 1, -1},
    {"eligible.leader.replicas.version", 0, 1, 1},
    {"group.version", 0, 1, 1},
    {transaction_version_feature, 0, 2, -1},
}};

const implemented_feature* find_implemented_feature(std::string_view name);

// The level of a feature in force: the fixed level of those Mala always has, else what the image finalized
// (0 when it finalized nothing).
inline int16_t finalized_feature_level(const metadata::metadata_image& image, std::string_view name) {
  for (const auto& f : implemented_features) {
    if (f.name == name && f.fixed_level >= 0) return f.fixed_level;
  }
  return image.feature_level(std::string(name));
}

// A freshly formatted cluster's first write: FeatureLevelRecords metadata.version =
// bootstrap_metadata_version and transaction.version = bootstrap_transaction_version (what `kafka-storage
// format` puts in bootstrap.checkpoint). Empty when `image` has finalized metadata.version already: a
// transaction.version removed later (downgraded to 0) stays removed.
record_list bootstrap_records(const metadata::metadata_image& image);

using supported_feature_map = std::map<std::string, metadata::supported_feature>;

// The feature ranges a registration is recorded with: its own, and for metadata.version, when it names no
// range, what this binary supports (Kafka assumes only level 1 there, which no 4.x cluster runs; Mala's own
// node registers without one).
supported_feature_map registered_features(supported_feature_map supported);

// ClusterControlManager's feature check: every finalized feature must lie within the broker's range
// (UNSUPPORTED_VERSION "Unable to register because the broker does not support finalized version ...").
status check_finalized_features_supported(const metadata::metadata_image& image,
                                          const supported_feature_map& supported);

// UpdateFeatures' UpgradeType (FeatureUpdate.UpgradeType); v0's AllowDowngrade = true is safe_downgrade.
enum class feature_upgrade_type : int8_t {
  unknown = 0,
  upgrade = 1,
  safe_downgrade = 2,
  unsafe_downgrade = 3
};

struct feature_update {
  std::string name;
  int16_t level = 0;
  feature_upgrade_type type = feature_upgrade_type::upgrade;
};

// What the quorum controller checks an update against besides the image.
struct feature_update_context {
  // kraft.version in force (1 with a KIP-853 voter set, 0 with static voters).
  int16_t kraft_version = 1;
  // The Raft quorum's kraft.version upgrade (metadata_log::upgrade_kraft_version, Kafka's
  // KRaftVersionAccessor.upgradeKRaftVersion), called with the level asked for and ValidateOnly; its refusal
  // is the update's. Unset: kraft.version cannot be upgraded here.
  std::function<status(int16_t level, bool validate_only)> upgrade_kraft_version;
  bool validate_only = false;
};

// FeatureControlManager.updateFeatures: the FeatureLevelRecords that apply `updates` to `image`, or the
// first refusal, INVALID_UPDATE_VERSION "Invalid update version L for feature F. <reason>": an unknown
// upgrade type, a level below 0, a feature this binary does not implement or a level outside its range or
// any registered broker's ("Local controller N only supports versions a-b", "Broker N only supports
// versions a-b" / "Broker N does not support this feature."), a lower level without a downgrade type
// ("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe
// downgrade."), a higher one with a downgrade type ("Can't downgrade to a newer version."), any
// metadata.version downgrade, and a change to a feature whose level Mala fixes. kraft.version 0 to 1 is the
// quorum's (context.upgrade_kraft_version; its refusal is the update's) and writes a NoOpRecord for the
// answer to wait on; any kraft.version downgrade is refused. An update to the level in force of a fixed
// feature is accepted and writes nothing. No record is written for a refused request: the caller writes all
// of them or none.
result<record_list> update_features(const metadata::metadata_image& image, int32_t local_node_id,
                                    const std::vector<feature_update>& updates,
                                    const feature_update_context& context);

}  // namespace mala::controller
