// The active controller (Kafka's QuorumController): the only writer of the metadata log. It validates
// administrative requests against the current metadata image, turns them into KRaft metadata records (topics,
// partitions, configs, broker registrations, producer-id blocks), appends them to the metadata log as one
// atomic batch, applies them to its image once committed, and hands every new image to the publisher (the
// broker side: replica manager, metadata cache).
//
// This first version sits on a single-voter metadata_log (a majority of one): every node that has the
// controller role is its own quorum, which is exactly right for a one-node cluster. The Raft quorum of issue
// 6 replaces the log underneath; the request-level behaviour here stays.
//
// Brokers forward controller-bound requests (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs, AllocateProducerIds); the request and response types are the protocol's own, so
// a forwarded request and a local call are the same thing. Answers follow Apache Kafka 4.x's
// ReplicationControlManager / ConfigurationControlManager (error codes and messages).
//
// Threads: a quorum_controller is used by one thread only, shard 0's (the Raft/controller thread in
// ../shared/design/architecture.md). Writes block that thread for the metadata log's append and fsync.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "mala/common/result.h"
#include "mala/controller/metadata_log.h"
#include "mala/controller/topic_config.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/alter_configs_request.h"
#include "mala/protocol/messages/alter_configs_response.h"
#include "mala/protocol/messages/create_partitions_request.h"
#include "mala/protocol/messages/create_partitions_response.h"
#include "mala/protocol/messages/create_topics_request.h"
#include "mala/protocol/messages/create_topics_response.h"
#include "mala/protocol/messages/delete_topics_request.h"
#include "mala/protocol/messages/delete_topics_response.h"
#include "mala/protocol/messages/incremental_alter_configs_request.h"
#include "mala/protocol/messages/incremental_alter_configs_response.h"

namespace mala::controller {

// KIP-778's metadata.version feature, the first record of every metadata log.
inline constexpr std::string_view metadata_version_feature = "metadata.version";
// The level an empty log is bootstrapped with: what `kafka-storage format` writes by default in the newest
// stable Kafka release, 4.3 (MetadataVersion.LATEST_PRODUCTION = IBP_4_3_IV0, feature level 30). Records are
// written at the newest version Mala's schemas define (PartitionRecord v2, RegisterBrokerRecord v3, ...);
// Kafka reads every version at any metadata.version, 4.3's KIP-1066 field (RegisterBrokerRecord v4
// CordonedLogDirs) is simply absent.
inline constexpr int16_t bootstrap_metadata_version = 30;
// MetadataVersion.MINIMUM_VERSION in Kafka 4.x (IBP_3_3_IV3): the oldest level a 4.x broker supports. Used as
// the lower bound for a registration that names no metadata.version range.
inline constexpr int16_t minimum_metadata_version = 7;
// QuorumController.MAX_RECORDS_PER_USER_OP: a request that would write more records fails as a whole with
// POLICY_VIOLATION "Unable to perform excessively large batch operation.".
inline constexpr size_t max_records_per_user_op = 10000;

struct controller_options {
  int32_t node_id = 0;
  std::string cluster_id;
  int32_t num_partitions = 1;  // num.partitions: CreateTopics with num_partitions -1, auto-creation
  int16_t default_replication_factor = 1;  // default.replication.factor: replication_factor -1
  bool delete_topic_enable = true;         // delete.topic.enable: false refuses every DeleteTopics
  // The node's static configuration file, for validating broker-level config changes and resolving
  // topic-config defaults (topic_config.h).
  static_broker_config_lookup static_config;
  // Seeds the generator that picks each placement's starting broker and follower shift (Kafka picks them at
  // random). 0: a random seed; tests fix a non-zero one.
  uint64_t placement_seed = 0;
  std::function<int64_t()> clock_ms;  // wall clock; the system clock when unset
};

// A block of producer ids handed to one broker (AllocateProducerIds, KIP-730): [first_id, first_id + size).
struct producer_id_block {
  int32_t assigned_broker_id = -1;
  int64_t first_id = -1;
  int32_t size = 0;
};
// ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
inline constexpr int32_t producer_id_block_size = 1000;

using image_publisher = std::function<void(const metadata::metadata_image_ptr& image)>;

class quorum_controller {
 public:
  // Replays the committed metadata log into an image. An empty log is bootstrapped first with the
  // records Kafka's storage format writes (FeatureLevelRecord metadata.version, ...).
  static result<std::unique_ptr<quorum_controller>> open(std::unique_ptr<metadata_log> log,
                                                         controller_options options);
  ~quorum_controller();

