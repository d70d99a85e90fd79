// The active controller (Kafka's QuorumController): the only writer of the metadata log. It owns the log, the
// image of everything written and the activation (a standby until the metadata_loader activates it on the
// node that leads the quorum), and routes each administrative request to the manager that answers it:
// cluster_control (broker registration, heartbeats, fencing), replication_control (topics, partitions, ISR,
// elections, reassignments), configuration_control (AlterConfigs), producer_id_control and feature_control.
// A manager validates the request against the current image and writes KRaft metadata records through the
// controller (metadata_writer) as one atomic batch; the controller applies them to its image and hands every
// committed image to the publisher (the broker side: replica manager, metadata cache).
//
// Brokers forward controller-bound requests (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs, AllocateProducerIds, ...); the request and response types are the protocol's own,
// so a forwarded request and a local call are the same thing. Answers follow Apache Kafka 4.x's
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
#include "mala/controller/controller_options.h"
#include "mala/controller/feature_control.h"
#include "mala/controller/metadata_log.h"
#include "mala/controller/producer_id_control.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/alter_client_quotas_request.h"
#include "mala/protocol/messages/alter_client_quotas_response.h"
#include "mala/protocol/messages/alter_configs_request.h"
#include "mala/protocol/messages/alter_configs_response.h"
#include "mala/protocol/messages/alter_partition_reassignments_request.h"
#include "mala/protocol/messages/alter_partition_reassignments_response.h"
#include "mala/protocol/messages/alter_partition_request.h"
#include "mala/protocol/messages/alter_partition_response.h"
#include "mala/protocol/messages/alter_user_scram_credentials_request.h"
#include "mala/protocol/messages/alter_user_scram_credentials_response.h"
#include "mala/protocol/messages/assign_replicas_to_dirs_request.h"
#include "mala/protocol/messages/assign_replicas_to_dirs_response.h"
#include "mala/protocol/messages/broker_heartbeat_request.h"
#include "mala/protocol/messages/broker_heartbeat_response.h"
#include "mala/protocol/messages/controller_registration_request.h"
#include "mala/protocol/messages/controller_registration_response.h"
#include "mala/protocol/messages/create_acls_request.h"
#include "mala/protocol/messages/create_acls_response.h"
#include "mala/protocol/messages/create_partitions_request.h"
#include "mala/protocol/messages/create_partitions_response.h"
#include "mala/protocol/messages/create_topics_request.h"
#include "mala/protocol/messages/create_topics_response.h"
#include "mala/protocol/messages/delete_acls_request.h"
#include "mala/protocol/messages/delete_acls_response.h"
#include "mala/protocol/messages/delete_topics_request.h"
#include "mala/protocol/messages/delete_topics_response.h"
#include "mala/protocol/messages/elect_leaders_request.h"
#include "mala/protocol/messages/elect_leaders_response.h"
#include "mala/protocol/messages/incremental_alter_configs_request.h"
#include "mala/protocol/messages/incremental_alter_configs_response.h"
#include "mala/protocol/messages/list_partition_reassignments_request.h"
#include "mala/protocol/messages/list_partition_reassignments_response.h"
#include "mala/protocol/messages/unregister_broker_request.h"
#include "mala/protocol/messages/unregister_broker_response.h"
#include "mala/protocol/messages/update_features_request.h"
#include "mala/protocol/messages/update_features_response.h"

namespace mala::controller {

using image_publisher = std::function<void(const metadata::metadata_image_ptr& image)>;

class quorum_controller {
 public:
  // A standby controller writing to `log`, with an empty image (the cluster id, this node as controller).
  // It learns the committed log only from activate(); open() reads and writes nothing.
  static result<std::unique_ptr<quorum_controller>> open(std::unique_ptr<metadata_log> log,
                                                         controller_options options);
  ~quorum_controller();

