// Topics, partitions and their leaders and ISRs (Kafka's ReplicationControlManager): CreateTopics,
// DeleteTopics and CreatePartitions (replication_control_topics.cc); AlterPartition (ISR changes from
// partition leaders), ElectLeaders, unclean elections and the periodic preferred-leader rebalance,
// partition reassignments (KIP-455), and the partition changes that follow a broker's fencing, unfencing,
// controlled shutdown or unclean shutdown, which cluster_control writes with the broker's own records
// (replication_control.cc). Every leader and ISR change goes through partition_change.
//
// Threads: used on the controller's thread only (shard 0). leads_any is pure.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "mala/controller/controller_options.h"
#include "mala/controller/controller_records.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/alter_partition_reassignments_request.h"
#include "mala/protocol/messages/alter_partition_reassignments_response.h"
#include "mala/protocol/messages/alter_partition_request.h"
#include "mala/protocol/messages/alter_partition_response.h"
#include "mala/protocol/messages/assign_replicas_to_dirs_request.h"
#include "mala/protocol/messages/assign_replicas_to_dirs_response.h"
#include "mala/protocol/messages/create_partitions_request.h"
#include "mala/protocol/messages/create_partitions_response.h"
#include "mala/protocol/messages/create_topics_request.h"
#include "mala/protocol/messages/create_topics_response.h"
#include "mala/protocol/messages/delete_topics_request.h"
#include "mala/protocol/messages/delete_topics_response.h"
#include "mala/protocol/messages/elect_leaders_request.h"
#include "mala/protocol/messages/elect_leaders_response.h"
#include "mala/protocol/messages/list_partition_reassignments_request.h"
#include "mala/protocol/messages/list_partition_reassignments_response.h"

namespace mala::controller {

// Whether broker `id` leads any partition.
bool leads_any(const metadata::metadata_image& image, int32_t id);

class replication_control {
 public:
  // `writer` outlives this. options: node_id and static_config (topic configs as this node resolves them),
  // the CreateTopics defaults, delete.topic.enable, the placement seed and the leader rebalance settings.
  replication_control(metadata_writer& writer, controller_options options);

  // The requests; see quorum_controller for what each answers.
  protocol::create_topics_response create_topics(const protocol::create_topics_request& request);
  protocol::delete_topics_response delete_topics(const protocol::delete_topics_request& request,
                                                 int16_t version);
  protocol::create_partitions_response create_partitions(const protocol::create_partitions_request& request);
  protocol::alter_partition_response alter_partition(const protocol::alter_partition_request& request,
                                                     int16_t version);
  protocol::elect_leaders_response elect_leaders(const protocol::elect_leaders_request& request,
                                                 int16_t version);
  protocol::alter_partition_reassignments_response alter_partition_reassignments(
      const protocol::alter_partition_reassignments_request& request);
  protocol::list_partition_reassignments_response list_partition_reassignments(
      const protocol::list_partition_reassignments_request& request) const;

  // Periodic work of the active controller.
  protocol::assign_replicas_to_dirs_response assign_replicas_to_dirs(
      const protocol::assign_replicas_to_dirs_request& request);
  void elect_unclean_leaders();
  void maybe_rebalance_leaders(int64_t now_ms);

  // The partition side of broker state changes (handleBrokerFenced / handleBrokerUnfenced /
  // handleBrokerInControlledShutdown / handleBrokerUncleanShutdown), appended to `records` with the broker's
  // own BrokerRegistrationChangeRecord where Kafka writes one.
  //
  // Fencing `ids` (registered brokers) together: off every ISR, each partition's leadership moved to an ISR
  // member that is not being fenced, then Fenced = 1 for each.
  void append_fence_records(const metadata::metadata_image& image, const std::vector<int32_t>& ids,
                            record_list& records) const;
  // Fenced = -1, then leaders for every leaderless partition, the newly unfenced broker counting as active.
  void append_unfence_records(const metadata::metadata_image& image, int32_t id, int64_t epoch,
                              record_list& records) const;
  // InControlledShutdown = 1 (once), then off every ISR it can leave, its leaderships moved to other active
  // ISR members.
  void append_controlled_shutdown_records(const metadata::metadata_image& image, int32_t id, int64_t epoch,
                                          record_list& records) const;
  // KIP-966: a broker back without a clean shutdown may have lost the tail of its logs, so it leaves every
  // ISR and ELR it is in (of partitions with more than one replica) and may not lead until it catches up.
  void append_unclean_shutdown_records(const metadata::metadata_image& image, int32_t id,
                                       record_list& records) const;
  // handleBrokerUnregistered (UnregisterBroker): the broker leaves every ISR (its leaderships move as on
  // fencing) and the partitions whose ELR holds it are changed the same way, then UnregisterBrokerRecord.
  void append_unregister_records(const metadata::metadata_image& image, int32_t id, int64_t epoch,
                                 record_list& records) const;
  // KIP-858 (handleDirectoriesOffline): of the dirs a broker reports offline in its heartbeat, those its
  // registration still lists lose their replicas (the broker leaves their ISRs, their leaderships move), then
  // a BrokerRegistrationChangeRecord lists the dirs left online. Nothing when every reported dir is known
  // offline already.
  void append_directories_offline(const metadata::metadata_image& image, int32_t id, int64_t epoch,
                                  const std::vector<uuid>& offline_dirs, record_list& records) const;
  // KIP-966: a change of min.insync.replicas (of a topic, or a broker or cluster default) in `records`
  // empties the ELR and last known ELR of the partitions it may concern
  // (getPartitionElrUpdatesForConfigChanges): they were chosen against the old minimum.
  void append_elr_clears_for_min_isr_changes(const metadata::metadata_image& image,
                                             record_list& records) const;

 private:
  // generateLeaderAndIsrUpdates over the partitions `select` picks.
  template <typename Select>
  void append_leader_and_isr_changes(const metadata::metadata_image& image,
                                     const std::vector<int32_t>& brokers_to_remove, int32_t broker_to_add,
                                     Select select, record_list& records,
                                     int32_t broker_with_unclean_shutdown) const;

  metadata_writer& _writer;
  controller_options _options;
  std::mt19937_64 _placement_rng;
  int64_t _next_leader_rebalance_ms = 0;  // 0: not scheduled yet
};

}  // namespace mala::controller
