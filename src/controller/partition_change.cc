#include "mala/controller/partition_change.h"

#include <algorithm>

#include "mala/metadata/metadata_delta.h"

namespace mala::controller {
namespace {

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// The replicas in `keep` and not in `drop`, in replica order (only replicas: one a reassignment removes
// drops out), without duplicates.
std::vector<int32_t> ordered_set(const std::vector<int32_t>& replicas, const std::vector<int32_t>& keep,
                                 const std::vector<int32_t>& drop) {
  std::vector<int32_t> out;
  for (int32_t r : replicas)
    if (contains(keep, r) && !contains(drop, r) && !contains(out, r)) out.push_back(r);
  return out;
}

std::vector<int32_t> joined(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

partition_change build_partition_change(const metadata::partition_state& partition,
                                        const partition_change_request& request) {
  std::vector<int32_t> target_isr = request.target_isr;
  std::vector<int32_t> target_elr = partition.eligible_leader_replicas;
  std::vector<int32_t> target_replicas =
      request.target_replicas ? *request.target_replicas : partition.replicas;
  std::vector<int32_t> target_adding =
      request.target_adding ? *request.target_adding : partition.adding_replicas;
  std::vector<int32_t> target_removing =
      request.target_removing ? *request.target_removing : partition.removing_replicas;
  const auto acceptable = [&](int32_t r) { return r >= 0 && request.acceptable_leader(r); };

  // A reassignment completes once every replica of the target is in the ISR (Kafka's
  // PartitionReassignmentReplicas.maybeCompleteReassignment): the replicas become the target and the ISR
  // drops the replicas being removed.
  partition_change out;
  if (!target_adding.empty() || !target_removing.empty()) {
    std::vector<int32_t> target;
    for (int32_t r : target_replicas)
      if (!contains(target_removing, r)) target.push_back(r);
    const bool all_in_sync = !target.empty() && std::all_of(target.begin(), target.end(), [&](int32_t r) {
      return contains(target_isr, r);
    });
    if (all_in_sync) {
      std::vector<int32_t> isr;
      for (int32_t r : target_isr)
        if (contains(target, r)) isr.push_back(r);
      target_isr = std::move(isr);
      target_replicas = std::move(target);
      target_adding.clear();
      target_removing.clear();
      out.reassignment_completed = true;
    }
  }
  // Elections and the ELR follow the replicas the partition is going to have.
  metadata::partition_state partition_after = partition;
  partition_after.replicas = target_replicas;

  // The ELR: emptied while the ISR is big enough; below min ISR it gains the members leaving the ISR,
  // except those that shut down uncleanly (their log may have lost its tail).
  if (request.elr_enabled) {
    if (static_cast<int32_t>(target_isr.size()) >= request.min_insync_replicas) {
      target_elr.clear();
    } else {
      target_elr = ordered_set(partition_after.replicas, joined(target_elr, partition.isr),
                               joined(target_isr, request.unclean_shutdown_replicas));
    }
  }

  const auto valid_new_leader = [&](int32_t r) {
    return (contains(target_isr, r) || (target_isr.empty() && contains(target_elr, r))) && acceptable(r);
  };
  // The last known leader: the leader the partition had when its ISR became empty, tried when neither
  // the ISR nor the ELR has anyone (Kafka's last known leader in balanced recovery). Its ISR is forced to
  // it alone, as for an unclean election, but no out-of-sync replica is chosen.
  const auto last_known_leader = [&]() -> int32_t {
    if (!request.elr_enabled || !target_isr.empty() || !target_elr.empty()) return metadata::no_leader;
    if (partition.last_known_elr.size() != 1 || !acceptable(partition.last_known_elr.front())) {
      return metadata::no_leader;
    }
    return partition.last_known_elr.front();
  };
  int32_t elected = metadata::no_leader;
  bool unclean = false;
  bool last_known = false;
  if (request.election == election_type::preferred && !partition_after.replicas.empty() &&
      valid_new_leader(partition_after.replicas.front())) {
    elected = partition_after.replicas.front();
  } else if (valid_new_leader(partition.leader)) {
    elected = partition.leader;
  } else if (auto found = std::find_if(partition_after.replicas.begin(), partition_after.replicas.end(),
                                       valid_new_leader);
             found != partition_after.replicas.end()) {
    elected = *found;
  } else if (int32_t last = last_known_leader(); last != metadata::no_leader) {
    elected = last;
    last_known = true;
  } else if (request.election == election_type::unclean) {
    auto any = std::find_if(partition_after.replicas.begin(), partition_after.replicas.end(), acceptable);
    if (any != partition_after.replicas.end()) {
      elected = *any;
      unclean = true;
    }
  }

  protocol::partition_change_record record;
  record.topic_id = request.topic_id;
  record.partition_id = partition.partition;
  if (elected != partition.leader) {
    if (contains(target_elr, elected)) {
      // An ELR member becomes leader: it is the whole ISR now.
      target_isr = {elected};
      std::erase(target_elr, elected);
      out.from_elr = true;
    }
    record.leader = elected;
    if (unclean || last_known) {
      // The ISR is forced to the new leader alone: whatever the others had beyond it may be lost.
      record.isr = std::vector<int32_t>{elected};
      if (partition.leader_recovery_state != metadata::leader_recovering) {
        record.leader_recovery_state = metadata::leader_recovering;
      }
    }
  }
  out.leader = elected;
  out.unclean = unclean;
  out.from_last_known_leader = last_known;

  // An unclean election (it set the ISR already) or ELR off: no ELR at all.
  if (record.isr || !request.elr_enabled) target_elr.clear();
  if (target_elr != partition.eligible_leader_replicas) record.eligible_leader_replicas = target_elr;
  // Without the ELR an empty ISR is never written: the last member stays, to be elected when it returns.
  if (!record.isr && (!target_isr.empty() || request.elr_enabled) && target_isr != partition.isr) {
    record.isr = target_isr;
  }
  // The last known leader is set when the ISR first becomes empty, and cleared once there is a leader.
  const bool will_lead = elected != metadata::no_leader;
  if (request.elr_enabled && record.isr && record.isr->empty() && partition.leader != metadata::no_leader &&
      partition.last_known_elr != std::vector<int32_t>{partition.leader}) {
    record.last_known_elr = std::vector<int32_t>{partition.leader};
  } else if (will_lead && !partition.last_known_elr.empty()) {
    record.last_known_elr = std::vector<int32_t>{};
  }
  // The replica set: a removed replica must see a new leader epoch (Kafka's
  // triggerLeaderEpochBumpForReplicaReassignmentIfNeeded).
  if (target_replicas != partition.replicas) {
    record.replicas = target_replicas;
    const bool all_kept = std::all_of(partition.replicas.begin(), partition.replicas.end(),
                                      [&](int32_t r) { return contains(target_replicas, r); });
    if (!all_kept && record.leader == metadata::no_leader_change) record.leader = partition.leader;
  }
  if (target_adding != partition.adding_replicas) record.adding_replicas = target_adding;
  if (target_removing != partition.removing_replicas) record.removing_replicas = target_removing;
  if (!unclean && !last_known && request.target_leader_recovery_state &&
      *request.target_leader_recovery_state != partition.leader_recovery_state) {
    record.leader_recovery_state = *request.target_leader_recovery_state;
  }

  const bool changed = record.leader != metadata::no_leader_change || record.isr || record.replicas ||
                       record.adding_replicas || record.removing_replicas ||
                       record.eligible_leader_replicas || record.last_known_elr ||
                       record.leader_recovery_state != metadata::no_leader_recovery_state_change;
  if (changed) out.record = std::move(record);
  return out;
}

}  // namespace mala::controller