  // The image of everything this controller wrote, from the committed image it was activated with.
  metadata::metadata_image_ptr image() const;
  // Called with the new image (on the controller's thread) after every write the metadata log has committed
  // by the time its append returns; images committed later reach the broker side through the
  // metadata_loader.
  void set_publisher(image_publisher publisher);

  // Whether this controller is the active one (the only writer). Requests reaching a standby controller must
  // be answered NOT_CONTROLLER by the caller.
  bool active() const;
  // Becomes the active controller from `committed`, the image of everything committed (the new Raft leader
  // has committed its epoch's first entry, so that is the whole log). Bootstraps an empty cluster with the
  // records Kafka's storage format writes (FeatureLevelRecord metadata.version). Uncommitted writes of an
  // earlier term were reverted by deactivate(). When the log ends inside a KIP-868 metadata transaction that
  // the previous leader left open (`open_transaction`), it first writes an AbortTransactionRecord, as Kafka's
  // QuorumController does on activation. False when a write failed: the controller stays standby.
  bool activate(metadata::metadata_image_ptr committed, bool open_transaction = false);
  // Leadership lost: back to standby with the committed image; writes not yet committed are forgotten (they
  // may be truncated by the new leader), as Kafka's QuorumController reverts to its last committed state.
  void deactivate(metadata::metadata_image_ptr committed);
  // The offset of the last record this controller wrote (-1 before any): a request is answered once the
  // metadata log has committed it.
  int64_t last_written_offset() const;

  // BrokerRegistration: RegisterBrokerRecord v3 (the broker epoch is its offset in the metadata log). A new
  // broker registers fenced; the heartbeat that finds it caught up unfences it (broker_heartbeat). A new
  // incarnation (restart) gets a new epoch, the same incarnation keeps its epoch (an amendment); partitions
  // keep their leader and ISR. Checked as ClusterControlManager does: every finalized feature within the
  // broker's range (UNSUPPORTED_VERSION; a registration naming no metadata.version range gets
  // [minimum_metadata_version, bootstrap_metadata_version]), log dir ids not reserved, not repeated, not
  // another broker's (INVALID_REGISTRATION). Log dirs may be empty (new partitions then get MIGRATING
  // directories). A new incarnation whose `previous_broker_epoch` (the epoch in its clean-shutdown markers,
  // -1 after a crash) is not its last registered epoch shut down uncleanly (KIP-966): it leaves every ISR and
  // ELR first. A new incarnation of a broker that is unfenced and whose session is still valid at now_ms
  // (last heartbeat + broker.session.timeout.ms >= now_ms) is refused with DUPLICATE_BROKER_REGISTRATION:
  // another process may be running with that node id (a broker restarted after a crash registers once the
  // controller has fenced its old session). Returns the epoch.
  result<int64_t> register_broker(const metadata::broker_registration& registration,
                                  int64_t previous_broker_epoch = -1, int64_t now_ms = 0);

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
  // AlterClientQuotas (client_quota_control.h): ClientQuotaRecords in one batch, all or none; validate_only
  // writes nothing. A failed write answers every entity with its error.
  protocol::alter_client_quotas_response alter_client_quotas(
      const protocol::alter_client_quotas_request& request, int16_t version);
  protocol::alter_configs_response alter_configs(const protocol::alter_configs_request& request,
                                                 int16_t version);

  // CreateAcls / DeleteAcls (acl_control.h): AccessControlEntryRecords / RemoveAccessControlEntryRecords.
  protocol::create_acls_response create_acls(const protocol::create_acls_request& request);
  protocol::delete_acls_response delete_acls(const protocol::delete_acls_request& request);

  // AllocateProducerIds: the next block of producer_id_block_size ids (ProducerIdsRecord).
  result<producer_id_block> allocate_producer_ids(int32_t broker_id, int64_t broker_epoch);

