// An immutable snapshot of cluster metadata as the broker side sees it: brokers and their endpoints, topics,
// partitions (leader, epochs, replicas, ISR, ELR, offline replicas), configs, finalized features, the
// producer id block, cluster id and the controller id that clients are told about. Built from the node's own
// configuration at start-up, or by applying committed KRaft metadata log records with metadata_delta
// (metadata_delta.h), and published as a shared_ptr<const metadata_image>; readers on any shard hold their
// own reference, so no locks are needed to read. Mirrors Kafka's org.apache.kafka.image.MetadataImage.
#pragma once

#include <array>
#include <atomic>
#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mala/common/chunked_cow_vector.h"
#include "mala/common/current_shard.h"
#include "mala/common/persistent_map.h"
#include "mala/common/uuid.h"
#include "mala/metadata/acl.h"

namespace mala::metadata {

struct broker_endpoint {
  std::string listener_name;
  std::string host;
  uint16_t port = 0;
  std::string security_protocol;
  friend bool operator==(const broker_endpoint&, const broker_endpoint&) = default;
};

// A feature's supported range as a broker registered it (RegisterBrokerRecord.Features).
struct supported_feature {
  int16_t min_version = 0;
  int16_t max_version = 0;
  friend bool operator==(const supported_feature&, const supported_feature&) = default;
};

struct broker_registration {
  int32_t id = -1;
  std::optional<std::string> rack;
  std::vector<broker_endpoint> endpoints;
  bool fenced = false;
  // From RegisterBrokerRecord (KIP-631): the epoch is the offset of the registration in the metadata log and
  // must match in Fence/Unfence/BrokerRegistrationChange records; the incarnation id changes on every
  // restart.
  int64_t epoch = -1;
  uuid incarnation_id;
  bool in_controlled_shutdown = false;
  std::vector<uuid> log_dirs;  // KIP-858 directory ids, RegisterBrokerRecord v3+
  // KIP-1066: the log dirs the operator cordoned (no new replicas placed there); RegisterBrokerRecord v4+ and
  // BrokerRegistrationChangeRecord v3+. Null when no record carried the field. Mala places replicas by
  // broker: one whose dirs are all cordoned gets none (controller::has_uncordoned_dirs).
  std::optional<std::vector<uuid>> cordoned_log_dirs;
  std::map<std::string, supported_feature> supported_features;

