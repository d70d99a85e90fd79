#include "consumer_group_manager.h"

#include <algorithm>

#include "mala/common/logging.h"

namespace mala::coordinator {

namespace {

namespace proto = mala::protocol;
using hb_response = proto::consumer_group_heartbeat_response;

// Kafka 4.0's INVALID_REGULAR_EXPRESSION (not yet in mala::error_code).

hb_response hb_error(int16_t code, std::string message = {}) {
  hb_response r;
  r.error_code = code;
  if (!message.empty()) r.error_message = std::move(message);
  return r;
}
hb_response hb_error(error_code e, std::string message = {}) {
  return hb_error(to_wire(e), std::move(message));
}

// The member id the coordinator picks for v0 clients (v1 clients choose their own): a random uuid.
std::string random_member_id() {
  return uuid::random().to_string();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

topic_partitions from_request(
    const std::vector<proto::consumer_group_heartbeat_request__topic_partitions_data>& v) {
  topic_partitions out;
  for (const auto& t : v) {
    if (!t.partitions.empty()) out[t.topic_id].insert(t.partitions.begin(), t.partitions.end());
  }
  return out;
}

proto::consumer_group_heartbeat_response__assignment_data to_response(const topic_partitions& tp) {
  proto::consumer_group_heartbeat_response__assignment_data a;
  for (const auto& [t, ps] : tp) {
    auto& e = a.topic_partitions.emplace_back();
    e.topic_id = t;
    e.partitions.assign(ps.begin(), ps.end());
  }
  return a;
}

// The classic member metadata of a member record (GCC 12 warns about building it in place in the member).
std::optional<classic_member_metadata> classic_metadata_of(
    const proto::consumer_group_member_metadata_value& v) {
  if (!v.classic_member_metadata) return std::nullopt;
  classic_member_metadata out;
  out.session_timeout_ms = v.classic_member_metadata->session_timeout_ms;
  for (const auto& p : v.classic_member_metadata->supported_protocols)
    out.protocols.push_back({p.name, p.metadata});
  return out;
}

bool is_subset(const topic_partitions& a, const topic_partitions& b) {
  return minus(a, b).empty();
}

}  // namespace

consumer_group_manager::consumer_group_manager(coordinator_runtime& runtime, consumer_group_host host)
    : _runtime(runtime), _config(runtime.config()), _host(std::move(host)), _timers(runtime.timers()) {}

void consumer_group_manager::log_info(const std::string& line) const {
  _runtime.log().info("{}", line);
}

std::string consumer_group_manager::session_key(const std::string& gid, const std::string& member_id) const {
  return "cg-session|" + gid + "|" + member_id;
}
std::string consumer_group_manager::rebalance_key(const std::string& gid,
                                                  const std::string& member_id) const {
  return "cg-rebalance|" + gid + "|" + member_id;
}

const consumer_group* consumer_group_manager::find(const std::string& id) const {
  auto it = _groups.find(id);
  return it == _groups.end() ? nullptr : &it->second;
}

// --- Heartbeat

void consumer_group_manager::heartbeat(const request_origin& origin,
                                       proto::consumer_group_heartbeat_request req, heartbeat_callback done) {
  // ConsumerGroupHeartbeatRequest validation (GroupCoordinatorService / GroupMetadataManager
  // throwIfConsumerGroupHeartbeatRequestIsInvalid).
  if (req.group_id.empty()) return done(hb_error(error_code::invalid_request, "GroupId can't be empty."));
  if (req.member_epoch < leave_group_static_member_epoch) {
    return done(hb_error(error_code::invalid_request, "MemberEpoch is invalid."));
  }
  if (req.member_epoch != 0 && req.member_id.empty()) {
    return done(hb_error(error_code::invalid_request, "MemberId can't be empty."));
  }
  if (req.member_epoch == leave_group_static_member_epoch && !req.instance_id) {
    return done(hb_error(error_code::invalid_request, "InstanceId can't be null."));
  }
  if (req.member_epoch == 0) {
    if (req.rebalance_timeout_ms == -1) {
      return done(
          hb_error(error_code::invalid_request, "RebalanceTimeoutMs must be provided in first request."));
    }
    if (!req.topic_partitions || !req.topic_partitions->empty()) {
      return done(hb_error(error_code::invalid_request, "TopicPartitions must be empty when (re-)joining."));
    }
    const bool has_names = req.subscribed_topic_names.has_value();
    const bool has_regex = req.subscribed_topic_regex && !req.subscribed_topic_regex->empty();
    if (!has_names && !has_regex) {
      return done(hb_error(error_code::invalid_request,
                           "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."));
    }
  }
  if (req.subscribed_topic_regex && !req.subscribed_topic_regex->empty() &&
      !valid_topic_regex(*req.subscribed_topic_regex)) {
    return done(hb_error(
        error_code::invalid_regular_expression,
        "SubscribedTopicRegex " + *req.subscribed_topic_regex + " is not a valid regular expression."));
  }
  if (req.server_assignor) {
    const auto& names = _config.consumer_assignors;
    if (std::find(names.begin(), names.end(), *req.server_assignor) == names.end()) {
      return done(hb_error(
          error_code::unsupported_assignor, "ServerAssignor " + *req.server_assignor +
                                                " is not supported. Supported assignors: " +
                                                [&] {
                                                  std::string s;
                                                  for (const auto& n : names)
                                                    s += (s.empty() ? "" : ", ") + n;
                                                  return s;
                                                }() +
                                                "."));
    }
  }
  if (auto e = _runtime.partition_error(req.group_id); e != error_code::none) return done(hb_error(e));

  if (req.member_epoch == leave_group_member_epoch || req.member_epoch == leave_group_static_member_epoch) {
    return leave(origin, req, std::move(done));
  }

  const std::string gid = req.group_id;
  std::vector<coordinator_record> records;

  // The group: created by a joining member (epoch 0); an empty classic group of the same id is upgraded.
  auto git = _groups.find(gid);
  if (git == _groups.end()) {
    if (auto classic_empty = _host.classic_group_empty(gid)) {
      const bool upgrade_allowed = _config.consumer_migration_policy == "upgrade" ||
                                   _config.consumer_migration_policy == "bidirectional";
      if (!upgrade_allowed || req.member_epoch != 0) {
        return done(hb_error(error_code::group_id_not_found, "Group " + gid + " is not a consumer group."));
      }
      if (*classic_empty) {
        _host.drop_empty_classic_group(gid, records);
        log_info("group " + gid + ": empty classic group upgraded to a consumer group");
      } else if (!upgrade_classic_group(gid, records)) {
        return done(hb_error(error_code::group_id_not_found, "Group " + gid + " is not a consumer group."));
      }
    } else if (req.member_epoch != 0) {
      return done(hb_error(error_code::group_id_not_found, "Group " + gid + " not found."));
    }
    git = _groups.find(gid);  // an upgraded group is there now
    if (git == _groups.end()) git = _groups.emplace(gid, consumer_group(gid)).first;
    _partition_of_group[gid] = _runtime.partition_of(gid);
  }
  consumer_group& g = git->second;

  std::optional<topic_partitions> owned;
  if (req.topic_partitions) owned = from_request(*req.topic_partitions);

  // The member.
  std::string member_id = req.member_id.empty() ? random_member_id() : req.member_id;
  consumer_member member;
  bool is_new = false;
  bool replaced_static = false;
  std::optional<consumer_member> replaced;
  if (req.instance_id) {
    const consumer_member* existing = g.static_member(*req.instance_id);
    if (req.member_epoch == 0) {
      if (!existing) {
        if (const auto* same = g.member(member_id)) {
          member = *same;
        } else {
          is_new = true;
        }
      } else if (existing->member_id == member_id) {
        member = *existing;
      } else if (existing->member_epoch != leave_group_static_member_epoch) {
        return done(hb_error(error_code::unreleased_instance_id, "Static member " + existing->member_id +
                                                                     " with instance id " + *req.instance_id +
                                                                     " is not released yet."));
      } else {
        // The static member comes back with a new member id: it takes over the old one's assignment and epoch
        // without a new group epoch (KIP-345 semantics under KIP-848).
        replaced = *existing;
        member = *existing;
        member.member_id = member_id;
        replaced_static = true;
      }
    } else {
      if (!existing) {
        return done(
            hb_error(error_code::unknown_member_id, "Instance id " + *req.instance_id + " is unknown."));
      }
      if (existing->member_id != member_id) {
        return done(hb_error(error_code::fenced_instance_id,
                             "Static member " + member_id + " with instance id " + *req.instance_id +
                                 " was fenced by member " + existing->member_id + "."));
      }
      member = *existing;
    }
  } else if (const auto* existing = g.member(member_id)) {
    if (existing->uses_classic_protocol()) {
      // throwIfMemberDoesNotUseConsumerProtocol: that member id speaks the classic protocol.
      return done(hb_error(error_code::unknown_member_id,
                           "Member " + member_id + " is a classic member of group " + gid + "."));
    }
    member = *existing;
  } else if (req.member_epoch == 0) {
    is_new = true;
  } else {
    return done(hb_error(error_code::unknown_member_id,
                         "Member " + member_id + " is not a member of group " + gid + "."));
  }
  if (is_new && g.members().size() >= static_cast<size_t>(_config.consumer_max_size)) {
    return done(hb_error(error_code::group_max_size_reached,
                         "The consumer group has reached its maximum capacity of " +
                             std::to_string(_config.consumer_max_size) + " members."));
  }
  if (!is_new && !replaced_static && req.member_epoch != 0) {
    // throwIfMemberEpochIsInvalid: the member may be one epoch behind if our last answer was lost, as long as
    // it owns no more than it was given.
    if (req.member_epoch > member.member_epoch) {
      return done(hb_error(
          error_code::fenced_member_epoch,
          "The consumer group member has a greater member epoch (" + std::to_string(req.member_epoch) +
              ") than the one known by the group coordinator (" + std::to_string(member.member_epoch) +
              "). The member must abandon all its partitions and rejoin."));
    }
    if (req.member_epoch < member.member_epoch && (req.member_epoch != member.previous_member_epoch ||
                                                   (owned && !is_subset(*owned, member.assigned)))) {
      return done(hb_error(
          error_code::fenced_member_epoch,
          "The consumer group member has a smaller member epoch (" + std::to_string(req.member_epoch) +
              ") than the one known by the group coordinator (" + std::to_string(member.member_epoch) +
              "). The member must abandon all its partitions and rejoin."));
    }
  }

  // Update the member's metadata (null fields keep the previous value).
  consumer_member updated = member;
  updated.member_id = member_id;
  if (req.instance_id) updated.instance_id = req.instance_id;
  if (req.rack_id) updated.rack_id = req.rack_id;
  if (req.rebalance_timeout_ms != -1) updated.rebalance_timeout_ms = req.rebalance_timeout_ms;
  updated.client_id = origin.client_id;
  updated.client_host = origin.client_host;
  if (req.subscribed_topic_names) updated.subscribed_topic_names = *req.subscribed_topic_names;
  if (req.subscribed_topic_regex) {
    if (req.subscribed_topic_regex->empty()) {
      updated.subscribed_topic_regex.reset();
    } else {
      updated.subscribed_topic_regex = req.subscribed_topic_regex;
    }
  }
  if (req.server_assignor) updated.server_assignor = req.server_assignor;

  bool bump = is_new;
  const bool subscription_changed = is_new ||
                                    updated.subscribed_topic_names != member.subscribed_topic_names ||
                                    updated.subscribed_topic_regex != member.subscribed_topic_regex ||
                                    updated.server_assignor != member.server_assignor;
  if (subscription_changed) bump = true;
  const bool metadata_changed = replaced_static || is_new || updated.instance_id != member.instance_id ||
                                updated.rack_id != member.rack_id || updated.client_id != member.client_id ||
                                updated.client_host != member.client_host ||
                                updated.rebalance_timeout_ms != member.rebalance_timeout_ms ||
                                subscription_changed;
  if (replaced_static) {
    // The old member id's records go; its target moves to the new id.
    const topic_partitions target = g.target_of(replaced->member_id);
    records.push_back(consumer_group_current_assignment_tombstone(gid, replaced->member_id));
    records.push_back(consumer_group_target_member_tombstone(gid, replaced->member_id));
    records.push_back(consumer_group_member_tombstone(gid, replaced->member_id));
    _timers.cancel(session_key(gid, replaced->member_id));
    _timers.cancel(rebalance_key(gid, replaced->member_id));
    g.remove_member(replaced->member_id);
    g.remove_target(replaced->member_id);
    g.set_target(member_id, target);
    records.push_back(consumer_group_target_member_record(gid, member_id, target));
  }
  if (metadata_changed) records.push_back(consumer_group_member_record(gid, updated));
  // The epoch in the current assignment record: a static member that left (-2) comes back at its last epoch.
  g.put_member(updated);

  maybe_update_target(g, bump, records);

  // Reconcile towards the target.
  const consumer_member before = *g.member(member_id);
  consumer_member next = reconcile_towards_target(g, before, owned);
  if (before.member_epoch == leave_group_static_member_epoch && next.member_epoch == before.member_epoch) {
    // A static member back after a temporary leave resumes at the assignment epoch.
    next.member_epoch = g.assignment_epoch();
  }
  const bool assignment_changed = next.assigned != member.assigned || is_new || replaced_static;
  if (next != before || replaced_static || is_new) {
    records.push_back(consumer_group_current_assignment_record(gid, next));
  }
  g.put_member(next);

  schedule_session(gid, member_id);
  if (next.state == member_state::unrevoked_partitions) {
    if (before.state != member_state::unrevoked_partitions) schedule_rebalance_timeout(gid, next);
  } else {
    _timers.cancel(rebalance_key(gid, member_id));
  }

  hb_response resp;
  resp.member_id = member_id;
  resp.member_epoch = next.member_epoch;
  resp.heartbeat_interval_ms = _config.consumer_heartbeat_interval_ms;
  if (req.member_epoch == 0 || assignment_changed || owned) resp.assignment = to_response(next.assigned);
  respond_after_write(gid, std::move(records), std::move(resp), std::move(done));
}

consumer_member consumer_group_manager::reconcile_towards_target(
    const consumer_group& g, const consumer_member& m, const std::optional<topic_partitions>& owned) {
  return reconcile(
      m, g.assignment_epoch(), g.target_of(m.member_id),
      [&](const uuid& t, int32_t p) {
        const std::string* o = g.owner_of(t, p);
        return o && *o != m.member_id;
      },
      owned);
}

void consumer_group_manager::maybe_update_target(consumer_group& g, bool bump,
                                                 std::vector<coordinator_record>& records) {
  const std::string& gid = g.group_id();
  auto metadata = g.compute_subscription_metadata(_catalog);
  if (metadata != g.subscription_metadata()) {
    g.set_subscription_metadata(metadata);
    records.push_back(consumer_group_partition_metadata_record(gid, metadata, _catalog));
    bump = true;
  }
  if (bump) {
    g.set_group_epoch(g.group_epoch() + 1);
    records.push_back(consumer_group_epoch_record(gid, g.group_epoch()));
  }
  if (g.group_epoch() <= g.assignment_epoch()) return;
  std::vector<assignor_member> specs;
  for (const auto& [id, m] : g.members()) {
    auto& s = specs.emplace_back();
    s.member_id = id;
    s.instance_id = m.instance_id;
    s.topics = subscribed_topics(m, _catalog);
    s.current_target = g.target_of(id);
  }
  const std::string assignor = g.preferred_assignor(
      _config.consumer_assignors.empty() ? "uniform" : _config.consumer_assignors.front());
  auto target = assign(assignor, specs, _catalog);
  for (auto& [id, tp] : target) {
    if (g.target().contains(id) && g.target_of(id) == tp) continue;
    records.push_back(consumer_group_target_member_record(gid, id, tp));
    g.set_target(id, std::move(tp));
  }
  g.set_assignment_epoch(g.group_epoch());
  records.push_back(consumer_group_target_epoch_record(gid, g.assignment_epoch()));
}

void consumer_group_manager::respond_after_write(const std::string& gid,
                                                 std::vector<coordinator_record> records, hb_response resp,
                                                 heartbeat_callback done) {
  if (records.empty()) return done(std::move(resp));
  _runtime.write(_runtime.partition_of(gid), std::move(records),
                 [resp = std::move(resp), done = std::move(done)](error_code e) mutable {
                   if (e != error_code::none) return done(hb_error(append_error_to_client_error(e)));
                   done(std::move(resp));
                 });
}

void consumer_group_manager::leave(const request_origin& /*origin*/,
                                   const proto::consumer_group_heartbeat_request& req,
                                   heartbeat_callback done) {
  const std::string gid = req.group_id;
  auto git = _groups.find(gid);
  if (git == _groups.end()) {
    return done(hb_error(error_code::group_id_not_found, "Group " + gid + " not found."));
  }
  consumer_group& g = git->second;
  const consumer_member* m = nullptr;
  if (req.instance_id) {
    m = g.static_member(*req.instance_id);
    if (!m)
      return done(
          hb_error(error_code::unknown_member_id, "Instance id " + *req.instance_id + " is unknown."));
    if (m->member_id != req.member_id) {
      return done(hb_error(error_code::fenced_instance_id,
                           "Static member " + req.member_id + " with instance id " + *req.instance_id +
                               " was fenced by member " + m->member_id + "."));
    }
  } else {
    m = g.member(req.member_id);
    if (!m) {
      return done(hb_error(error_code::unknown_member_id,
                           "Member " + req.member_id + " is not a member of group " + gid + "."));
    }
  }
  std::vector<coordinator_record> records;
  hb_response resp;
  resp.member_id = req.member_id;
  resp.member_epoch = req.member_epoch;
  if (req.member_epoch == leave_group_static_member_epoch) {
    // A static member leaving temporarily keeps its assignment until its session expires or it comes back.
    consumer_member left = *m;
    left.member_epoch = leave_group_static_member_epoch;
    records.push_back(consumer_group_current_assignment_record(gid, left));
    g.put_member(std::move(left));
    log_info("static member " + req.member_id + " of group " + gid + " left temporarily");
  } else {
    log_info("member " + req.member_id + " left group " + gid);
    if (!maybe_downgrade(g, req.member_id, records)) fence_member(g, req.member_id, records);
  }
  respond_after_write(gid, std::move(records), std::move(resp), std::move(done));
}

void consumer_group_manager::fence_member(consumer_group& g, const std::string& member_id,
                                          std::vector<coordinator_record>& records) {
  const std::string gid = g.group_id();
  records.push_back(consumer_group_current_assignment_tombstone(gid, member_id));
  records.push_back(consumer_group_target_member_tombstone(gid, member_id));
  records.push_back(consumer_group_member_tombstone(gid, member_id));
  g.remove_member(member_id);
  g.remove_target(member_id);
  cancel_member_timers(gid, member_id);
  auto metadata = g.compute_subscription_metadata(_catalog);
  if (metadata != g.subscription_metadata()) {
    g.set_subscription_metadata(metadata);
    records.push_back(consumer_group_partition_metadata_record(gid, metadata, _catalog));
  }
  g.set_group_epoch(g.group_epoch() + 1);
  records.push_back(consumer_group_epoch_record(gid, g.group_epoch()));
}

void consumer_group_manager::schedule_session(const std::string& gid, const std::string& member_id) {
  // Classic members keep the session timeout of their JoinGroup; the others get
  // group.consumer.session.timeout.ms.
  int32_t timeout = _config.consumer_session_timeout_ms;
  if (auto git = _groups.find(gid); git != _groups.end()) {
    if (const auto* m = git->second.member(member_id); m && m->classic)
      timeout = m->classic->session_timeout_ms;
  }
  _timers.schedule(session_key(gid, member_id), _runtime.now() + timeout,
                   [this, gid, member_id] { expire_member(gid, member_id, "session timeout"); });
}

void consumer_group_manager::schedule_rebalance_timeout(const std::string& gid, const consumer_member& m) {
  const int32_t timeout =
      m.rebalance_timeout_ms > 0 ? m.rebalance_timeout_ms : _config.consumer_session_timeout_ms;
  const std::string member_id = m.member_id;
  _timers.schedule(rebalance_key(gid, member_id), _runtime.now() + timeout, [this, gid, member_id] {
    expire_member(gid, member_id, "rebalance timeout (partitions not revoked)");
  });
}

void consumer_group_manager::expire_member(const std::string& gid, const std::string& member_id,
                                           const char* why) {
  auto git = _groups.find(gid);
  if (git == _groups.end() || !git->second.member(member_id)) return;
  if (_runtime.partition_error(gid) != error_code::none) return;
  log_info("member " + member_id + " of group " + gid + " fenced: " + why);
  std::vector<coordinator_record> records;
  if (!maybe_downgrade(git->second, member_id, records)) fence_member(git->second, member_id, records);
  _runtime.write(_runtime.partition_of(gid), std::move(records), [this, gid](error_code e) {
    if (e != error_code::none) {
      log_info("group " + gid + ": writing a member's removal failed: " + std::string(error_name(e)));
    }
  });
}

// --- Describe / list

std::vector<proto::consumer_group_describe_response::described_group> consumer_group_manager::describe(
    const std::vector<std::string>& ids, bool include_authorized_operations) const {
  std::vector<proto::consumer_group_describe_response::described_group> out;
  auto to_assignment = [this](const topic_partitions& tp) {
    proto::consumer_group_describe_response__assignment_data a;
    for (const auto& [t, ps] : tp) {
      auto& e = a.topic_partitions.emplace_back();
      e.topic_id = t;
      if (const auto* info = _catalog.find(t)) e.topic_name = info->name;
      e.partitions.assign(ps.begin(), ps.end());
    }
    return a;
  };
  for (const auto& id : ids) {
    auto& d = out.emplace_back();
    d.group_id = id;
    if (auto e = _runtime.partition_error(id); e != error_code::none) {
      d.error_code = to_wire(e);
      continue;
    }
    const consumer_group* g = find(id);
    if (!g) {
      d.error_code = to_wire(error_code::group_id_not_found);
      d.error_message = _host.classic_group_empty(id) ? "Group " + id + " is not a consumer group."
                                                      : "Group " + id + " not found.";
      continue;
    }
    d.group_state = std::string(state_name(g->state()));
    d.group_epoch = g->group_epoch();
    d.assignment_epoch = g->assignment_epoch();
    d.assignor_name = g->preferred_assignor(
        _config.consumer_assignors.empty() ? "uniform" : _config.consumer_assignors.front());
    if (include_authorized_operations) {
      // AclOperation bits READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (no authorizer).
      d.authorized_operations = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11);
    }
    for (const auto& [mid, m] : g->members()) {
      auto& dm = d.members.emplace_back();
      dm.member_id = mid;
      dm.instance_id = m.instance_id;
      dm.rack_id = m.rack_id;
      dm.member_epoch = m.member_epoch;
      dm.client_id = m.client_id;
      dm.client_host = m.client_host;
      dm.subscribed_topic_names = m.subscribed_topic_names;
      dm.subscribed_topic_regex = m.subscribed_topic_regex;
      dm.assignment = to_assignment(m.assigned);
      dm.target_assignment = to_assignment(g->target_of(mid));
    }
  }
  return out;
}

void consumer_group_manager::list(const std::set<std::string>& states, const std::set<std::string>& types,
                                  std::vector<proto::list_groups_response::listed_group>& out) const {
  if (!types.empty() && !types.contains("consumer")) return;
  for (const auto& [id, g] : _groups) {
    const std::string state(state_name(g.state()));
    if (!states.empty() && !states.contains(lower(state))) continue;
    auto& l = out.emplace_back();
    l.group_id = id;
    l.protocol_type = "consumer";
    l.group_state = state;
    l.group_type = "consumer";
  }
}

// --- Offsets / deletion

error_code consumer_group_manager::validate_offset_commit(const std::string& id, const std::string& member_id,
                                                          int32_t epoch, int16_t api_version,
                                                          bool transactional) const {
  const consumer_group* g = find(id);
  if (!g) return error_code::group_id_not_found;
  // Epoch -1: the admin client or a consumer without group management, fine while the group is empty.
  if (epoch < 0 && g->is_empty()) return error_code::none;
  const consumer_member* m = g->member(member_id);
  if (!m) return error_code::unknown_member_id;
  // Members of the consumer protocol commit with v9+; classic members with any version, their member epoch
  // as generation (ILLEGAL_GENERATION rather than STALE_MEMBER_EPOCH, as Kafka's validateMemberEpoch).
  // TxnOffsetCommit has no such versions, and answers ILLEGAL_GENERATION for a stale epoch of either kind
  // (validateTransactionalOffsetCommit).
  if (!transactional && !m->uses_classic_protocol() && api_version < 9)
    return error_code::unsupported_version;
  if (epoch != m->member_epoch) {
    return m->uses_classic_protocol() || transactional ? error_code::illegal_generation
                                                       : error_code::stale_member_epoch;
  }
  return error_code::none;
}

error_code consumer_group_manager::validate_offset_fetch(const std::string& id,
                                                         const std::optional<std::string>& member_id,
                                                         int32_t epoch) const {
  const consumer_group* g = find(id);
  if (!g || !member_id || member_id->empty()) return error_code::none;
  const consumer_member* m = g->member(*member_id);
  if (!m) return error_code::unknown_member_id;
  if (epoch != m->member_epoch) {
    return m->uses_classic_protocol() ? error_code::illegal_generation : error_code::stale_member_epoch;
  }
  return error_code::none;
}

result<std::vector<coordinator_record>> consumer_group_manager::delete_records(const std::string& id) const {
  const consumer_group* g = find(id);
  if (!g) return status::error(error_code::group_id_not_found, "group " + id + " does not exist");
  if (!g->is_empty()) return status::error(error_code::non_empty_group, "group " + id + " has members");
  std::vector<coordinator_record> records;
  for (const auto& [mid, tp] : g->target())
    records.push_back(consumer_group_target_member_tombstone(id, mid));
  records.push_back(consumer_group_target_epoch_tombstone(id));
  records.push_back(consumer_group_partition_metadata_tombstone(id));
  records.push_back(consumer_group_epoch_tombstone(id));
  return records;
}

std::set<std::string> consumer_group_manager::subscribed_topics_of(const consumer_group& g) const {
  std::set<std::string> out;
  for (const auto& [mid, m] : g.members()) {
    for (const auto& t : subscribed_topics(m, _catalog)) out.insert(t);
  }
  return out;
}

void consumer_group_manager::remove_group(const std::string& id) {
  _timers.cancel_prefix("cg-session|" + id + "|");
  _timers.cancel_prefix("cg-rebalance|" + id + "|");
  _timers.cancel_prefix("cg-sync|" + id + "|");
  _timers.cancel_prefix("cg-join|" + id + "|");
  _groups.erase(id);
  _partition_of_group.erase(id);
}

// --- Load

status consumer_group_manager::replay(int32_t partition, std::span<const uint8_t> key,
                                      std::optional<std::span<const uint8_t>> value) {
  auto decoded = decode_consumer_group_record(key, value);
  if (!decoded) return decoded.error();
  auto& r = *decoded;
  if (_runtime.partition_of(r.group_id) != partition) {
    return status::error(error_code::corrupt_message,
                         "consumer group " + r.group_id + " in partition " + std::to_string(partition));
  }
  auto git = _groups.find(r.group_id);
  if (r.key_version == consumer_group_metadata_key_version && r.tombstone) {
    if (git != _groups.end()) remove_group(r.group_id);
    return status::success();
  }
  if (git == _groups.end()) {
    if (r.tombstone) return status::success();
    git = _groups.emplace(r.group_id, consumer_group(r.group_id)).first;
    _partition_of_group[r.group_id] = partition;
  }
  consumer_group& g = git->second;
  switch (r.key_version) {
    case consumer_group_metadata_key_version:
      g.set_group_epoch(*r.epoch);
      break;
    case consumer_group_partition_metadata_key_version:
      if (r.partition_metadata) {
        std::map<std::string, int32_t> m;
        for (const auto& t : r.partition_metadata->topics) m[t.topic_name] = t.num_partitions;
        g.set_subscription_metadata(std::move(m));
      } else {
        g.set_subscription_metadata({});
      }
      break;
    case consumer_group_member_metadata_key_version: {
      if (r.tombstone) {
        g.remove_member(r.member_id);
        break;
      }
      consumer_member m;
      if (const auto* old = g.member(r.member_id)) m = *old;
      m.member_id = r.member_id;
      m.instance_id = r.member->instance_id;
      m.rack_id = r.member->rack_id;
      m.client_id = r.member->client_id;
      m.client_host = r.member->client_host;
      m.subscribed_topic_names = r.member->subscribed_topic_names;
      m.subscribed_topic_regex = r.member->subscribed_topic_regex;
      m.rebalance_timeout_ms = r.member->rebalance_timeout_ms;
      m.server_assignor = r.member->server_assignor;
      m.classic = classic_metadata_of(*r.member);
      g.put_member(std::move(m));
      break;
    }
    case consumer_group_target_assignment_metadata_key_version:
      g.set_assignment_epoch(r.tombstone ? 0 : *r.epoch);
      break;
    case consumer_group_target_assignment_member_key_version:
      if (r.tombstone) {
        g.remove_target(r.member_id);
      } else {
        g.set_target(r.member_id, *r.target);
      }
      break;
    case consumer_group_current_member_assignment_key_version: {
      if (r.tombstone) break;  // the member tombstone removes the member
      consumer_member m;
      if (const auto* old = g.member(r.member_id)) m = *old;
      m.member_id = r.member_id;
      m.member_epoch = r.current->member_epoch;
      m.previous_member_epoch = r.current->previous_member_epoch;
      m.state = static_cast<member_state>(r.current->state);
      m.assigned = current_assigned(*r.current);
      m.pending_revocation = current_pending(*r.current);
      g.put_member(std::move(m));
      break;
    }
    default:
      break;
  }
  return status::success();
}

void consumer_group_manager::complete_loading(int32_t partition) {
  // GroupMetadataManager.onLoaded: every loaded member gets a fresh session.
  for (auto& [gid, g] : _groups) {
    if (_partition_of_group[gid] != partition) continue;
    for (const auto& [mid, m] : g.members()) {
      schedule_session(gid, mid);
      if (m.state == member_state::unrevoked_partitions && !m.uses_classic_protocol()) {
        schedule_rebalance_timeout(gid, m);
      }
    }
  }
}

void consumer_group_manager::drop_partition(int32_t partition) {
  std::vector<std::string> ids;
  for (const auto& [gid, p] : _partition_of_group) {
    if (p == partition) ids.push_back(gid);
  }
  for (const auto& id : ids) remove_group(id);
}

}  // namespace mala::coordinator
