// Applies committed KRaft metadata log records to a metadata image, as Kafka's
// org.apache.kafka.image.MetadataDelta does: a delta starts from a base image, apply() replays records one at
// a time with Kafka's semantics, and build() returns a new immutable image. The base image is never modified
// (readers may hold it on any shard).
//
// A record that cannot be applied (a PartitionRecord for an unknown topic, a FenceBrokerRecord whose epoch
// does not match, ...) is refused with an error status and leaves the delta as it was; Kafka throws there,
// which stops the metadata loader. The caller decides whether to stop (a corrupt log) or skip.
//
// Not thread-safe: one delta belongs to the thread replaying the log. build() may be called more than once.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "mala/common/result.h"
#include "mala/common/uuid.h"
#include "mala/metadata/metadata_image.h"
#include "mala/metadata/metadata_records.h"

namespace mala::metadata {

// Kafka's LeaderConstants: PartitionChangeRecord.Leader -2 leaves the leader as it is, -1 means no leader.
inline constexpr int32_t no_leader_change = -2;
inline constexpr int32_t no_leader = -1;
// PartitionChangeRecord.LeaderRecoveryState -1: unchanged.
inline constexpr int8_t no_leader_recovery_state_change = -1;

// BrokerRegistrationChangeRecord.Fenced (Kafka's BrokerRegistrationFencingChange) and .InControlledShutdown
// (BrokerRegistrationInControlledShutdownChange).
inline constexpr int8_t fencing_change_fence = 1;
inline constexpr int8_t fencing_change_none = 0;
inline constexpr int8_t fencing_change_unfence = -1;
inline constexpr int8_t controlled_shutdown_change_none = 0;
inline constexpr int8_t controlled_shutdown_change_in_controlled_shutdown = 1;

// Kafka's DirectoryId reserved values (KIP-858).
inline constexpr uuid directory_migrating{};  // 0: the replica's directory is not known yet (pre-3.7 records)
inline constexpr uuid directory_unassigned{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
inline constexpr uuid directory_lost{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}};

// Kafka's Topic.isInternal: the topics clients see flagged as internal in Metadata.
bool is_internal_topic(const std::string& name);

class metadata_delta {
 public:
  // A null base is an empty image.
  explicit metadata_delta(metadata_image_ptr base);

  // Applies one record. On error nothing changes.
  status apply(const metadata_record& record);
  // The same, then records `offset`/`epoch` (the record's position in __cluster_metadata-0) as the image's
  // metadata_offset/metadata_epoch.
  status apply(const metadata_record& record, int64_t offset, int32_t epoch);

  // The image with every record applied so far. Returns the base itself when nothing was applied.
  metadata_image_ptr build() const&;
  // The same for a delta that is done: the working copy becomes the image instead of being copied once more
  // (a copy is O(topics): partitions are shared, chunked_cow_vector.h).
  metadata_image_ptr build() &&;

  const metadata_image& base() const { return *_base; }
  bool has_changes() const { return _next.has_value(); }

 private:
  // The image as applied so far (read-only), and the working copy (made on first use).
  const metadata_image& current() const { return _next ? *_next : *_base; }
  metadata_image& next();
  const topic_metadata* topic_by_id(const uuid& id) const;

  status apply_record(const protocol::register_broker_record& r);
  status apply_record(const protocol::unregister_broker_record& r);
  status apply_record(const protocol::topic_record& r);
  status apply_record(const protocol::partition_record& r);
  status apply_record(const protocol::config_record& r);
  status apply_record(const protocol::partition_change_record& r);
  status apply_record(const protocol::fence_broker_record& r);
  status apply_record(const protocol::unfence_broker_record& r);
  status apply_record(const protocol::remove_topic_record& r);
  status apply_record(const protocol::feature_level_record& r);
  status apply_record(const protocol::producer_ids_record& r);
  status apply_record(const protocol::broker_registration_change_record& r);
  status apply_record(const protocol::no_op_record& r);
  status apply_record(const protocol::user_scram_credential_record& r);
  status apply_record(const protocol::remove_user_scram_credential_record& r);
  status apply_record(const protocol::access_control_entry_record& r);
  status apply_record(const protocol::remove_access_control_entry_record& r);
  status apply_record(const protocol::client_quota_record& r);
  status apply_record(const protocol::register_controller_record& r);
  status apply_record(const protocol::unregister_controller_record& r);
  status apply_record(const protocol::begin_transaction_record& r);
  status apply_record(const protocol::end_transaction_record& r);
  status apply_record(const protocol::abort_transaction_record& r);
  status apply_record(const protocol::delegation_token_record& r);
  status apply_record(const protocol::remove_delegation_token_record& r);
  status apply_record(const protocol::zk_migration_state_record& r);
  status apply_record(const protocol::clear_elr_record& r);
  // ClearElrRecord's change to one topic's partitions.
  void clear_elr(const std::string& topic_name);

  metadata_image_ptr _base;
  // Copy of the base made on the first change: the maps are copied, each topic's partitions are shared with
  // the base until a record changes one (then only the chunk holding it is copied), as Kafka shares unchanged
  // parts of its images through persistent maps.
  std::optional<metadata_image> _next;
  // Topic name by id for the working copy, built on first use.
  // The ACL set changed since the base: build() rebuilds the authorizer's index once.
  bool _acls_changed = false;
  // The working copy's client quota map once this delta copied it (the image's pointer points to it): later
  // records change it in place instead of copying it again. Forgotten by build(), whose image may be
  // published.
  mutable std::shared_ptr<client_quota_map> _quotas_working;
};

}  // namespace mala::metadata
