// The leader side of ISR changes (Kafka's AlterPartitionManager plus the ISR expiration and expansion checks
// of ReplicaManager): every `interval_ms` each partition this node leads is asked for an ISR change
// (replication::partition::propose_isr_change: shrink the followers that fell behind for
// replica.lag.time.max.ms, expand those that caught up, clear RECOVERING), the changes go to the active
// controller in one AlterPartition v3 request (through the controller channel: the local active controller,
// or forwarded to its CONTROLLER listener), and each partition gets its answer
// (partition::isr_change_answered). At most one change per partition is in flight; a failed request fails
// all of its changes, which the next round proposes again.
//
// A follower's eligibility for the ISR comes from the metadata image: registered, unfenced, not in
// controlled shutdown (Kafka's isReplicaIsrEligible), sent with its broker epoch so the controller can refuse
// a replica that restarted since (INELIGIBLE_REPLICA).
//
// Scale: a round looks only at the partitions that can have a change, the ones this node leads with other
// replicas or that are RECOVERING (a lone replica's ISR never changes); that list is rebuilt when the
// metadata image changes (leaderships change only with it) and every `rescan_rounds` rounds, so an idle node
// with 20,000 single-replica partitions does no per-partition work every 250 ms.
//
// Threads: one manager per shard, for the partitions replica_placement::shard_of puts there; it runs on that
// shard's io_context and must be stopped (on that shard) before it stops.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>

#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/alter_partition_request.h"
#include "mala/protocol/messages/alter_partition_response.h"
#include "mala/replication/replica_manager.h"
#include "mala/replication/replica_placement.h"

namespace mala::replication {

// The AlterPartition version the leader speaks (v3: topic ids and NewIsrWithEpochs, KIP-903).
inline constexpr int16_t alter_partition_version = 3;

// Sends one AlterPartition request to the active controller and returns its answer; nullopt when no
// controller answered.
using alter_partition_sender =
    std::function<asio::awaitable<std::optional<protocol::alter_partition_response>>(
        const protocol::alter_partition_request&)>;

struct alter_partition_manager_options {
  int32_t node_id = 0;
  int32_t interval_ms = 250;
  int32_t rescan_rounds = 20;  // the candidate list is rebuilt at least this often (in rounds)
  // This broker's epoch (from its registration); < 0 while not registered (nothing is sent).
  std::function<int64_t()> broker_epoch;
  std::function<int64_t()> clock_ms;  // wall clock; the system clock when unset
  size_t shard = 0;                   // the shard it runs on: it handles the partitions placed there
  replica_placement placement;
};

class alter_partition_manager {
 public:
  alter_partition_manager(asio::io_context& io, replica_manager& replicas,
                          const metadata::metadata_cache& metadata, alter_partition_sender send,
                          alter_partition_manager_options options);
  alter_partition_manager(const alter_partition_manager&) = delete;
  alter_partition_manager& operator=(const alter_partition_manager&) = delete;

  void start();
  void stop();

 private:
  struct shared_state {
    bool stopped = false;
  };
  asio::awaitable<void> run(std::shared_ptr<shared_state> state);
  asio::awaitable<void> send_round();
  int64_t now_ms() const;
  // The partitions of this shard a round asks (see the header comment), rebuilt when needed.
  const std::vector<topic_partition>& candidates(const metadata::metadata_image_ptr& image);

  asio::io_context& _io;
  replica_manager& _replicas;
  const metadata::metadata_cache& _metadata;
  alter_partition_sender _send;
  std::vector<topic_partition> _candidates;
  metadata::metadata_image_ptr _candidates_image;  // the image they were listed under
  int32_t _rounds_since_rescan = 0;
  alter_partition_manager_options _options;
  std::shared_ptr<shared_state> _state;
};

}  // namespace mala::replication
