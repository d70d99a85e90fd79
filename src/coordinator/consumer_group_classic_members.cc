// The classic-protocol half of consumer_group_manager: classic members inside KIP-848 consumer groups
// (JoinGroup / SyncGroup / Heartbeat / LeaveGroup against a consumer group), the online upgrade of a classic
// group with members and the online downgrade back (Kafka 4.x's GroupMetadataManager
// classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup, classicGroupHeartbeatToConsumerGroup,
// classicGroupLeaveToConsumerGroup, convertToConsumerGroup, convertToClassicGroup).
#include <algorithm>

#include "consumer_group_manager.h"
#include "mala/coordinator/consumer_protocol.h"

namespace mala::coordinator {

namespace {

namespace proto = mala::protocol;

named_partitions to_names(const topic_partitions& tp, const topic_catalog& catalog) {
  named_partitions out;
  for (const auto& [id, ps] : tp) {
    if (const auto* t = catalog.find(id)) out[t->name].insert(ps.begin(), ps.end());
  }
  return out;
}

topic_partitions from_names(const named_partitions& np, const topic_catalog& catalog) {
  topic_partitions out;
  for (const auto& [name, ps] : np) {
    const auto* t = catalog.find(name);
    if (!t || ps.empty()) continue;
    out[t->id].insert(ps.begin(), ps.end());
  }
  return out;
}

// The member of a classic request: by member id, or by instance id for static members (FENCED_INSTANCE_ID
// when the instance belongs to another member id); it must speak the classic protocol.
error_code find_classic_member(const consumer_group& g, const std::string& member_id,
                               const std::optional<std::string>& instance_id, const consumer_member*& out) {
  out = instance_id ? g.static_member(*instance_id) : g.member(member_id);
  if (!out) return error_code::unknown_member_id;
  if (instance_id && out->member_id != member_id) return error_code::fenced_instance_id;
  if (!out->uses_classic_protocol()) return error_code::unknown_member_id;
  return error_code::none;
}

std::vector<classic_member_metadata::protocol> protocols_of(const proto::join_group_request& req) {
  std::vector<classic_member_metadata::protocol> out;
  for (const auto& p : req.protocols) out.push_back({p.name, p.metadata});
  return out;
}

// The version the member's assignment is encoded at: the one of its first protocol's subscription.
int16_t assignment_version(const consumer_member& m) {
  if (!m.classic || m.classic->protocols.empty()) return 0;
  return embedded_version(m.classic->protocols.front().metadata).value_or(0);
}

}  // namespace

std::string consumer_group_manager::member_key(const char* kind, const std::string& gid,
                                               const std::string& member_id) const {
  return std::string("cg-") + kind + "|" + gid + "|" + member_id;
}

void consumer_group_manager::cancel_member_timers(const std::string& gid, const std::string& member_id) {
  _timers.cancel(session_key(gid, member_id));
  _timers.cancel(rebalance_key(gid, member_id));
  _timers.cancel(member_key("sync", gid, member_id));
  _timers.cancel(member_key("join", gid, member_id));
}

void consumer_group_manager::schedule_classic_sync_timeout(const std::string& gid, const consumer_member& m) {
  const std::string member_id = m.member_id;
  _timers.schedule(member_key("sync", gid, member_id), _runtime.now() + std::max(m.rebalance_timeout_ms, 0),
                   [this, gid, member_id] { expire_member(gid, member_id, "no SyncGroup after JoinGroup"); });
}

void consumer_group_manager::schedule_classic_join_timeout_if_absent(const std::string& gid,
                                                                     const consumer_member& m) {
  const std::string key = member_key("join", gid, m.member_id);
  if (_timers.contains(key)) return;
  const std::string member_id = m.member_id;
  _timers.schedule(key, _runtime.now() + std::max(m.rebalance_timeout_ms, 0), [this, gid, member_id] {
    expire_member(gid, member_id, "no JoinGroup after being asked to rejoin");
  });
}

bool consumer_group_manager::waiting_on_unreleased_partition(const consumer_group& g,
                                                             const consumer_member& m) const {
  for (const auto& [topic, parts] : g.target_of(m.member_id)) {
    for (int32_t p : parts) {
      if (contains_partition(m.assigned, topic, p)) continue;
      const std::string* owner = g.owner_of(topic, p);
      if (owner && *owner != m.member_id) return true;
    }
  }
  return false;
}

// --- JoinGroup

void consumer_group_manager::classic_join(const request_origin& origin, const proto::join_group_request& req,
                                          join_callback done) {
  const std::string gid = req.group_id;
  auto git = _groups.find(gid);
  if (git == _groups.end()) return done(join_error_response(req.member_id, error_code::unknown_member_id));
  consumer_group& g = git->second;
  const bool unknown = req.member_id.empty();
  const std::string member_id = unknown ? uuid::random().to_string() : req.member_id;
  const auto& instance_id = req.group_instance_id;

  // throwIfConsumerGroupIsFull
  const bool known = g.member(member_id) || (instance_id && g.static_member(*instance_id));
  if (!known && g.members().size() >= static_cast<size_t>(_config.consumer_max_size)) {
    return done(join_error_response(member_id, error_code::group_max_size_reached));
  }
  // throwIfClassicProtocolIsNotSupported: the consumer protocol type, and a protocol every other classic
  // member supports.
  auto protocols = protocols_of(req);
  bool supported = req.protocol_type == consumer_protocol_type && !protocols.empty();
  if (supported) {
    for (const auto& entry : g.members()) {
      const consumer_member& m = entry.second;
      if (!m.uses_classic_protocol() || entry.first == member_id) continue;
      const auto& theirs = m.classic->protocols;
      const bool shares = std::any_of(protocols.begin(), protocols.end(), [&](const auto& p) {
        return std::any_of(theirs.begin(), theirs.end(), [&](const auto& q) { return q.name == p.name; });
      });
      if (!shares) supported = false;
    }
  }
  if (!supported) return done(join_error_response(member_id, error_code::inconsistent_group_protocol));
  if (unknown && !instance_id && origin.api_version >= 4) {
    // KIP-394: the member gets its id first and joins again with it.
    return done(join_error_response(member_id, error_code::member_id_required));
  }
  auto subscription = decode_subscription(protocols.front().metadata);
  if (!subscription) {
    log_info("group " + gid + ": member " + member_id +
             " sent a JoinGroup whose consumer protocol subscription does not parse");
    return done(join_error_response(member_id, error_code::unknown_server_error));
  }

  std::vector<coordinator_record> records;
  consumer_member member;
  bool is_new = false;
  bool replaced_static = false;
  bool replaced_consumer_member = false;
  if (instance_id) {
    const consumer_member* existing = g.static_member(*instance_id);
    if (unknown) {
      if (!existing) {
        is_new = true;
      } else {
        // A static member back with a new member id takes over the old one's place (KIP-345).
        const std::string old_id = existing->member_id;
        replaced_consumer_member = !existing->uses_classic_protocol();
        member = *existing;
        member.member_id = member_id;
        // As Kafka: the copy starts at epoch 0 and reconciles to the target (keeping what it may keep).
        member.member_epoch = 0;
        member.previous_member_epoch = 0;
        const topic_partitions target = g.target_of(old_id);
        records.push_back(consumer_group_current_assignment_tombstone(gid, old_id));
        records.push_back(consumer_group_target_member_tombstone(gid, old_id));
        records.push_back(consumer_group_member_tombstone(gid, old_id));
        cancel_member_timers(gid, old_id);
        g.remove_member(old_id);
        g.remove_target(old_id);
        g.set_target(member_id, target);
        records.push_back(consumer_group_target_member_record(gid, member_id, target));
        replaced_static = true;
        log_info("group " + gid + ": static member " + *instance_id + " rejoined as " + member_id +
                 ", replacing " + old_id);
      }
    } else if (!existing) {
      return done(join_error_response(member_id, error_code::unknown_member_id));
    } else if (existing->member_id != member_id) {
      return done(join_error_response(member_id, error_code::fenced_instance_id));
    } else {
      member = *existing;
    }
  } else if (const auto* existing = g.member(member_id)) {
    member = *existing;
  } else {
    is_new = true;
  }
  if (!is_new && !member.uses_classic_protocol() && !replaced_static) {
    // A member of the consumer protocol cannot turn classic under the same id.
    return done(join_error_response(member_id, error_code::unknown_member_id));
  }

  consumer_member updated = member;
  updated.member_id = member_id;
  if (instance_id) updated.instance_id = instance_id;
  if (subscription->rack_id) updated.rack_id = subscription->rack_id;
  updated.rebalance_timeout_ms =
      req.rebalance_timeout_ms > 0 ? req.rebalance_timeout_ms : req.session_timeout_ms;
  updated.client_id = origin.client_id;
  updated.client_host = origin.client_host;
  updated.subscribed_topic_names = subscription->topics;
  auto& classic = updated.classic.emplace();
  classic.session_timeout_ms = req.session_timeout_ms;
  classic.protocols = std::move(protocols);

  const bool subscription_changed = is_new ||
                                    updated.subscribed_topic_names != member.subscribed_topic_names ||
                                    updated.subscribed_topic_regex != member.subscribed_topic_regex;
  if (is_new || replaced_static || updated != member)
    records.push_back(consumer_group_member_record(gid, updated));
  g.put_member(updated);
  maybe_update_target(g, subscription_changed, records);

  const consumer_member before = *g.member(member_id);
  consumer_member next = reconcile_towards_target(
      g, before, std::optional<topic_partitions>(from_names(subscription->owned, _catalog)));
  if (next != before || is_new || replaced_static) {
    records.push_back(consumer_group_current_assignment_record(gid, next));
  }
  g.put_member(next);
  _timers.cancel(rebalance_key(gid, member_id));
  // A static member of the classic protocol that replaced the last member of the consumer protocol turns the
  // group back into a classic group, without a rebalance (Kafka's
  // validateOnlineDowngradeWithReplacedMemberId).
  if (replaced_consumer_member) maybe_downgrade(g, "", records, /*rebalance=*/false);

  proto::join_group_response resp;
  resp.member_id = member_id;
  resp.generation_id = next.member_epoch;
  resp.protocol_type = std::string(consumer_protocol_type);
  resp.protocol_name = next.classic->protocols.front().name;
  resp.leader = "";
  auto respond = [this, gid, member_id, resp = std::move(resp),
                  done = std::move(done)](error_code e) mutable {
    if (e != error_code::none) return done(join_error_response(member_id, append_error_to_client_error(e)));
    auto git = _groups.find(gid);
    if (git != _groups.end()) {
      if (const consumer_member* m = git->second.member(member_id)) {
        _timers.cancel(member_key("join", gid, member_id));
        schedule_session(gid, member_id);
        schedule_classic_sync_timeout(gid, *m);
      }
    }
    done(std::move(resp));
  };
  if (records.empty()) return respond(error_code::none);
  _runtime.write(_runtime.partition_of(gid), std::move(records), std::move(respond));
}

// --- SyncGroup

void consumer_group_manager::classic_sync(const proto::sync_group_request& req, sync_callback done) {
  auto git = _groups.find(req.group_id);
  if (git == _groups.end()) return done(sync_error_response(error_code::unknown_member_id));
  const consumer_group& g = git->second;
  const consumer_member* m = nullptr;
  if (auto e = find_classic_member(g, req.member_id, req.group_instance_id, m); e != error_code::none) {
    return done(sync_error_response(e));
  }
  if (req.generation_id != m->member_epoch) return done(sync_error_response(error_code::illegal_generation));
  if ((req.protocol_type && *req.protocol_type != consumer_protocol_type) ||
      (req.protocol_name && *req.protocol_name != m->classic->protocols.front().name)) {
    return done(sync_error_response(error_code::inconsistent_group_protocol));
  }
  // A new group epoch means the member must rejoin first, unless it already did and is revoking.
  if (g.group_epoch() > m->member_epoch && m->state != member_state::unrevoked_partitions) {
    return done(sync_error_response(error_code::rebalance_in_progress));
  }
  _timers.cancel(member_key("sync", req.group_id, m->member_id));
  schedule_session(req.group_id, m->member_id);
  proto::sync_group_response resp;
  resp.protocol_type = req.protocol_type;
  resp.protocol_name = req.protocol_name;
  resp.assignment = encode_assignment(to_names(m->assigned, _catalog), assignment_version(*m));
  done(std::move(resp));
}

// --- Heartbeat

proto::heartbeat_response consumer_group_manager::classic_heartbeat(const proto::heartbeat_request& req) {
  proto::heartbeat_response resp;
  auto git = _groups.find(req.group_id);
  if (git == _groups.end()) {
    resp.error_code = to_wire(error_code::unknown_member_id);
    return resp;
  }
  const consumer_group& g = git->second;
  const consumer_member* m = nullptr;
  if (auto e = find_classic_member(g, req.member_id, req.group_instance_id, m); e != error_code::none) {
    resp.error_code = to_wire(e);
    return resp;
  }
  if (req.generation_id != m->member_epoch) {
    resp.error_code = to_wire(error_code::illegal_generation);
    return resp;
  }
  schedule_session(req.group_id, m->member_id);
  // Rejoin when the group epoch moved on, when partitions must be revoked, or when the partitions the member
  // waits for are free now.
  if (m->member_epoch < g.group_epoch() || m->state == member_state::unrevoked_partitions ||
      (m->state == member_state::unreleased_partitions && !waiting_on_unreleased_partition(g, *m))) {
    resp.error_code = to_wire(error_code::rebalance_in_progress);
    schedule_classic_join_timeout_if_absent(req.group_id, *m);
  }
  return resp;
}

// --- LeaveGroup

proto::leave_group_response consumer_group_manager::classic_leave(const proto::leave_group_request& req) {
  proto::leave_group_response resp;
  const std::string gid = req.group_id;
  auto git = _groups.find(gid);
  if (git == _groups.end()) {
    resp.error_code = to_wire(error_code::unknown_member_id);
    return resp;
  }
  std::vector<coordinator_record> records;
  for (const auto& identity : req.members) {
    auto& mr = resp.members.emplace_back();
    mr.member_id = identity.member_id;
    mr.group_instance_id = identity.group_instance_id;
    consumer_group& g = git->second;
    const consumer_member* m = identity.group_instance_id ? g.static_member(*identity.group_instance_id)
                                                          : g.member(identity.member_id);
    error_code e = error_code::none;
    if (!m) {
      e = error_code::unknown_member_id;
    } else if (identity.group_instance_id && !identity.member_id.empty() &&
               m->member_id != identity.member_id) {
      e = error_code::fenced_instance_id;
    } else if (!m->uses_classic_protocol()) {
      e = error_code::unknown_member_id;
    }
    if (e != error_code::none) {
      mr.error_code = to_wire(e);
      continue;
    }
    const std::string leaving = m->member_id;
    mr.member_id = leaving;
    log_info("classic member " + leaving + " left consumer group " + gid + " (LeaveGroup)");
    // As in Kafka, a classic member's LeaveGroup does not downgrade the group (a consumer-protocol member's
    // leave or any member's expiry does).
    fence_member(g, leaving, records);
  }
  if (!records.empty()) {
    _runtime.write(_runtime.partition_of(gid), std::move(records), [this, gid](error_code e) {
      if (e != error_code::none) {
        log_info("group " + gid + ": writing a LeaveGroup failed: " + std::string(error_name(e)));
      }
    });
  }
  return resp;
}

// --- Upgrade and downgrade

bool consumer_group_manager::upgrade_classic_group(const std::string& gid,
                                                   std::vector<coordinator_record>& records) {
  auto snapshot = _host.classic_group_for_upgrade(gid);
  if (!snapshot) return false;
  if (snapshot->members.size() > static_cast<size_t>(_config.consumer_max_size)) return false;
  consumer_group g(gid);
  g.set_group_epoch(snapshot->generation);
  g.set_assignment_epoch(snapshot->generation);
  for (const auto& cm : snapshot->members) {
    const auto chosen = std::find_if(cm.protocols.begin(), cm.protocols.end(),
                                     [&](const auto& p) { return p.name == snapshot->protocol_name; });
    const auto& metadata = chosen != cm.protocols.end() ? chosen->metadata : cm.protocols.front().metadata;
    auto subscription = decode_subscription(metadata);
    auto assigned = decode_assignment(cm.assignment);
    if (!subscription || !assigned) {
      log_info("group " + gid + ": not upgraded, member " + cm.member_id +
               " has a malformed consumer protocol subscription or assignment");
      return false;
    }
    consumer_member m;
    m.member_id = cm.member_id;
    m.instance_id = cm.instance_id;
    m.rack_id = subscription->rack_id;
    m.client_id = cm.client_id;
    m.client_host = cm.client_host;
    m.subscribed_topic_names = subscription->topics;
    m.rebalance_timeout_ms = cm.rebalance_timeout_ms;
    m.member_epoch = snapshot->generation;
    m.previous_member_epoch = snapshot->generation;
    m.state = member_state::stable;
    m.assigned = from_names(*assigned, _catalog);
    auto& classic = m.classic.emplace();
    classic.session_timeout_ms = cm.session_timeout_ms;
    classic.protocols = cm.protocols;
    g.set_target(m.member_id, m.assigned);
    g.put_member(std::move(m));
  }
  _host.drop_classic_group(gid, records);
  g.set_subscription_metadata(g.compute_subscription_metadata(_catalog));
  for (const auto& [id, m] : g.members()) records.push_back(consumer_group_member_record(gid, m));
  records.push_back(consumer_group_partition_metadata_record(gid, g.subscription_metadata(), _catalog));
  records.push_back(consumer_group_epoch_record(gid, g.group_epoch()));
  for (const auto& [id, tp] : g.target()) records.push_back(consumer_group_target_member_record(gid, id, tp));
  records.push_back(consumer_group_target_epoch_record(gid, g.assignment_epoch()));
  for (const auto& [id, m] : g.members()) records.push_back(consumer_group_current_assignment_record(gid, m));
  _groups.erase(gid);
  _groups.emplace(gid, std::move(g));
  _partition_of_group[gid] = _runtime.partition_of(gid);
  for (const auto& [id, m] : _groups.at(gid).members()) schedule_session(gid, id);
  log_info("group " + gid + ": classic group with " + std::to_string(snapshot->members.size()) +
           " members upgraded to a consumer group at epoch " + std::to_string(snapshot->generation));
  return true;
}

bool consumer_group_manager::maybe_downgrade(consumer_group& g, const std::string& leaving,
                                             std::vector<coordinator_record>& records, bool rebalance) {
  const bool allowed = _config.consumer_migration_policy == "downgrade" ||
                       _config.consumer_migration_policy == "bidirectional";
  const size_t remaining = g.members().size() - (g.member(leaving) ? 1 : 0);
  if (!allowed || remaining == 0) return false;
  for (const auto& [id, m] : g.members()) {
    if (id != leaving && !m.uses_classic_protocol()) return false;
  }
  if (remaining > static_cast<size_t>(_config.max_group_size)) return false;
  const std::string gid = g.group_id();
  classic_group_snapshot snapshot;
  snapshot.group_id = gid;
  snapshot.generation = g.group_epoch();
  snapshot.rebalance = rebalance;
  for (const auto& [id, m] : g.members()) {
    if (id == leaving) continue;
    auto& sm = snapshot.members.emplace_back();
    sm.member_id = id;
    sm.instance_id = m.instance_id;
    sm.client_id = m.client_id;
    sm.client_host = m.client_host;
    sm.session_timeout_ms = m.classic->session_timeout_ms;
    sm.rebalance_timeout_ms = m.rebalance_timeout_ms;
    sm.protocols = m.classic->protocols;
    sm.assignment = encode_assignment(to_names(m.assigned, _catalog), assignment_version(m));
  }
  // The group's records go (ConsumerGroup.createGroupTombstoneRecords), then the classic group's come.
  for (const auto& [id, m] : g.members()) {
    records.push_back(consumer_group_current_assignment_tombstone(gid, id));
    records.push_back(consumer_group_target_member_tombstone(gid, id));
    records.push_back(consumer_group_member_tombstone(gid, id));
  }
  records.push_back(consumer_group_target_epoch_tombstone(gid));
  records.push_back(consumer_group_partition_metadata_tombstone(gid));
  records.push_back(consumer_group_epoch_tombstone(gid));
  remove_group(gid);
  _host.create_classic_group(snapshot, records);
  log_info("group " + gid + ": downgraded to a classic group (" +
           (leaving.empty() ? std::string("a classic static member replaced the last member")
                            : "member " + leaving + " was the last") +
           " of the consumer protocol)");
  return true;
}

}  // namespace mala::coordinator
