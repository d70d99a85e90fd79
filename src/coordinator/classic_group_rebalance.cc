// The rebalance of a classic group (GroupMetadataManager's classic group methods): member sessions, the join
// phase (with the initial rebalance delay), the sync phase and its expiry, the propagation of the leader's
// assignment, and the group's GroupMetadata records. Part of classic_group_manager (classic_group_manager.h).
#include <algorithm>
#include <set>

#include "classic_group_manager.h"
#include "mala/common/logging.h"

namespace mala::coordinator {

namespace {
namespace proto = mala::protocol;
using state = classic_group_state;
}  // namespace

proto::join_group_response classic_group_manager::current_generation_join_response(
    const classic_group& g, const std::string& member_id) {
  proto::join_group_response r;
  r.error_code = to_wire(error_code::none);
  if (g.is_leader(member_id)) r.members = g.current_member_metadata();
  r.member_id = member_id;
  r.generation_id = g.generation_id();
  r.protocol_name = g.protocol_name();
  r.protocol_type = g.protocol_type();
  r.leader = g.leader_id().value_or("");
  r.skip_assignment = false;
  return r;
}

std::string classic_group_manager::group_prefix(const std::string& group) {
  std::string k = group;
  k.push_back('\0');
  return k;
}
std::string classic_group_manager::heartbeat_key(const std::string& group, const std::string& member) {
  return group_prefix(group) + "heartbeat" + '\0' + member;
}
std::string classic_group_manager::join_key(const std::string& group) {
  return group_prefix(group) + "join";
}
std::string classic_group_manager::sync_key(const std::string& group) {
  return group_prefix(group) + "sync";
}

proto::group_metadata_value classic_group_manager::metadata_value(const classic_group& g,
                                                                  const assignment_map* assignment) const {
  proto::group_metadata_value v;
  v.protocol_type = g.protocol_type().value_or("");
  v.generation = g.generation_id();
  v.protocol = g.protocol_name();
  v.leader = g.leader_id();
  v.current_state_timestamp = g.current_state_timestamp_or_default();
  for (const auto& [id, m] : g.members()) {
    auto& mm = v.members.emplace_back();
    mm.member_id = id;
    mm.group_instance_id = m.group_instance_id;
    mm.client_id = m.client_id;
    mm.client_host = m.client_host;
    mm.rebalance_timeout = m.rebalance_timeout_ms;
    mm.session_timeout = m.session_timeout_ms;
    if (g.protocol_name()) {
      if (const auto* md = m.metadata(*g.protocol_name())) mm.subscription = *md;
    }
    if (assignment) {
      auto it = assignment->find(id);
      if (it != assignment->end()) mm.assignment = it->second;
    } else {
      mm.assignment = m.assignment;
    }
  }
  return v;
}

void classic_group_manager::write_group_metadata(const classic_group& g, proto::group_metadata_value value) {
  const std::string id = g.group_id();
  _runtime.write(_runtime.partition_of(id), {group_metadata_record(id, value)}, [this, id](error_code e) {
    if (e != error_code::none) {
      _runtime.log().warn("failed to write the metadata of group {}: {}", id, error_name(e));
    }
  });
}

void classic_group_manager::schedule_heartbeat(classic_group& g, const std::string& member_id,
                                               int64_t timeout_ms) {
  const std::string gid = g.group_id();
  const uint64_t serial = find_slot(gid)->serial;
  _runtime.timers().schedule(
      heartbeat_key(gid, member_id), _runtime.now() + timeout_ms,
      [this, gid, member_id, serial] { expire_member_heartbeat(gid, serial, member_id); });
}

void classic_group_manager::reschedule_heartbeat(classic_group& g, const classic_group_member& m) {
  schedule_heartbeat(g, m.member_id, m.session_timeout_ms);
}

void classic_group_manager::expire_member_heartbeat(const std::string& gid, uint64_t serial,
                                                    const std::string& member_id) {
  auto* g = group_if(gid, serial);
  if (!g || g->in_state(state::dead)) return;
  if (g->is_pending_member(member_id)) {
    _runtime.log().info("pending member {} of group {} removed after its session timeout", member_id, gid);
    g->remove(member_id);
    if (g->in_state(state::preparing_rebalance) && g->has_all_members_joined()) complete_join(*g);
    return;
  }
  auto* m = g->member(member_id);
  if (!m || m->has_satisfied_heartbeat()) return;
  _runtime.log().info("member {} of group {} failed (session timeout), removing it", member_id, gid);
  remove_member_and_update_group(*g, member_id);
}

void classic_group_manager::remove_member(classic_group& g, const std::string& member_id) {
  if (auto* m = g.member(member_id)) {
    g.complete_join(*m, join_error_response(std::string(unknown_member_id), error_code::unknown_member_id));
    g.complete_sync(*m, sync_error_response(error_code::unknown_member_id));
  }
  g.remove(member_id);
  _runtime.timers().cancel(heartbeat_key(g.group_id(), member_id));
}

void classic_group_manager::remove_member_and_update_group(classic_group& g, const std::string& member_id) {
  remove_member(g, member_id);
  if (g.in_state(state::stable) || g.in_state(state::completing_rebalance)) {
    maybe_prepare_rebalance_or_complete_join(g);
  } else if (g.in_state(state::preparing_rebalance) && g.has_all_members_joined()) {
    complete_join(g);
  }
}

void classic_group_manager::maybe_prepare_rebalance_or_complete_join(classic_group& g) {
  if (g.can_rebalance()) {
    prepare_rebalance(g);
  } else {
    maybe_complete_join_phase(g);
  }
}

void classic_group_manager::prepare_rebalance(classic_group& g) {
  if (g.in_state(state::completing_rebalance)) {
    reset_and_propagate_assignment_with_error(g, error_code::rebalance_in_progress);
  }
  remove_sync_expiration(g);
  const bool initial = g.in_state(state::empty);
  const std::string gid = g.group_id();
  const uint64_t serial = find_slot(gid)->serial;
  if (initial) {
    // A new group waits group.initial.rebalance.delay.ms for more members, extended while they keep
    // coming, up to the rebalance timeout.
    const int32_t delay = _config.initial_rebalance_delay_ms;
    const int32_t remaining = std::max(g.rebalance_timeout_ms() - delay, 0);
    _runtime.timers().schedule(join_key(gid), _runtime.now() + delay, [this, gid, serial, delay, remaining] {
      try_complete_initial_rebalance(gid, serial, delay, remaining);
    });
  }
  g.transition_to(state::preparing_rebalance, _runtime.now());
  _runtime.log().info("preparing to rebalance group {} with old generation {}", gid, g.generation_id());
  if (!initial) maybe_complete_join_else_schedule(g);
}

void classic_group_manager::maybe_complete_join_else_schedule(classic_group& g) {
  if (g.has_all_members_joined()) {
    complete_join(g);
    return;
  }
  const std::string gid = g.group_id();
  const uint64_t serial = find_slot(gid)->serial;
  _runtime.timers().schedule(join_key(gid), _runtime.now() + g.rebalance_timeout_ms(), [this, gid, serial] {
    if (auto* group = group_if(gid, serial)) complete_join(*group);
  });
}

void classic_group_manager::try_complete_initial_rebalance(const std::string& gid, uint64_t serial,
                                                           int32_t delay, int32_t remaining) {
  auto* g = group_if(gid, serial);
  if (!g) return;
  if (g->new_member_added() && remaining != 0) {
    g->set_new_member_added(false);
    const int32_t new_delay = std::min(_config.initial_rebalance_delay_ms, remaining);
    const int32_t new_remaining = std::max(remaining - delay, 0);
    _runtime.timers().schedule(join_key(gid), _runtime.now() + new_delay,
                               [this, gid, serial, new_delay, new_remaining] {
                                 try_complete_initial_rebalance(gid, serial, new_delay, new_remaining);
                               });
    return;
  }
  complete_join(*g);
}

void classic_group_manager::maybe_complete_join_phase(classic_group& g) {
  if (!g.in_state(state::preparing_rebalance)) return;
  if (g.previous_state() == state::empty) return;  // the initial rebalance completes on its timer
  if (!g.has_all_members_joined()) return;
  complete_join(g);
}

void classic_group_manager::complete_join(classic_group& g) {
  const std::string gid = g.group_id();
  _runtime.timers().cancel(join_key(gid));
  // Dynamic members that did not rejoin in time are out; static ones keep their place.
  for (const auto& id : g.not_yet_rejoined_members()) {
    const auto* m = g.member(id);
    if (m && !m->is_static()) {
      _runtime.log().info("group {}: member {} did not rejoin in time, removing it", gid, id);
      remove_member(g, id);
    }
  }
  if (g.in_state(state::dead)) return;
  if (!g.maybe_elect_new_joined_leader() && !g.members().empty()) {
    // Nobody rejoined: try again after another rebalance timeout, until sessions expire the members.
    _runtime.log().warn("group {} could not complete its rebalance because no member rejoined", gid);
    const uint64_t serial = find_slot(gid)->serial;
    _runtime.timers().schedule(join_key(gid), _runtime.now() + g.rebalance_timeout_ms(), [this, gid, serial] {
      if (auto* group = group_if(gid, serial)) complete_join(*group);
    });
    return;
  }
  g.init_next_generation(_runtime.now());
  if (g.in_state(state::empty)) {
    _runtime.log().info("group {} with generation {} is now empty", gid, g.generation_id());
    write_group_metadata(g, metadata_value(g, nullptr));
    return;
  }
  _runtime.log().info("stabilized group {} generation {} with {} member(s)", gid, g.generation_id(),
                      g.members().size());
  std::vector<std::string> ids;
  for (const auto& [id, m] : g.members()) ids.push_back(id);
  for (const auto& id : ids) {
    auto* m = g.member(id);
    if (!m) continue;
    g.complete_join(*m, current_generation_join_response(g, id));
    reschedule_heartbeat(g, *m);
    m->is_new = false;
    g.add_pending_sync_member(id);
  }
  schedule_pending_sync(g);
}

void classic_group_manager::schedule_pending_sync(classic_group& g) {
  const std::string gid = g.group_id();
  const uint64_t serial = find_slot(gid)->serial;
  const int32_t generation = g.generation_id();
  _runtime.timers().schedule(
      sync_key(gid), _runtime.now() + g.rebalance_timeout_ms(),
      [this, gid, serial, generation] { expire_pending_sync(gid, serial, generation); });
}

void classic_group_manager::expire_pending_sync(const std::string& gid, uint64_t serial, int32_t generation) {
  auto* g = group_if(gid, serial);
  if (!g || g->generation_id() != generation) return;
  if (!(g->in_state(state::completing_rebalance) || g->in_state(state::stable))) return;
  if (g->has_received_sync_from_all_members()) return;
  const std::set<std::string> late = g->pending_sync_members();
  for (const auto& id : late) {
    _runtime.log().info("group {}: member {} sent no SyncGroup in time, removing it", gid, id);
    remove_member(*g, id);
  }
  prepare_rebalance(*g);
}

void classic_group_manager::remove_sync_expiration(classic_group& g) {
  g.clear_pending_sync_members();
  _runtime.timers().cancel(sync_key(g.group_id()));
}

void classic_group_manager::remove_pending_sync_member(classic_group& g, const std::string& member_id) {
  g.remove_pending_sync_member(member_id);
  if (g.in_state(state::completing_rebalance) || g.in_state(state::stable)) {
    if (g.has_received_sync_from_all_members()) _runtime.timers().cancel(sync_key(g.group_id()));
  } else {
    _runtime.timers().cancel(sync_key(g.group_id()));
  }
}

void classic_group_manager::propagate_assignment(classic_group& g, error_code e) {
  for (auto& [id, m] : g.members_for_update()) {
    proto::sync_group_response r;
    r.error_code = to_wire(e);
    if (e == error_code::none) {
      r.protocol_name = g.protocol_name();
      r.protocol_type = g.protocol_type();
    } else {
      r.protocol_name = std::nullopt;
      r.protocol_type = std::nullopt;
    }
    r.assignment = m.assignment;
    // The session restarts once the member has its answer (an expiry while it waited was ignored).
    if (g.complete_sync(m, std::move(r))) reschedule_heartbeat(g, m);
  }
}

void classic_group_manager::reset_and_propagate_assignment_with_error(classic_group& g, error_code e) {
  for (auto& [id, m] : g.members_for_update()) {
    m.assignment.clear();
  }
  propagate_assignment(g, e);
}

void classic_group_manager::set_and_propagate_assignment(classic_group& g, const assignment_map& assignment) {
  for (auto& [id, m] : g.members_for_update()) {
    auto it = assignment.find(id);
    m.assignment = it == assignment.end() ? std::vector<uint8_t>{} : it->second;
  }
  propagate_assignment(g, error_code::none);
}

}  // namespace mala::coordinator
