#include "mala/replication/replica_rules.h"

#include <algorithm>

namespace mala::replication {

int32_t effective_min_isr(int32_t min_insync_replicas, size_t replication_factor) {
  auto rf = static_cast<int32_t>(std::max<size_t>(replication_factor, 1));
  return std::min(min_insync_replicas, rf);
}

bool is_caught_up(const follower_state& follower, int64_t leader_log_end_offset, int64_t now_ms,
                  int64_t replica_lag_time_max_ms) {
  return follower.log_end_offset >= leader_log_end_offset ||
         now_ms - follower.last_caught_up_time_ms <= replica_lag_time_max_ms;
}

follower_state after_follower_fetch(const follower_state& before, int64_t fetch_offset,
                                    int64_t follower_log_start_offset, int64_t fetch_time_ms,
                                    int64_t leader_end_offset) {
  follower_state after = before;
  if (fetch_offset >= leader_end_offset) {
    after.last_caught_up_time_ms = std::max(before.last_caught_up_time_ms, fetch_time_ms);
  } else if (fetch_offset >= before.last_fetch_leader_log_end_offset) {
    // It now has what the leader had at its previous fetch: it was caught up as of that fetch.
    after.last_caught_up_time_ms = std::max(before.last_caught_up_time_ms, before.last_fetch_time_ms);
  }
  after.log_end_offset = fetch_offset;
  after.log_start_offset = follower_log_start_offset;
  after.last_fetch_leader_log_end_offset =
      std::max(leader_end_offset, before.last_fetch_leader_log_end_offset);
  after.last_fetch_time_ms = fetch_time_ms;
  return after;
}

follower_state reset_on_leader_change(const follower_state& before, int32_t replica_id, bool new_leader,
                                      bool in_isr, int64_t now_ms, int64_t leader_end_offset) {
  follower_state after;
  after.replica_id = replica_id;
  after.isr_eligible = before.isr_eligible;
  after.last_caught_up_time_ms = in_isr ? now_ms : 0;
  if (new_leader) return after;
  after.log_end_offset = before.log_end_offset;
  after.log_start_offset = before.log_start_offset;
  after.last_fetch_leader_log_end_offset = leader_end_offset;
  // An out-of-sync follower must fetch again before it can rejoin the ISR.
  after.last_fetch_time_ms = in_isr ? now_ms : 0;
  return after;
}

int64_t next_high_watermark(const high_watermark_inputs& in) {
  if (static_cast<int64_t>(in.isr.size()) < in.min_insync_replicas) return in.high_watermark;
  int64_t candidate = in.leader_log_end_offset;
  for (const auto& f : in.followers) {
    bool in_isr = std::find(in.isr.begin(), in.isr.end(), f.replica_id) != in.isr.end();
    bool about_to_join = !in_isr && f.isr_eligible &&
                         is_caught_up(f, in.leader_log_end_offset, in.now_ms, in.replica_lag_time_max_ms);
    if ((in_isr || about_to_join) && f.log_end_offset < candidate) candidate = f.log_end_offset;
  }
  return std::max(candidate, in.high_watermark);
}

error_code check_acks_before_append(int16_t acks, size_t isr_size, int32_t min_insync_replicas) {
  if (acks != -1 && acks != 0 && acks != 1) return error_code::invalid_required_acks;
  if (acks == -1 && static_cast<int64_t>(isr_size) < min_insync_replicas)
    return error_code::not_enough_replicas;
  return error_code::none;
}

ack_completion check_enough_replicas_reach_offset(int64_t high_watermark, int64_t required_offset,
                                                  size_t isr_size, int32_t min_insync_replicas) {
  if (high_watermark < required_offset) return {false, error_code::none};
  if (static_cast<int64_t>(isr_size) < min_insync_replicas) {
    return {true, error_code::not_enough_replicas_after_append};
  }
  return {true, error_code::none};
}

error_code check_current_leader_epoch(std::optional<int32_t> request_epoch, int32_t local_epoch) {
  if (!request_epoch || *request_epoch == no_leader_epoch) return error_code::none;
  if (local_epoch > *request_epoch) return error_code::fenced_leader_epoch;
  if (local_epoch < *request_epoch) return error_code::unknown_leader_epoch;
  return error_code::none;
}

fetch_bound fetch_bound_for(int32_t replica_id, isolation_level isolation) {
  if (replica_id >= 0) return fetch_bound::log_end;
  return isolation == isolation_level::read_committed ? fetch_bound::last_stable_offset
                                                      : fetch_bound::high_watermark;
}

int64_t low_watermark(int64_t leader_log_start_offset, std::span<const follower_state> followers) {
  int64_t low = leader_log_start_offset;
  for (const auto& f : followers) {
    if (f.isr_eligible) low = std::min(low, f.log_start_offset);
  }
  return low;
}

}  // namespace mala::replication
