// The classic groups' Heartbeat and LeaveGroup, their conversion to and from consumer groups, their side
// of the offset and administration requests, and their load. JoinGroup and SyncGroup are in
// classic_group_join.cc, the rebalance in classic_group_rebalance.cc; the interface in
// classic_group_manager.h.
#include "classic_group_manager.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <utility>

#include "consumer_group_manager.h"
#include "mala/common/logging.h"
#include "mala/coordinator/consumer_protocol.h"

namespace mala::coordinator {

namespace {

namespace proto = mala::protocol;
using state = classic_group_state;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

classic_group_manager::classic_group_manager(coordinator_runtime& runtime)
    : _runtime(runtime), _config(runtime.config()) {}

const classic_group* classic_group_manager::find(const std::string& group_id) const {
  const auto* slot = find_slot(group_id);
  return slot ? &slot->group : nullptr;
}

void classic_group_manager::create_simple_group(const std::string& group_id) {
  create_group(group_id);
}

// --- Conversion between the two kinds of group (consumer_group_manager.h)

std::optional<bool> classic_group_manager::group_empty(const std::string& group_id) const {
  const auto* slot = find_slot(group_id);
  if (!slot || slot->group.in_state(state::dead)) return std::nullopt;
  return slot->group.is_empty();
}

void classic_group_manager::drop_empty_group(const std::string& group_id,
                                             std::vector<coordinator_record>& records) {
  records.push_back(group_metadata_tombstone(group_id));
  remove_group(group_id);
}

void classic_group_manager::drop_group(const std::string& group_id,
                                       std::vector<coordinator_record>& records) {
  if (auto* slot = find_slot(group_id)) {
    for (auto& [mid, m] : slot->group.members_for_update()) {
      slot->group.complete_join(m, join_error_response(mid, error_code::rebalance_in_progress));
      slot->group.complete_sync(m, sync_error_response(error_code::rebalance_in_progress));
    }
  }
  records.push_back(group_metadata_tombstone(group_id));
  remove_group(group_id);
}

std::optional<classic_group_snapshot> classic_group_manager::snapshot_for_upgrade(
    const std::string& id) const {
  const group_slot* slot = find_slot(id);
  if (!slot) return std::nullopt;
  const classic_group& g = slot->group;
  if (g.in_state(state::dead) || g.is_empty() || !g.uses_consumer_protocol() ||
      g.pending_member_count() > 0) {
    return std::nullopt;
  }
  classic_group_snapshot out;
  out.group_id = id;
  out.generation = g.generation_id();
  out.protocol_name = g.protocol_name().value_or("");
  for (const auto& [mid, m] : g.members()) {
    if (m.protocol_type != consumer_protocol_type || m.protocols.empty()) return std::nullopt;
    auto& sm = out.members.emplace_back();
    sm.member_id = mid;
    sm.instance_id = m.group_instance_id;
    sm.client_id = m.client_id;
    sm.client_host = m.client_host;
    sm.session_timeout_ms = m.session_timeout_ms;
    sm.rebalance_timeout_ms = m.rebalance_timeout_ms;
    for (const auto& p : m.protocols) sm.protocols.push_back({p.name, p.metadata});
    sm.assignment = m.assignment;
  }
  return out;
}

void classic_group_manager::create_from_snapshot(const classic_group_snapshot& snapshot,
                                                 std::vector<coordinator_record>& records) {
  const std::string& id = snapshot.group_id;
  remove_group(id);
  auto [it, inserted] = _groups.try_emplace(
      id,
      group_slot{_runtime.partition_of(id), _next_serial++,
                 classic_group(id, state::stable, snapshot.generation, std::string(consumer_protocol_type),
                               std::nullopt, std::nullopt, _runtime.now())});
  (void)inserted;
  classic_group& g = it->second.group;
  for (const auto& sm : snapshot.members) {
    classic_group_member m;
    m.member_id = sm.member_id;
    m.group_instance_id = sm.instance_id;
    m.client_id = sm.client_id;
    m.client_host = sm.client_host;
    m.session_timeout_ms = sm.session_timeout_ms;
    m.rebalance_timeout_ms = sm.rebalance_timeout_ms;
    m.protocol_type = std::string(consumer_protocol_type);
    for (const auto& p : sm.protocols) m.protocols.push_back({p.name, p.metadata});
    m.assignment = sm.assignment;
    g.add(std::move(m), {});
  }
  g.set_protocol_name(g.select_protocol());
  g.update_subscribed_topics();
  records.push_back(group_metadata_record(id, metadata_value(g, nullptr)));
  for (const auto& [mid, m] : g.members()) reschedule_heartbeat(g, m);
  if (snapshot.rebalance) prepare_rebalance(g);
}

classic_group_manager::group_slot* classic_group_manager::find_slot(const std::string& group_id) {
  auto it = _groups.find(group_id);
  return it == _groups.end() ? nullptr : &it->second;
}

const classic_group_manager::group_slot* classic_group_manager::find_slot(const std::string& group_id) const {
  auto it = _groups.find(group_id);
  return it == _groups.end() ? nullptr : &it->second;
}

classic_group* classic_group_manager::group_if(const std::string& group_id, uint64_t serial) {
  auto* slot = find_slot(group_id);
  return slot && slot->serial == serial ? &slot->group : nullptr;
}

classic_group_manager::group_slot& classic_group_manager::create_group(const std::string& group_id) {
  auto [it, inserted] =
      _groups.try_emplace(group_id, group_slot{_runtime.partition_of(group_id), _next_serial++,
                                               classic_group(group_id, state::empty, _runtime.now())});
  (void)inserted;
  return it->second;
}

void classic_group_manager::remove_group(const std::string& group_id) {
  _runtime.timers().cancel_prefix(group_prefix(group_id));
  _groups.erase(group_id);
}

proto::heartbeat_response classic_group_manager::heartbeat(const proto::heartbeat_request& req) {
  proto::heartbeat_response r;
  auto err = [&](error_code e) {
    r.error_code = to_wire(e);
    return r;
  };
  group_slot* slot = find_slot(req.group_id);
  if (!slot) return err(error_code::unknown_member_id);
  classic_group& g = slot->group;
  if (g.in_state(state::dead)) return err(error_code::coordinator_not_available);
  if (auto e = g.validate_member(req.member_id, req.group_instance_id); e != error_code::none) return err(e);
  if (req.generation_id != g.generation_id()) return err(error_code::illegal_generation);
  switch (g.state()) {
    case state::empty:
      return err(error_code::unknown_member_id);
    case state::preparing_rebalance:
      reschedule_heartbeat(g, *g.member(req.member_id));
      return err(error_code::rebalance_in_progress);
    case state::completing_rebalance:
    case state::stable:
      // Consumers may heartbeat between their JoinGroup and SyncGroup answers.
      reschedule_heartbeat(g, *g.member(req.member_id));
      return err(error_code::none);
    case state::dead:
      break;
  }
  return err(error_code::coordinator_not_available);
}

proto::leave_group_response classic_group_manager::leave_group(const proto::leave_group_request& req) {
  proto::leave_group_response resp;
  const std::string& gid = req.group_id;
  auto member_answer = [&](const proto::leave_group_request::member_identity& m, error_code e) {
    auto& a = resp.members.emplace_back();
    a.member_id = m.member_id;
    a.group_instance_id = m.group_instance_id;
    a.error_code = to_wire(e);
  };
  group_slot* slot = find_slot(gid);
  if (!slot) {
    for (const auto& m : req.members) member_answer(m, error_code::unknown_member_id);
    return resp;
  }
  classic_group& g = slot->group;
  if (g.in_state(state::dead)) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
    return resp;
  }
  bool any_left = false;
  for (const auto& m : req.members) {
    if (m.member_id.empty()) {
      // Administrative removal by group.instance.id (kafka-consumer-groups --delete ... of static members).
      const std::string* existing = m.group_instance_id ? g.static_member_id(*m.group_instance_id) : nullptr;
      if (existing) {
        const std::string id = *existing;
        _runtime.log().info("group {}: static member {} removed by LeaveGroup", gid, id);
        remove_member(g, id);
        member_answer(m, error_code::none);
        any_left = true;
      } else {
        member_answer(m, error_code::unknown_member_id);
      }
    } else if (g.is_pending_member(m.member_id)) {
      g.remove(m.member_id);
      _runtime.timers().cancel(heartbeat_key(gid, m.member_id));
      member_answer(m, error_code::none);
      any_left = true;
    } else if (auto e = g.validate_member(m.member_id, m.group_instance_id); e != error_code::none) {
      member_answer(m, e);
    } else {
      _runtime.log().info("group {}: member {} left ({})", gid, m.member_id,
                          m.reason.value_or("no reason given"));
      remove_member(g, m.member_id);
      member_answer(m, error_code::none);
      any_left = true;
    }
  }
  if (any_left) {
    if (g.in_state(state::stable) || g.in_state(state::completing_rebalance)) {
      maybe_prepare_rebalance_or_complete_join(g);
    } else if (g.in_state(state::preparing_rebalance)) {
      maybe_complete_join_phase(g);
    }
  }
  return resp;
}

namespace {

// Whether the member may commit for the classic group at its generation (or without one while it is empty):
// ClassicGroup.validateOffsetCommit. Transactional commits may come without member or generation
// (TxnOffsetCommit before v3) whatever the group's state, and are not held back by a rebalance.
error_code validate_offset_commit(const classic_group& g, const std::string& member_id,
                                  const std::optional<std::string>& group_instance_id, int32_t generation,
                                  bool transactional) {
  if (g.in_state(state::dead)) return error_code::coordinator_not_available;
  // Generation -1: the admin client or a consumer without group management; fine while the group is empty.
  if (generation < 0 && g.in_state(state::empty)) return error_code::none;
  if (generation >= 0 || !member_id.empty() || group_instance_id) {
    if (auto e = g.validate_member(member_id, group_instance_id); e != error_code::none) return e;
    if (generation != g.generation_id()) return error_code::illegal_generation;
  } else if (!transactional && !g.in_state(state::empty)) {
    return error_code::unknown_member_id;
  }
  // The member knows the new generation but the group has not settled: it will commit again after.
  if (!transactional && g.in_state(state::completing_rebalance)) return error_code::rebalance_in_progress;
  return error_code::none;
}

}  // namespace

error_code classic_group_manager::accept_offset_commit(const request_origin& origin,
                                                       const proto::offset_commit_request& req) {
  const std::string& gid = req.group_id;
  group_slot* slot = find_slot(gid);
  if (!slot) {
    // v9+ says what happened; older versions keep ILLEGAL_GENERATION, which their clients handle.
    if (req.generation_id_or_member_epoch >= 0)
      return origin.api_version >= 9 ? error_code::group_id_not_found : error_code::illegal_generation;
    // A "simple" group: offsets without membership (the admin client, assign()-based consumers).
    _runtime.log().info("group {}: created as a simple group by an offset commit", gid);
    slot = &create_group(gid);
  }
  classic_group& g = slot->group;
  if (auto e =
          validate_offset_commit(g, req.member_id, req.group_instance_id, req.generation_id_or_member_epoch,
                                 /*transactional=*/false);
      e != error_code::none)
    return e;
  // A commit keeps a classic member's session alive.
  if (g.in_state(state::stable) || g.in_state(state::preparing_rebalance)) {
    if (auto* m = g.member(req.member_id)) reschedule_heartbeat(g, *m);
  }
  return error_code::none;
}

error_code classic_group_manager::validate_txn_offset_commit(
    const proto::txn_offset_commit_request& req) const {
  const group_slot* slot = find_slot(req.group_id);
  // An unknown group with generation -1 becomes a simple group once the offsets are written.
  if (!slot) return req.generation_id_or_member_epoch < 0 ? error_code::none : error_code::illegal_generation;
  return validate_offset_commit(slot->group, req.member_id, req.group_instance_id,
                                req.generation_id_or_member_epoch,
                                /*transactional=*/true);
}

std::vector<proto::describe_groups_response::described_group> classic_group_manager::describe(
    const std::vector<std::string>& ids) const {
  std::vector<proto::describe_groups_response::described_group> out;
  for (const auto& id : ids) {
    auto& d = out.emplace_back();
    d.group_id = id;
    if (auto e = _runtime.partition_error(id); e != error_code::none) {
      d.error_code = to_wire(e);
      continue;
    }
    const group_slot* slot = find_slot(id);
    if (!slot || slot->group.in_state(state::dead)) {
      d.group_state = "Dead";
      continue;
    }
    const auto& g = slot->group;
    d.group_state = std::string(state_name(g.state()));
    d.protocol_type = g.protocol_type().value_or("");
    const bool stable = g.in_state(state::stable) && g.protocol_name();
    if (stable) d.protocol_data = *g.protocol_name();
    for (const auto& [member_id, m] : g.members()) {
      auto& dm = d.members.emplace_back();
      dm.member_id = member_id;
      dm.group_instance_id = m.group_instance_id;
      dm.client_id = m.client_id;
      dm.client_host = m.client_host;
      dm.member_assignment = m.assignment;
      if (stable) {
        if (const auto* md = m.metadata(*g.protocol_name())) dm.member_metadata = *md;
      }
    }
  }
  return out;
}

bool offsets_may_expire(const classic_group& g) {
  if (!g.protocol_type()) return true;  // simple group: each offset from its commit
  if (g.in_state(state::empty)) return true;
  // Stable consumers: offsets of topics they no longer subscribe to.
  return g.uses_consumer_protocol() && g.subscribed_topics() && g.in_state(state::stable);
}

int64_t expiration_base(const classic_group& g, const committed_offset& c) {
  if (g.protocol_type() && g.in_state(state::empty)) {
    // From the moment the group became empty (or the commit, for metadata without that timestamp).
    return g.current_state_timestamp().value_or(c.commit_timestamp_ms);
  }
  return c.commit_timestamp_ms;
}

// --- Offsets and administration

error_code classic_group_manager::validate_offset_delete(const std::string& group_id) const {
  const group_slot* slot = find_slot(group_id);
  if (!slot || slot->group.in_state(state::dead)) return error_code::group_id_not_found;
  const classic_group& g = slot->group;
  if ((g.in_state(state::stable) || g.in_state(state::preparing_rebalance) ||
       g.in_state(state::completing_rebalance)) &&
      !g.uses_consumer_protocol()) {
    return error_code::non_empty_group;
  }
  return error_code::none;
}

error_code classic_group_manager::validate_delete(const std::string& group_id) const {
  const group_slot* slot = find_slot(group_id);
  if (!slot || slot->group.in_state(state::dead)) return error_code::group_id_not_found;
  if (!slot->group.is_empty()) return error_code::non_empty_group;
  return error_code::none;
}

void classic_group_manager::list(const std::set<std::string>& states, const std::set<std::string>& types,
                                 std::vector<proto::list_groups_response::listed_group>& out) const {
  for (const auto& [id, slot] : _groups) {
    const auto& g = slot.group;
    if (g.in_state(state::dead)) continue;
    if (!states.empty() && !states.contains(lower(std::string(state_name(g.state()))))) continue;
    if (!types.empty() && !types.contains("classic")) continue;
    auto& l = out.emplace_back();
    l.group_id = id;
    l.protocol_type = g.protocol_type().value_or("");
    l.group_state = std::string(state_name(g.state()));
    l.group_type = "classic";
  }
}

// --- Load

void classic_group_manager::replay(int32_t partition, const group_metadata_entry& entry) {
  const std::string& gid = entry.key.group;
  if (!entry.value) {
    remove_group(gid);
    return;
  }
  const auto& v = *entry.value;
  classic_group g(
      gid, v.members.empty() ? state::empty : state::stable, v.generation,
      v.protocol_type.empty() ? std::nullopt : std::optional<std::string>(v.protocol_type), v.protocol,
      v.leader,
      v.current_state_timestamp == -1 ? std::nullopt : std::optional<int64_t>(v.current_state_timestamp));
  for (const auto& mm : v.members) {
    classic_group_member m;
    m.member_id = mm.member_id;
    m.group_instance_id = mm.group_instance_id;
    m.client_id = mm.client_id;
    m.client_host = mm.client_host;
    m.rebalance_timeout_ms = mm.rebalance_timeout == -1 ? mm.session_timeout : mm.rebalance_timeout;
    m.session_timeout_ms = mm.session_timeout;
    m.protocol_type = v.protocol_type;
    m.protocols.push_back({v.protocol.value_or(""), mm.subscription});
    m.assignment = mm.assignment;
    g.add(std::move(m), nullptr);
  }
  g.update_subscribed_topics();
  _runtime.timers().cancel_prefix(group_prefix(gid));
  _groups.erase(gid);
  _groups.emplace(gid, group_slot{partition, _next_serial++, std::move(g)});
}

size_t classic_group_manager::complete_loading(int32_t partition) {
  size_t loaded = 0;
  for (auto& [id, slot] : _groups) {
    if (slot.partition != partition) continue;
    ++loaded;
    auto& g = slot.group;
    for (const auto& [mid, m] : g.members()) reschedule_heartbeat(g, m);
    if (g.members().size() > static_cast<size_t>(_config.max_group_size)) {
      // group.max.size was lowered: a rebalance lets the members commit before some are left out.
      prepare_rebalance(g);
    }
  }
  return loaded;
}

void classic_group_manager::drop_partition(int32_t partition, error_code parked_error) {
  std::vector<std::string> ids;
  for (const auto& [id, slot] : _groups) {
    if (slot.partition == partition) ids.push_back(id);
  }
  for (const auto& id : ids) {
    auto& g = _groups.at(id).group;
    g.transition_to(state::dead, _runtime.now());
    // Whatever is parked learns that the coordinator moved (GroupMetadataManager.onUnloaded).
    for (auto& [mid, m] : g.members_for_update()) {
      g.complete_join(m, join_error_response(mid, parked_error));
      g.complete_sync(m, sync_error_response(parked_error));
    }
    remove_group(id);
  }
}

}  // namespace mala::coordinator