  const broker_endpoint* endpoint_for(const std::string& listener_name) const;
  // KIP-858 (BrokerRegistration.hasOnlineDir, DirectoryId.isOnline): UNASSIGNED and MIGRATING count as
  // online, LOST as offline, and so does every dir of a broker registered without dirs (before
  // metadata.version 3.7-IV2, KAFKA-16162); otherwise a dir is online when log_dirs lists it (a failed dir
  // leaves the list).
  bool has_online_dir(const uuid& dir) const;
  friend bool operator==(const broker_registration&, const broker_registration&) = default;
};

// A controller's registration (RegisterControllerRecord, KIP-919): how brokers and tools reach it and the
// feature ranges it supports.
struct controller_registration {
  int32_t id = -1;
  uuid incarnation_id;
  bool zk_migration_ready = false;
  std::vector<broker_endpoint> endpoints;
  std::map<std::string, supported_feature> supported_features;
  friend bool operator==(const controller_registration&, const controller_registration&) = default;
};

// A delegation token's metadata (DelegationTokenRecord, KIP-48 on KRaft): kept so that a log Kafka wrote
// keeps its tokens through Mala's snapshots. Mala does not serve the delegation token APIs.
struct delegation_token_entry {
  std::string owner;
  std::string requester;
  std::vector<std::string> renewers;
  int64_t issue_timestamp = 0;
  int64_t max_timestamp = 0;
  int64_t expiration_timestamp = 0;
  friend bool operator==(const delegation_token_entry&, const delegation_token_entry&) = default;
};

struct partition_state {
  int32_t partition = 0;
  int32_t leader = -1;
  int32_t leader_epoch = 0;
  int32_t partition_epoch = 0;
  std::vector<int32_t> replicas;
  std::vector<int32_t> isr;
  std::vector<int32_t> eligible_leader_replicas;
  std::vector<int32_t> last_known_elr;
  // Reassignment in progress (KIP-455).
  std::vector<int32_t> adding_replicas;
  std::vector<int32_t> removing_replicas;
  // KIP-704: recovered (0) or recovering after an unclean election (1).
  int8_t leader_recovery_state = 0;
  // KIP-858: the log directory of each replica, parallel to `replicas`. Kafka fills a PartitionRecord without
  // directories with DirectoryId.MIGRATING (the zero uuid); empty in images not built from the log.
  std::vector<uuid> directories;
  friend bool operator==(const partition_state&, const partition_state&) = default;
};

// Kafka's LeaderRecoveryState values (PartitionRecord/PartitionChangeRecord.LeaderRecoveryState).
inline constexpr int8_t leader_recovered = 0;
inline constexpr int8_t leader_recovering = 1;

struct topic_metadata {
  std::string name;
  uuid id;
  bool internal = false;
  // Indexed by partition number; shared with the images before and after as far as unchanged.
  chunked_cow_vector<partition_state> partitions;
  friend bool operator==(const topic_metadata&, const topic_metadata&) = default;
};

// Kafka's ConfigResource.Type ids, as ConfigRecord.ResourceType carries them.
enum class config_resource_type : int8_t {
  unknown = 0,
  topic = 2,
  broker = 4,  // resource name "" is the cluster-wide default, otherwise the broker id in decimal
  broker_logger = 8,
  client_metrics = 16,
  group = 32,
};

struct config_resource {
  config_resource_type type = config_resource_type::unknown;
  std::string name;
  friend auto operator<=>(const config_resource&, const config_resource&) = default;
};

using config_map = std::map<std::string, std::string>;

// A user's SCRAM credential for one mechanism (UserScramCredentialRecord): never the password, only what the
// server needs to verify one (RFC 5802's salt, StoredKey, ServerKey and iteration count).
struct scram_credential_entry {
  std::vector<uint8_t> salt;
  std::vector<uint8_t> stored_key;
  std::vector<uint8_t> server_key;
  int32_t iterations = 0;
  friend bool operator==(const scram_credential_entry&, const scram_credential_entry&) = default;
};

// A client quota entity (Kafka's ClientQuotaEntity): entity type ("user", "client-id", "ip") to name, a name
// of nullopt being that type's default entity. Names are kept as clients send them (Kafka's KRaft records
// carry unsanitized names).
using client_quota_entity = std::map<std::string, std::optional<std::string>>;
// Quota key (producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate,
// connection_creation_rate) to value.
using client_quota_values = std::map<std::string, double>;
using client_quota_map = std::map<client_quota_entity, client_quota_values>;

// The client quotas of ClientQuotaRecords (Kafka's ClientQuotasImage). Shared between images that did not
// change them, so that the broker's quota managers can tell at a pointer compare whether their derived
// lookup tables are still current; null when no quota is set, so that the request path's check for "no
// quota at all" is one pointer test.
struct client_quotas_image {
  std::shared_ptr<const client_quota_map> entities;

