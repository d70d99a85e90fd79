// JoinGroup and SyncGroup of classic groups (GroupMetadataManager.classicGroupJoin / classicGroupSync): new,
// pending, existing and static members, the answers parked until the rebalance reaches them, and the
// leader's assignment written before the group becomes Stable. Part of classic_group_manager
// (classic_group_manager.h); the rebalance steps they start are in classic_group_rebalance.cc.
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "classic_group_manager.h"
#include "mala/common/logging.h"

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

}  // namespace

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
      return done(current_generation_join_response(g, member_id));
    }
    return update_member_then_rebalance_or_complete_join(req, g, *m, std::move(protocols), done);
  }
  if (g.in_state(state::stable)) {
    // The leader rejoining forces a rebalance (it may have seen a metadata change); so does a member whose
    // metadata changed. Other followers get the current generation.
    if (g.is_leader(member_id) || !m->matches(protocols)) {
      return update_member_then_rebalance_or_complete_join(req, g, *m, std::move(protocols), done);
    }
    return done(current_generation_join_response(g, member_id));
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

}  // namespace mala::coordinator