  // AlterPartition (ReplicationControlManager.alterPartition): a partition leader shrinks or expands its ISR,
  // or marks itself recovered after an unclean election. STALE_BROKER_EPOCH for the whole request when the
  // broker epoch is not the registered one; per partition, in Kafka's order: UNKNOWN_TOPIC_ID (v2+, by id) /
  // UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER when the leader is ahead of this image, FENCED_LEADER_EPOCH,
  // INVALID_REQUEST (not the leader, an ISR that is not a subset of the replicas or lacks the leader, a
  // recovering leader with more than itself), INVALID_UPDATE_VERSION (an older partition epoch),
  // INELIGIBLE_REPLICA (a member fenced, shutting down, unregistered or of another broker epoch). Each
  // accepted change is a PartitionChangeRecord (ELR kept by partition_change); the answer carries the
  // partition's state after it, its new partition epoch included.
  protocol::alter_partition_response alter_partition(const protocol::alter_partition_request& request,
                                                     int16_t version);

  // AssignReplicasToDirs (KIP-858, ReplicationControlManager.handleAssignReplicasToDirs): a broker tells
  // which of its log dirs holds each of its replicas. UNSUPPORTED_VERSION below metadata.version 3.7-IV2,
  // STALE_BROKER_EPOCH for a broker epoch that is not the registered one; per partition UNKNOWN_TOPIC_ID,
  // UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (not one of its replicas). Each replica whose dir
  // changes gets a PartitionChangeRecord with the new Directories; a dir that is not one of the broker's
  // registered dirs counts as offline, and the broker also leaves those partitions' ISR and leadership.
  protocol::assign_replicas_to_dirs_response assign_replicas_to_dirs(
      const protocol::assign_replicas_to_dirs_request& request);

  // ElectLeaders (kafka-leader-election): PREFERRED (0) moves leadership to the first replica when it is in
  // the ISR and alive (ELECTION_NOT_NEEDED when it leads, PREFERRED_LEADER_NOT_AVAILABLE when it cannot);
  // UNCLEAN (1, v1+) elects a leader for a leaderless partition, any live replica as a last resort
  // (ELECTION_NOT_NEEDED when it has one, ELIGIBLE_LEADERS_NOT_AVAILABLE when none is alive). No topic list:
  // every partition. UNKNOWN_TOPIC_OR_PARTITION per missing partition.
  protocol::elect_leaders_response elect_leaders(const protocol::elect_leaders_request& request,
                                                 int16_t version);

  // AlterPartitionReassignments (KIP-455, kafka-reassign-partitions --execute / --cancel): per partition, the
  // replicas become target + the replicas leaving (adding / removing recorded); the new replicas fetch from
  // the leader, and once every target replica is in the ISR (the leader's AlterPartition) the reassignment
  // completes: replicas = target, a new leader if the old one left. A null replica list cancels (back to the
  // original replicas; NO_REASSIGNMENT_IN_PROGRESS when none), an empty, repeated or unregistered replica is
  // INVALID_REPLICA_ASSIGNMENT, a missing partition UNKNOWN_TOPIC_OR_PARTITION.
  protocol::alter_partition_reassignments_response alter_partition_reassignments(
      const protocol::alter_partition_reassignments_request& request, int16_t version);
  // ListPartitionReassignments: the partitions with a reassignment in progress (all, or among those named).
  protocol::list_partition_reassignments_response list_partition_reassignments(
      const protocol::list_partition_reassignments_request& request) const;

  // UpdateFeatures (kafka-features upgrade / downgrade, KIP-584/KIP-778): the updates are validated as
  // feature_control's update_features says and written as FeatureLevelRecords in one batch, all or none;
  // ValidateOnly (v1+, --dry-run) writes nothing. v0's AllowDowngrade is a safe downgrade. A refusal is the
  // top-level error ("The update failed for all features since the following feature had an error: ...")
  // with no per-feature results; a success lists every feature with NONE for v0-1 and nothing for v2 (as
  // Kafka's QuorumController answers).
  // ControllerRegistration (KIP-919): see cluster_control::register_controller.
  protocol::controller_registration_response register_controller(
      const protocol::controller_registration_request& request);
  // UnregisterBroker (kafka-cluster.sh unregister): see cluster_control::unregister_broker.
  protocol::unregister_broker_response unregister_broker(const protocol::unregister_broker_request& request);
  protocol::update_features_response update_features(const protocol::update_features_request& request,
                                                     int16_t version);

