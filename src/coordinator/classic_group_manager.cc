// The classic groups' requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), their conversion to and from
// consumer groups, their side of the offset and administration requests, and their load. The rebalance
// itself is in classic_group_rebalance.cc; the interface in classic_group_manager.h.
#include "classic_group_manager.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "consumer_group_manager.h"
#include "mala/common/logging.h"
#include "mala/coordinator/consumer_protocol.h"

namespace mala::coordinator {

namespace {

namespace proto = mala::protocol;
using state = classic_group_state;
using join_response = proto::join_group_response;

// UUID.randomUUID().toString(): what Kafka appends to a client id to make a member id.
std::string random_uuid(std::mt19937_64& rng) {
  uint64_t hi = rng();
  uint64_t lo = rng();
  hi = (hi & 0xFFFFFFFFFFFF0FFFULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;  // IETF variant
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xFFFF, hi & 0xFFFF,
                     lo >> 48, lo & 0xFFFFFFFFFFFFULL);
}

// Wraps a callback so that copies of it share one "already answered" flag: a parked JoinGroup may be answered
// through the member that holds it or through the operation that parked it, but only once.
template <typename T>
std::function<void(T)> once(std::function<void(T)> fn) {
  auto fired = std::make_shared<bool>(false);
  return [fn = std::move(fn), fired](T value) {
    if (*fired) return;
    *fired = true;
    fn(std::move(value));
  };
}

std::vector<member_protocol> protocols_of(const proto::join_group_request& req) {
  std::vector<member_protocol> out;
  out.reserve(req.protocols.size());
  for (const auto& p : req.protocols) out.push_back({p.name, p.metadata});
  return out;
}

// Whether the request's protocol type or name contradicts the group's (null on either side never does).
bool protocol_inconsistent(const std::optional<std::string>& requested,
                           const std::optional<std::string>& group) {
  return requested && group && *requested != *group;
}

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

bool classic_group_manager::accept_joining_member(const classic_group& g,
                                                  const std::string& member_id) const {
  const auto max = static_cast<size_t>(_config.max_group_size);
  switch (g.state()) {
    case state::empty:
    case state::dead:
      return true;
    case state::preparing_rebalance: {
      // Counting members awaiting their answer (not the group size, which may be above a lowered maximum)
      // lets the last members to rejoin be the ones left out.
      auto it = g.members().find(member_id);
      return (it != g.members().end() && it->second.is_awaiting_join()) || g.awaiting_join_count() < max;
    }
    case state::completing_rebalance:
    case state::stable:
      return g.has_member(member_id) || g.members().size() < max;
  }
  return false;
}

void classic_group_manager::join_group(const request_origin& origin, proto::join_group_request req,
                                       join_callback done) {
  const std::string& gid = req.group_id;
  const bool unknown = req.member_id.empty();
  group_slot* slot = find_slot(gid);
  const bool is_new_group = slot == nullptr;
  if (!slot) {
    // A JoinGroup with a member id for a group that does not exist (any more): the member must start over.
    if (!unknown) return done(join_error_response(req.member_id, error_code::unknown_member_id));
    slot = &create_group(gid);
  }
  const uint64_t serial = slot->serial;
  classic_group& g = slot->group;
  done = once(std::move(done));

  if (!accept_joining_member(g, req.member_id)) {
    if (g.has_member(req.member_id)) remove_member(g, req.member_id);
    g.remove(req.member_id);
    done(join_error_response(std::string(unknown_member_id), error_code::group_max_size_reached));
  } else if (unknown) {
    join_new_member(origin, req, g, done);
  } else {
    join_existing_member(origin, req, g, done);
  }

  if (is_new_group) {
    // The group exists from now on (a JoinGroup that only got MEMBER_ID_REQUIRED included): Kafka writes
    // an empty GroupMetadataValue so that the creation is in the log.
    if (auto* created = group_if(gid, serial)) {
      proto::group_metadata_value v;
      v.protocol_type = "";
      v.generation = 0;
      v.protocol = std::nullopt;
      v.leader = std::nullopt;
      v.current_state_timestamp = created->current_state_timestamp_or_default();
      write_group_metadata(*created, std::move(v));
    }
  }
}

void classic_group_manager::join_new_member(const request_origin& origin,
                                            const proto::join_group_request& req, classic_group& g,
                                            const join_callback& done) {
  if (g.in_state(state::dead)) {
    return done(join_error_response(std::string(unknown_member_id), error_code::coordinator_not_available));
  }
  const auto protocols = protocols_of(req);
  if (!g.supports_protocols(req.protocol_type, protocols)) {
    return done(join_error_response(std::string(unknown_member_id), error_code::inconsistent_group_protocol));
  }
  // ClassicGroup.generateMemberId: the group.instance.id (static) or the client id, then a random UUID.
  const std::string new_id =
      (req.group_instance_id ? *req.group_instance_id : origin.client_id) + "-" + random_uuid(_rng);
  if (req.group_instance_id) {
    if (const std::string* existing = g.static_member_id(*req.group_instance_id)) {
      _runtime.log().info(
          "static member {} of group {} rejoins with an unknown member id: replacing member {} by {}",
          *req.group_instance_id, g.group_id(), *existing, new_id);
      const std::string old_id = *existing;
      return update_static_member_then_rebalance_or_complete_join(origin, req, g, old_id, new_id, done);
    }
    return add_member_then_rebalance_or_complete_join(origin, req, g, new_id, done);
  }
  if (origin.api_version >= 4) {
    // KIP-394: the member gets its id first and joins again with it, so that a client whose JoinGroup
    // times out does not leave a ghost member behind.
    g.add_pending_member(new_id);
    schedule_heartbeat(g, new_id, req.session_timeout_ms);
    return done(join_error_response(new_id, error_code::member_id_required));
  }
  add_member_then_rebalance_or_complete_join(origin, req, g, new_id, done);
}

void classic_group_manager::join_existing_member(const request_origin& origin,
                                                 const proto::join_group_request& req, classic_group& g,
                                                 const join_callback& done) {
  const std::string& member_id = req.member_id;
  if (g.in_state(state::dead))
    return done(join_error_response(member_id, error_code::coordinator_not_available));
  auto protocols = protocols_of(req);
  if (!g.supports_protocols(req.protocol_type, protocols)) {
    return done(join_error_response(member_id, error_code::inconsistent_group_protocol));
  }
  if (g.is_pending_member(member_id)) {
    // A pending member cannot be static (static members never get MEMBER_ID_REQUIRED).
    if (req.group_instance_id) return done(join_error_response(member_id, error_code::unknown_server_error));
    return add_member_then_rebalance_or_complete_join(origin, req, g, member_id, done);
  }
  if (auto e = g.validate_member(member_id, req.group_instance_id); e != error_code::none) {
    return done(join_error_response(member_id, e));
  }
  auto* m = g.member(member_id);
  if (g.in_state(state::preparing_rebalance)) {
    return update_member_then_rebalance_or_complete_join(req, g, *m, std::move(protocols), done);
  }
  if (g.in_state(state::completing_rebalance)) {
    if (m->matches(protocols)) {
      // Same metadata (it probably missed the JoinGroup answer): the current generation again.
      join_response r;
      r.error_code = to_wire(error_code::none);
      if (g.is_leader(member_id)) r.members = g.current_member_metadata();
      r.member_id = member_id;
      r.generation_id = g.generation_id();
      r.protocol_name = g.protocol_name();
      r.protocol_type = g.protocol_type();
      r.leader = g.leader_id().value_or("");
      return done(std::move(r));
    }
    return update_member_then_rebalance_or_complete_join(req, g, *m, std::move(protocols), done);
  }
  if (g.in_state(state::stable)) {
    // The leader rejoining forces a rebalance (it may have seen a metadata change); so does a member whose
    // metadata changed. Other followers get the current generation.
    if (g.is_leader(member_id) || !m->matches(protocols)) {
      return update_member_then_rebalance_or_complete_join(req, g, *m, std::move(protocols), done);
    }
    join_response r;
    r.error_code = to_wire(error_code::none);
    r.member_id = member_id;
    r.generation_id = g.generation_id();
    r.protocol_name = g.protocol_name();
    r.protocol_type = g.protocol_type();
    r.leader = g.leader_id().value_or("");
    return done(std::move(r));
  }
  // Empty: the member must reset its generation and join from scratch.
  _runtime.log().warn("member {} rejoins group {} in unexpected state {}", member_id, g.group_id(),
                      state_name(g.state()));
  done(join_error_response(member_id, error_code::unknown_member_id));
}

void classic_group_manager::update_member_then_rebalance_or_complete_join(
    const proto::join_group_request& req, classic_group& g, classic_group_member& m,
    std::vector<member_protocol> protocols, const join_callback& done) {
  // A JoinGroup replacing one still parked (the client gave up on it and retried): the older one is
  // answered so that it does not stay parked forever.
  if (m.is_awaiting_join()) {
    g.complete_join(m, join_error_response(m.member_id, error_code::rebalance_in_progress));
  }
  g.update_member(m, std::move(protocols), req.rebalance_timeout_ms, req.session_timeout_ms, done);
  maybe_prepare_rebalance_or_complete_join(g);
}

void classic_group_manager::add_member_then_rebalance_or_complete_join(const request_origin& origin,
                                                                       const proto::join_group_request& req,
                                                                       classic_group& g,
                                                                       const std::string& member_id,
                                                                       const join_callback& done) {
  classic_group_member m;
  m.member_id = member_id;
  m.group_instance_id = req.group_instance_id;
  m.client_id = origin.client_id;
  m.client_host = origin.client_host;
  m.rebalance_timeout_ms = req.rebalance_timeout_ms;
  m.session_timeout_ms = req.session_timeout_ms;
  m.protocol_type = req.protocol_type;
  m.protocols = protocols_of(req);
  m.is_new = true;
  if (g.in_state(state::preparing_rebalance) && g.previous_state() == state::empty)
    g.set_new_member_added(true);
  g.add(std::move(m), done);
  // A new member cannot heartbeat while its JoinGroup is parked, and a client that gave up on it would
  // leave a ghost: its JoinGroup expires after the new-member join timeout instead of the session timeout.
  schedule_heartbeat(g, member_id, _config.new_member_join_timeout_ms);
  maybe_prepare_rebalance_or_complete_join(g);
}

void classic_group_manager::update_static_member_then_rebalance_or_complete_join(
    const request_origin& origin, const proto::join_group_request& req, classic_group& g,
    const std::string& old_id, const std::string& new_id, const join_callback& done) {
  const std::string gid = g.group_id();
  const std::string instance_id = *req.group_instance_id;
  const std::optional<std::string> current_leader = g.leader_id();
  _runtime.timers().cancel(heartbeat_key(gid, old_id));
  classic_group_member& member = g.replace_static_member(instance_id, old_id, new_id);
  reschedule_heartbeat(g, member);
  const int32_t old_rebalance_timeout = member.rebalance_timeout_ms;
  const int32_t old_session_timeout = member.session_timeout_ms;
  std::vector<member_protocol> old_protocols = member.protocols;
  g.update_member(member, protocols_of(req), req.rebalance_timeout_ms, req.session_timeout_ms, done);

  if (g.in_state(state::stable)) {
    // The static member is back with a new id: no rebalance unless the group's protocol would change;
    // only the new member id is persisted.
    if (g.protocol_name().value_or("") == g.select_protocol()) {
      assignment_map assignment;
      for (const auto& [id, m] : g.members()) assignment[id] = m.assignment;
      const uint64_t serial = find_slot(gid)->serial;
      const bool skip_assignment_supported = origin.api_version >= 9;
      _runtime.write(
          _runtime.partition_of(gid), {group_metadata_record(gid, metadata_value(g, &assignment))},
          [this, gid, serial, instance_id, old_id, new_id, current_leader, old_rebalance_timeout,
           old_session_timeout, old_protocols, skip_assignment_supported, done](error_code e) {
            auto* group = group_if(gid, serial);
            auto* m = group ? group->member(new_id) : nullptr;
            if (e != error_code::none) {
              _runtime.log().warn(
                  "failed to persist static member {} of group {} ({}): reverting to member id {}", new_id,
                  gid, error_name(e), old_id);
              if (group && m) {
                group->update_member(*m, old_protocols, old_rebalance_timeout, old_session_timeout, nullptr);
                auto& old_member = group->replace_static_member(instance_id, new_id, old_id);
                _runtime.timers().cancel(heartbeat_key(gid, new_id));
                reschedule_heartbeat(*group, old_member);
              }
              join_response r =
                  join_error_response(std::string(unknown_member_id), append_error_to_client_error(e));
              if (group) {
                r.generation_id = group->generation_id();
                r.protocol_name = group->protocol_name();
                r.protocol_type = group->protocol_type();
              }
              r.leader = current_leader.value_or("");
              done(std::move(r));
              return;
            }
            if (!group || !m) return;
            join_response r;
            r.error_code = to_wire(error_code::none);
            r.member_id = new_id;
            r.generation_id = group->generation_id();
            r.protocol_name = group->protocol_name();
            r.protocol_type = group->protocol_type();
            if (skip_assignment_supported) {
              // KIP-814: a static leader coming back gets the members but keeps the current assignment.
              const bool is_leader = group->is_leader(new_id);
              if (is_leader) r.members = group->current_member_metadata();
              r.leader = group->leader_id().value_or("");
              r.skip_assignment = is_leader;
            } else {
              // Older clients would reassign as leader: tell them the leader that was.
              r.leader = current_leader.value_or("");
            }
            group->complete_join(*m, std::move(r));
          });
      return;
    }
    return maybe_prepare_rebalance_or_complete_join(g);
  }
  if (g.in_state(state::completing_rebalance)) {
    // The leader may already have computed an assignment for the old member id.
    return prepare_rebalance(g);
  }
  maybe_complete_join_phase(g);
}

void classic_group_manager::sync_group(const proto::sync_group_request& req, sync_callback done) {
  const std::string& gid = req.group_id;
  group_slot* slot = find_slot(gid);
  if (!slot || slot->group.is_empty()) return done(sync_error_response(error_code::unknown_member_id));
  classic_group& g = slot->group;
  const uint64_t serial = slot->serial;

  error_code e = error_code::none;
  if (g.in_state(state::dead)) {
    e = error_code::coordinator_not_available;
  } else if (auto v = g.validate_member(req.member_id, req.group_instance_id); v != error_code::none) {
    e = v;
  } else if (req.generation_id != g.generation_id()) {
    e = error_code::illegal_generation;
  } else if (protocol_inconsistent(req.protocol_type, g.protocol_type()) ||
             protocol_inconsistent(req.protocol_name, g.protocol_name())) {
    e = error_code::inconsistent_group_protocol;
  }
  if (e != error_code::none) return done(sync_error_response(e));

  if (g.in_state(state::preparing_rebalance))
    return done(sync_error_response(error_code::rebalance_in_progress));

  if (g.in_state(state::completing_rebalance)) {
    auto* m = g.member(req.member_id);
    if (m->is_awaiting_sync()) g.complete_sync(*m, sync_error_response(error_code::rebalance_in_progress));
    m->awaiting_sync = once(std::move(done));
    remove_pending_sync_member(g, req.member_id);
    if (!g.is_leader(req.member_id)) return;
    _runtime.log().info("assignment received from leader {} of group {} for generation {}", req.member_id,
                        gid, g.generation_id());
    // Every member gets an assignment, empty if the leader gave it none.
    assignment_map assignment;
    for (const auto& a : req.assignments) assignment[a.member_id] = a.assignment;
    for (const auto& [id, member] : g.members()) assignment.try_emplace(id);
    const int32_t generation = req.generation_id;
    const std::string leader_id = req.member_id;
    _runtime.write(_runtime.partition_of(gid), {group_metadata_record(gid, metadata_value(g, &assignment))},
                   [this, gid, serial, generation, assignment, leader_id](error_code err) {
                     // Another member may have joined meanwhile: only the same generation, still completing,
                     // goes on.
                     auto* group = group_if(gid, serial);
                     if (!group || !group->in_state(state::completing_rebalance) ||
                         group->generation_id() != generation) {
                       return;
                     }
                     if (err != error_code::none) {
                       const error_code client_error = append_error_to_client_error(err);
                       _runtime.log().warn("failed to store the assignment of group {}: {}", gid,
                                           error_name(err));
                       reset_and_propagate_assignment_with_error(*group, client_error);
                       maybe_prepare_rebalance_or_complete_join(*group);
                       return;
                     }
                     set_and_propagate_assignment(*group, assignment);
                     group->transition_to(state::stable, _runtime.now());
                   });
    return;
  }

  if (g.in_state(state::stable)) {
    remove_pending_sync_member(g, req.member_id);
    auto* m = g.member(req.member_id);
    proto::sync_group_response r;
    r.error_code = to_wire(error_code::none);
    r.protocol_type = g.protocol_type();
    r.protocol_name = g.protocol_name();
    r.assignment = m->assignment;
    return done(std::move(r));
  }
  done(sync_error_response(error_code::coordinator_not_available));
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

// Whether the member may commit for the classic group at its generation (or without one while it is empty).
error_code validate_offset_commit(const classic_group& g, const proto::offset_commit_request& req) {
  if (g.in_state(state::dead)) return error_code::coordinator_not_available;
  const int32_t generation = req.generation_id_or_member_epoch;
  // Generation -1: the admin client or a consumer without group management; fine while the group is empty.
  if (generation < 0 && g.in_state(state::empty)) return error_code::none;
  if (generation >= 0 || !req.member_id.empty() || req.group_instance_id) {
    if (auto e = g.validate_member(req.member_id, req.group_instance_id); e != error_code::none) return e;
    if (generation != g.generation_id()) return error_code::illegal_generation;
  } else if (!g.in_state(state::empty)) {
    return error_code::unknown_member_id;
  }
  // The member knows the new generation but the group has not settled: it will commit again after.
  if (g.in_state(state::completing_rebalance)) return error_code::rebalance_in_progress;
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
  if (auto e = validate_offset_commit(g, req); e != error_code::none) return e;
  // A commit keeps a classic member's session alive.
  if (g.in_state(state::stable) || g.in_state(state::preparing_rebalance)) {
    if (auto* m = g.member(req.member_id)) reschedule_heartbeat(g, *m);
  }
  return error_code::none;
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