  // The image of everything committed so far.
  metadata::metadata_image_ptr image() const;
  // Called after every committed write with the new image (on the controller's thread). Set before the
  // first write; open() does not call it (the caller publishes image() itself at start-up).
  void set_publisher(image_publisher publisher);

  // BrokerRegistration: RegisterBrokerRecord v3 (the broker epoch is its offset in the metadata log) and,
  // since a single-voter quorum's broker is caught up at once, the unfencing in the same batch, written as
  // Kafka 4.x writes it: BrokerRegistrationChangeRecord v0 with Fenced = -1 (UnfenceBrokerRecord is only for
  // metadata.version < 3.3-IV2). A new incarnation (restart) gets a new epoch, the same incarnation keeps its
  // epoch (an amendment); partitions keep their leader and ISR. Checked as ClusterControlManager does: every
  // finalized feature within the broker's range (UNSUPPORTED_VERSION; a registration naming no
  // metadata.version range gets [minimum_metadata_version, bootstrap_metadata_version]), log dir ids not
  // reserved, not repeated, not another broker's (INVALID_REGISTRATION). Log dirs may be empty (new
  // partitions then get MIGRATING directories). Returns the epoch.
  result<int64_t> register_broker(const metadata::broker_registration& registration);

  // CreateTopics (v2-newest): names checked (INVALID_TOPIC_EXCEPTION, incl. the '.'/'_' collision),
  // TOPIC_ALREADY_EXISTS, num_partitions / replication_factor -1 = the defaults, manual assignments
  // (INVALID_REPLICA_ASSIGNMENT), INVALID_REPLICATION_FACTOR beyond the live (unfenced) brokers, configs
  // validated (every bad config is INVALID_CONFIG, as in Kafka 4.x's controller), validate_only, and from v5
  // the resulting configs, partition count, replication factor and topic id in the answer. Also what Kafka's
  // ControllerApis checks before the controller: duplicate names and __cluster_metadata (INVALID_REQUEST,
  // listed last). Authorization is the caller's business.
  protocol::create_topics_response create_topics(const protocol::create_topics_request& request,
                                                 int16_t version);
  // DeleteTopics by name or (v6+) topic id: RemoveTopicRecord; UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID.
  protocol::delete_topics_response delete_topics(const protocol::delete_topics_request& request,
                                                 int16_t version);
  // CreatePartitions: INVALID_PARTITIONS when the count does not grow, manual assignments checked.
  protocol::create_partitions_response create_partitions(const protocol::create_partitions_request& request,
                                                         int16_t version);
  // IncrementalAlterConfigs (SET / DELETE / APPEND / SUBTRACT) and the legacy AlterConfigs (replaces every
  // override of the resource) for topics and brokers: ConfigRecords, validated with Kafka's names, types and
  // ranges, including the broker-side checks of Kafka's ConfigAdminManager.preprocess (duplicate resources or
  // keys, null values, a broker resource must be "" or this node's id, only dynamic broker properties). Other
  // resource types (BROKER_LOGGER, GROUP, CLIENT_METRICS) are INVALID_REQUEST "Unknown resource type N": a
  // broker that serves BROKER_LOGGER handles it before calling here.
  protocol::incremental_alter_configs_response incremental_alter_configs(
      const protocol::incremental_alter_configs_request& request, int16_t version);
  protocol::alter_configs_response alter_configs(const protocol::alter_configs_request& request,
                                                 int16_t version);

  // AllocateProducerIds: the next block of producer_id_block_size ids (ProducerIdsRecord).
  result<producer_id_block> allocate_producer_ids(int32_t broker_id, int64_t broker_epoch);

 private:
  struct state;
  explicit quorum_controller(std::unique_ptr<state> s);
  std::unique_ptr<state> _state;
};

}  // namespace mala::controller