  // AlterUserScramCredentials (kafka-configs --entity-type users SCRAM-SHA-256=[...], KIP-554): validated as
  // scram_control.h says; the accepted users' records are written in one batch. A failed write answers every
  // accepted user with its error (NOT_CONTROLLER, ...).
  protocol::alter_user_scram_credentials_response alter_user_scram_credentials(
      const protocol::alter_user_scram_credentials_request& request);

  // --- Broker lifecycle (Kafka 4.x's ClusterControlManager / BrokerHeartbeatManager /
  // ReplicationControlManager). Heartbeat times are in memory only; every change is written as records.

  // BrokerHeartbeat at now_ms: STALE_BROKER_EPOCH for an unknown broker or another epoch. Otherwise records
  // the heartbeat and moves the broker through Kafka's states: a fenced broker is unfenced once
  // CurrentMetadataOffset reaches its registration (the broker epoch) and WantFence is false (written as
  // Kafka 4.x writes it: BrokerRegistrationChangeRecord v0 with Fenced = -1), and becomes the leader of
  // leaderless partitions whose ISR holds it; WantFence fences it (leaderships and ISR memberships move
  // away); WantShutDown starts a controlled shutdown (InControlledShutdown, then every partition whose ISR
  // holds it gets another leader from the active ISR members and loses it from the ISR unless it is the last
  // member) and answers ShouldShutDown once it leads nothing and every active broker has reported the offset
  // of those changes; the broker is then fenced. A fenced broker may shut down at once. Throttle is always 0.
  protocol::broker_heartbeat_response broker_heartbeat(const protocol::broker_heartbeat_request& request,
                                                       int64_t now_ms);
  // Fences every unfenced broker whose last heartbeat is older than broker_session_timeout_ms, all those
  // found by one check in one batch: BrokerRegistrationChangeRecord Fenced=1 for each, and for each partition
  // whose ISR holds one of them the ISR without them and, when its leader goes, a new leader among the ISR
  // members not being fenced; with none left the partition has no leader (-1), the members that left join
  // the ELR when the ISR falls below min ISR, and an ISR emptied remembers its leader as the last known
  // leader (KIP-966). Kafka fences one broker per event, moving leaderships onto brokers whose sessions have
  // expired too; fencing them together keeps each partition's own last leader after a whole-cluster crash.
  // A broker never heard from starts its session at the first check. Called periodically by the active
  // controller.
  // Leaderless partitions of topics whose unclean.leader.election.enable is true (topic, broker or cluster
  // level, changeable live) get an unclean election (any live replica; the ISR becomes just it, RECOVERING;
  // logged as a possible loss). Kafka runs this when the config changes and periodically; the node calls it
  // with the fencing check, every 250 ms.
  // auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds, a preferred election for
  // each partition not led by its first replica while that replica is in the ISR and alive (Kafka's
  // maybeBalancePartitionLeaders). The node calls it with the fencing check; it keeps its own interval.
  void maybe_rebalance_leaders(int64_t now_ms);
  void elect_unclean_leaders();
  void fence_stale_brokers(int64_t now_ms);
  // Starts every registered broker's session afresh at now_ms: call when this controller becomes active, so
  // that brokers get a full session timeout to find it (ClusterControlManager.activate).
  void reset_heartbeat_deadlines(int64_t now_ms);

 private:
  struct state;
  explicit quorum_controller(std::unique_ptr<state> s);
  std::unique_ptr<state> _state;
};

}  // namespace mala::controller