  bool empty() const { return !entities || entities->empty(); }
  const client_quota_values* find(const client_quota_entity& entity) const;
  friend bool operator==(const client_quotas_image& a, const client_quotas_image& b) {
    if (a.empty() || b.empty()) return a.empty() == b.empty();
    return a.entities == b.entities || *a.entities == *b.entities;
  }
};

// Topic names by topic id: an index of metadata_image::topics that metadata_delta keeps with it, so that a
// lookup by id (Fetch, Produce and the replica fetchers name topics by id) costs O(log topics). Derived data:
// two images with the same topics are equal whatever their indexes hold.
struct topic_id_index {
  struct uuid_order {
    bool operator()(const uuid& a, const uuid& b) const { return a.bytes < b.bytes; }
  };
  persistent_map<uuid, std::string, uuid_order> names;
  friend bool operator==(const topic_id_index&, const topic_id_index&) { return true; }
};

// The image's maps are persistent (copy-on-write, shared with the images before and after as far as
// unchanged): a new image costs O(log n) per topic or config it changes, not O(topics).
class metadata_image {
 public:
  std::string cluster_id;
  int32_t controller_id = -1;
  // The quorum's kraft.version as this node's Raft replica has it (KIP-853: 1 once the voters are in the
  // log), set by the metadata loader with controller_id: ApiVersions finalizes it (Kafka's KRaftMetadataCache
  // .features). -1 without a quorum (images built by hand).
  int16_t kraft_version = -1;
  std::map<int32_t, broker_registration> brokers;
  // Controller registrations by node id (RegisterControllerRecord / UnregisterControllerRecord).
  std::map<int32_t, controller_registration> controllers;
  persistent_map<std::string, topic_metadata> topics;
  // Kept by metadata_delta; an image whose index does not cover `topics` (built by hand) is searched by id.
  topic_id_index topic_ids;
  // Dynamic configs set through ConfigRecord (only the keys set explicitly; defaults live elsewhere). A
  // resource with no configs left has no entry. Deleting a topic deletes its configs, as Kafka's
  // MetadataDelta does.
  persistent_map<config_resource, config_map> configs;
  // Finalized feature levels (FeatureLevelRecord, KIP-584/KIP-778), including metadata.version.
  std::map<std::string, int16_t> finalized_features;
  // Client quotas (ClientQuotaRecord, KIP-55/KIP-546).
  client_quotas_image client_quotas;
  // The first producer id not yet handed out (ProducerIdsRecord.NextProducerId, KIP-730).
  int64_t next_producer_id = 0;
  // SCRAM credentials by user, then by mechanism (Kafka's ScramMechanism type: 1 SCRAM-SHA-256, 2
  // SCRAM-SHA-512); a user without credentials has no entry.
  std::map<std::string, std::map<int8_t, scram_credential_entry>> scram_credentials;
  // ACLs (AccessControlEntryRecord / RemoveAccessControlEntryRecord) by id, with the authorizer's index.
  acl_set acls;
  // Delegation tokens by token id (DelegationTokenRecord / RemoveDelegationTokenRecord).
  std::map<std::string, delegation_token_entry> delegation_tokens;
  // Offset and leader epoch of the last metadata log record applied; -1 for images not built from the log.
  int64_t metadata_offset = -1;
  int32_t metadata_epoch = -1;

  const topic_metadata* find_topic(const std::string& name) const;
  const topic_metadata* find_topic(const uuid& id) const;
  bool broker_alive(int32_t id) const;
  // KIP-858: whether replica `id` of `p` sits in a dir its broker does not have online (KRaftMetadataCache's
  // isReplicaInOfflineDir); false for a replica without a Directories entry or of a broker not registered.
  bool replica_in_offline_dir(const partition_state& p, int32_t id) const;
  // The configs set for a resource, or nullptr when none are.
  const config_map* find_configs(config_resource_type type, const std::string& name) const;
  const scram_credential_entry* find_scram_credential(const std::string& user, int8_t mechanism) const;
  // The finalized level of a feature; 0 (disabled) when it is not finalized.
  int16_t feature_level(const std::string& name) const;
  // Field by field (tests; image_to_records round trips).
  friend bool operator==(const metadata_image&, const metadata_image&) = default;
};

using metadata_image_ptr = std::shared_ptr<const metadata_image>;

}  // namespace mala::metadata

namespace mala::metadata {

// Holds the newest published image. publish() and current() may be called from any thread. Every request
// reads it, so each shard reads its own copy of the pointer (common/current_shard.h; threads that are no
// shard, and shards beyond the slots, share the first): the shards never contend on one cache line, and
// publish() (rare) stores the image into every slot.
class metadata_cache {
 public:
  metadata_image_ptr current() const { return slot().image.load(std::memory_order_acquire); }
  void publish(metadata_image_ptr image) {
    for (auto& s : _slots) s.image.store(image, std::memory_order_release);
  }

 private:
  static constexpr size_t slot_count = 65;  // shards 0..63, and everyone else
  struct alignas(64) slot_state {
    std::atomic<metadata_image_ptr> image{std::make_shared<const metadata_image>()};
  };
  const slot_state& slot() const {
    const int shard = current_shard();
    return _slots[shard >= 0 && shard + 1 < static_cast<int>(slot_count) ? shard + 1 : 0];
  }
  std::array<slot_state, slot_count> _slots;
};

}  // namespace mala::metadata
