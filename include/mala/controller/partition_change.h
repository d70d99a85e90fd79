// How the active controller changes one partition's leadership and replica sets (Kafka's
// PartitionChangeBuilder): given the partition as the image has it and a target ISR, it elects a leader,
// keeps the eligible leader replicas (ELR, KIP-966) and the last known ELR, and returns the
// PartitionChangeRecord to write, or nothing when nothing changes. Every path that moves a leader or an ISR
// goes through it: broker fencing, unfencing, controlled shutdown and unclean shutdown, AlterPartition from
// a leader, unclean and preferred elections.
//
// Election order (electAnyLeader): the current leader if it is still in the target ISR and acceptable; else
// the first replica (in replica order) in the target ISR that is acceptable; else, when the target ISR is
// empty, the first acceptable ELR member (which becomes the ISR); else the last known leader; else, for an
// unclean election, the first
// acceptable replica at all (the ISR becomes just it, the leader recovery state RECOVERING: records may be
// lost); else no leader (-1). A preferred election tries the first replica first.
//
// ELR (maybePopulateTargetElr): while the target ISR is at least min ISR the ELR and last known ELR are
// empty; below it, members leaving the ISR join the ELR (unless they shut down uncleanly). With ELR on, the
// ISR may become empty (the last member of a partition whose leader was fenced waits in the ELR); with it
// off the last ISR member stays. The last known ELR holds the last known leader (Kafka's "balanced
// recovery" form): set to the leader when the ISR first becomes empty, tried when the ISR and the ELR are
// both empty, cleared once the partition has a leader. That is what brings a partition back after every
// replica shut down uncleanly (a whole-cluster kill -9: each replica leaves the ISR and ELR as it
// registers again). It is not an unclean election in the sense of unclean.leader.election.enable (the last
// known leader had every committed record when the ISR emptied), but Kafka handles it like one: the ISR is
// forced to it alone and the leader recovery state becomes RECOVERING, since its own unclean shutdown may
// have cost it records it had not flushed.
//
// Reassignments (KIP-455): while `adding` or `removing` replicas are set, the change completes the
// reassignment as soon as every target replica (replicas - removing) is in the ISR: replicas = target, the
// ISR without the removed ones, a new leader when the old one was removed, and a leader epoch bump when any
// replica goes.
//
// Mala runs with ELR on (Kafka 4.1's default for new clusters, eligible.leader.replicas.version=1).
//
// Threads: pure function.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "mala/common/uuid.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/partition_change_record.h"

namespace mala::controller {

enum class election_type : int8_t {
  online,     // a clean election among the ISR (then the ELR)
  preferred,  // as online, trying the first replica first (ElectLeaders PREFERRED, leader rebalancing)
  unclean,    // as online, then any acceptable replica (unclean.leader.election.enable, ElectLeaders UNCLEAN)
};

struct partition_change_request {
  uuid topic_id;
  std::vector<int32_t> target_isr;
  // Whether a replica may lead: registered, unfenced, not in controlled shutdown (with the exceptions the
  // caller makes for a broker being fenced or unfenced).
  std::function<bool(int32_t)> acceptable_leader;
  int32_t min_insync_replicas = 1;  // effective (capped at the replication factor)
  bool elr_enabled = true;
  election_type election = election_type::online;
  // Replicas that registered again after an unclean shutdown: never added to the ELR.
  std::vector<int32_t> unclean_shutdown_replicas;
  // The leader recovery state to set (AlterPartition carries it); nullopt: unchanged.
  std::optional<int8_t> target_leader_recovery_state;
  // A reassignment (KIP-455) to start or revert: the replica set and its adding / removing parts; nullopt:
  // the partition's own. Once every replica of replicas - removing is in the target ISR the reassignment
  // completes in the same change.
  std::optional<std::vector<int32_t>> target_replicas;
  std::optional<std::vector<int32_t>> target_adding;
  std::optional<std::vector<int32_t>> target_removing;
};

struct partition_change {
  std::optional<protocol::partition_change_record> record;  // nullopt: nothing changes
  int32_t leader = -1;                                      // the leader after the change
  // unclean.leader.election.enable (or ElectLeaders UNCLEAN) let a replica outside the ISR and ELR lead:
  // records only the old ISR had are lost.
  bool unclean = false;
  bool from_elr = false;                // the leader came from the ELR
  bool from_last_known_leader = false;  // the last known leader came back to an empty ISR and ELR (KIP-966)
  bool reassignment_completed = false;  // the replicas became the reassignment's target
};

partition_change build_partition_change(const metadata::partition_state& partition,
                                        const partition_change_request& request);

}  // namespace mala::controller
