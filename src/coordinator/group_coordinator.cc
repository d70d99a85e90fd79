#include "mala/coordinator/group_coordinator.h"

#include <algorithm>
#include <cctype>
#include <random>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "consumer_group_manager.h"
#include "mala/common/logging.h"
#include "mala/coordinator/consumer_protocol.h"
#include "mala/coordinator/group_placement.h"
#include "mala/coordinator/keyed_timer.h"
#include "mala/protocol/wire.h"

namespace mala::coordinator {

namespace {

namespace proto = mala::protocol;
using state = classic_group_state;
using join_response = proto::join_group_response;
using sync_response = proto::sync_group_response;
using assignment_map = std::map<std::string, std::vector<uint8_t>>;

// Timer keys. Every key of a group starts with the group id and a NUL (group ids are strings of any bytes,
// so the separator keeps "a" from matching the keys of "ab"); the retention check's key has no NUL.
std::string group_prefix(const std::string& group) {
  std::string k = group;
  k.push_back('\0');
  return k;
}
std::string heartbeat_key(const std::string& group, const std::string& member) {
  return group_prefix(group) + "heartbeat" + '\0' + member;
}
std::string join_key(const std::string& group) {
  return group_prefix(group) + "join";
}
std::string sync_key(const std::string& group) {
  return group_prefix(group) + "sync";
}
const std::string retention_key = "offsets-retention-check";

// UUID.randomUUID().toString(): what Kafka appends to a client id to make a member id.
std::string random_uuid(std::mt19937_64& rng) {
  uint64_t hi = rng();
  uint64_t lo = rng();
  hi = (hi & 0xFFFFFFFFFFFF0FFFULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;  // IETF variant
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xFFFF, hi & 0xFFFF,
                     lo >> 48, lo & 0xFFFFFFFFFFFFULL);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}
std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
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

error_code append_error_to_client_error(error_code e) {
  switch (e) {
    case error_code::unknown_topic_or_partition:
    case error_code::not_enough_replicas:
    case error_code::not_enough_replicas_after_append:
    case error_code::request_timed_out:
      return error_code::coordinator_not_available;
    case error_code::not_leader_or_follower:
    case error_code::kafka_storage_error:
      return error_code::not_coordinator;
    case error_code::message_too_large:
    case error_code::record_list_too_large:
    case error_code::invalid_fetch_size:
      return error_code::unknown_server_error;
    default:
      return e;
  }
}

struct group_coordinator::impl {
  // One group of any type. Only classic groups exist so far; the KIP-848 consumer groups will get their own
  // state here (a type tag and a consumer_group), sharing the id space, the partition and the offsets, as
  // Kafka's GroupMetadataManager keeps both kinds in one map and converts between them on upgrade.
  struct group_slot {
    int32_t partition = 0;
    uint64_t serial = 0;  // tells a group from a later one of the same id
    classic_group group;
  };
  struct partition_entry {
    partition_status status = partition_status::loading;
    uint64_t epoch = 0;
    int32_t writes_in_flight = 0;
    std::vector<std::function<void()>> after_writes;  // require_stable fetches waiting for the writes
  };
  using topic_offsets = std::map<int32_t, committed_offset>;
  using group_offsets = std::map<std::string, topic_offsets>;

  group_coordinator_config& config;
  record_writer& writer;
  std::function<int64_t()> clock;
  keyed_timer timers;
  std::map<std::string, group_slot> groups;
  std::map<std::string, group_offsets> offsets;
  std::map<int32_t, partition_entry> partitions;
  uint64_t next_serial = 1;
  uint64_t next_epoch = 1;
  std::mt19937_64 rng{std::random_device{}()};
  std::shared_ptr<spdlog::logger> log = subsystem_logger("coordinator");
  std::unique_ptr<consumer_group_manager> consumer;

  impl(group_coordinator_config& c, record_writer& w, std::function<int64_t()> clock_ms)
      : config(c), writer(w), clock(std::move(clock_ms)) {
    consumer_group_host host;
    host.now = [this] { return now(); };
    host.partition_of = [this](const std::string& id) { return partition_of(id); };
    host.partition_error = [this](const std::string& id) { return partition_error(id); };
    host.write = [this](int32_t p, std::vector<coordinator_record> r, std::function<void(error_code)> d) {
      write(p, std::move(r), std::move(d));
    };
    host.classic_group_empty = [this](const std::string& id) -> std::optional<bool> {
      const auto* slot = find_slot(id);
      if (!slot || slot->group.in_state(state::dead)) return std::nullopt;
      return slot->group.is_empty();
    };
    host.drop_empty_classic_group = [this](const std::string& id, std::vector<coordinator_record>& records) {
      // Kafka's upgrade of an empty classic group: its metadata gets a tombstone, the offsets stay.
      records.push_back(group_metadata_tombstone(id));
      remove_group(id);
    };
    host.classic_group_for_upgrade = [this](const std::string& id) { return snapshot_for_upgrade(id); };
    host.drop_classic_group = [this](const std::string& id, std::vector<coordinator_record>& records) {
      if (auto* slot = find_slot(id)) {
        // ConsumerGroup conversion: whoever waits in this group's rebalance must rejoin the new group.
        for (auto& [mid, m] : slot->group.members_for_update()) {
          slot->group.complete_join(m, join_error_response(mid, error_code::rebalance_in_progress));
          slot->group.complete_sync(m, sync_error_response(error_code::rebalance_in_progress));
        }
      }
      records.push_back(group_metadata_tombstone(id));
      remove_group(id);
    };
    host.create_classic_group = [this](const classic_group_snapshot& snapshot,
                                       std::vector<coordinator_record>& records) {
      create_from_snapshot(snapshot, records);
    };
    host.log_info = [this](const std::string& line) { log->info("{}", line); };
    consumer = std::make_unique<consumer_group_manager>(config, std::move(host), timers);
  }

  // --- Conversion between the two kinds of group (consumer_group_manager.h)

  std::optional<classic_group_snapshot> snapshot_for_upgrade(const std::string& id) const {
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

  // The classic group of a downgrade (ClassicGroup.fromConsumerGroup): the members with their assignments at
  // the consumer group's epoch, Stable, then (unless a static member just
  // took the place of the last consumer-protocol member) a rebalance so that they agree on a new generation.
  void create_from_snapshot(const classic_group_snapshot& snapshot,
                            std::vector<coordinator_record>& records) {
    const std::string& id = snapshot.group_id;
    remove_group(id);
    auto [it, inserted] = groups.try_emplace(
        id,
        group_slot{partition_of(id), next_serial++,
                   classic_group(id, state::stable, snapshot.generation, std::string(consumer_protocol_type),
                                 std::nullopt, std::nullopt, now())});
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

  int64_t now() const { return clock(); }
  int32_t partition_of(const std::string& group_id) const {
    return group_partition(group_id, config.offsets_topic_num_partitions);
  }

  // NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for a group whose partition does not serve here.
  error_code partition_error(const std::string& group_id) const {
    auto it = partitions.find(partition_of(group_id));
    if (it == partitions.end()) return error_code::not_coordinator;
    if (it->second.status == partition_status::loading) return error_code::coordinator_load_in_progress;
    return error_code::none;
  }

  group_slot* find_slot(const std::string& group_id) {
    auto it = groups.find(group_id);
    return it == groups.end() ? nullptr : &it->second;
  }
  const group_slot* find_slot(const std::string& group_id) const {
    auto it = groups.find(group_id);
    return it == groups.end() ? nullptr : &it->second;
  }
  // The group if it is still the incarnation `serial`.
  classic_group* group_if(const std::string& group_id, uint64_t serial) {
    auto* slot = find_slot(group_id);
    return slot && slot->serial == serial ? &slot->group : nullptr;
  }
  group_slot& create_group(const std::string& group_id) {
    auto [it, inserted] = groups.try_emplace(
        group_id,
        group_slot{partition_of(group_id), next_serial++, classic_group(group_id, state::empty, now())});
    (void)inserted;
    return it->second;
  }
  void remove_group(const std::string& group_id) {
    timers.cancel_prefix(group_prefix(group_id));
    groups.erase(group_id);
  }

  // --- Writes

  void write(int32_t partition, std::vector<coordinator_record> records,
             std::function<void(error_code)> done) {
    auto owned = partitions.find(partition);
    if (owned == partitions.end()) return done(error_code::not_leader_or_follower);
    const uint64_t epoch = owned->second.epoch;
    ++owned->second.writes_in_flight;
    writer.append(partition, std::move(records),
                  [this, partition, epoch, done = std::move(done)](error_code e) {
                    auto it = partitions.find(partition);
                    const bool same = it != partitions.end() && it->second.epoch == epoch;
                    if (!same) {
                      // The partition moved away (or was reloaded) meanwhile: whatever this write was for is
                      // gone with it.
                      done(error_code::not_leader_or_follower);
                      return;
                    }
                    --it->second.writes_in_flight;
                    done(e);
                    it = partitions.find(partition);
                    if (it != partitions.end() && it->second.writes_in_flight == 0 &&
                        !it->second.after_writes.empty()) {
                      auto waiting = std::move(it->second.after_writes);
                      it->second.after_writes.clear();
                      for (auto& fn : waiting) fn();
                    }
                  });
  }

  proto::group_metadata_value metadata_value(const classic_group& g, const assignment_map* assignment) const {
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

  // A GroupMetadata record whose failure is only logged (an empty group's metadata, a group that became
  // Empty): if it is lost, the previous generation comes back on load and expires (Kafka does the same).
  void write_group_metadata(const classic_group& g, proto::group_metadata_value value) {
    const std::string id = g.group_id();
    write(partition_of(id), {group_metadata_record(id, value)}, [this, id](error_code e) {
      if (e != error_code::none) {
        log->warn("failed to write the metadata of group {}: {}", id, error_name(e));
      }
    });
  }

  // --- Sessions

  void schedule_heartbeat(classic_group& g, const std::string& member_id, int64_t timeout_ms) {
    const std::string gid = g.group_id();
    const uint64_t serial = find_slot(gid)->serial;
    timers.schedule(heartbeat_key(gid, member_id), now() + timeout_ms,
                    [this, gid, member_id, serial] { expire_member_heartbeat(gid, serial, member_id); });
  }
  void reschedule_heartbeat(classic_group& g, const classic_group_member& m) {
    schedule_heartbeat(g, m.member_id, m.session_timeout_ms);
  }

  void expire_member_heartbeat(const std::string& gid, uint64_t serial, const std::string& member_id) {
    auto* g = group_if(gid, serial);
    if (!g || g->in_state(state::dead)) return;
    if (g->is_pending_member(member_id)) {
      log->info("pending member {} of group {} removed after its session timeout", member_id, gid);
      g->remove(member_id);
      if (g->in_state(state::preparing_rebalance) && g->has_all_members_joined()) complete_join(*g);
      return;
    }
    auto* m = g->member(member_id);
    if (!m || m->has_satisfied_heartbeat()) return;
    log->info("member {} of group {} failed (session timeout), removing it", member_id, gid);
    remove_member_and_update_group(*g, member_id);
  }

  // Removes a member, answering whatever it had parked (a new member may time out while its JoinGroup waits:
  // UNKNOWN_MEMBER_ID makes a live client join again).
  void remove_member(classic_group& g, const std::string& member_id) {
    if (auto* m = g.member(member_id)) {
      g.complete_join(*m, join_error_response(std::string(unknown_member_id), error_code::unknown_member_id));
      g.complete_sync(*m, sync_error_response(error_code::unknown_member_id));
    }
    g.remove(member_id);
    timers.cancel(heartbeat_key(g.group_id(), member_id));
  }

  void remove_member_and_update_group(classic_group& g, const std::string& member_id) {
    remove_member(g, member_id);
    if (g.in_state(state::stable) || g.in_state(state::completing_rebalance)) {
      maybe_prepare_rebalance_or_complete_join(g);
    } else if (g.in_state(state::preparing_rebalance) && g.has_all_members_joined()) {
      complete_join(g);
    }
  }

  // --- Rebalance (GroupMetadataManager's classic group methods)

  void maybe_prepare_rebalance_or_complete_join(classic_group& g) {
    if (g.can_rebalance()) {
      prepare_rebalance(g);
    } else {
      maybe_complete_join_phase(g);
    }
  }

  void prepare_rebalance(classic_group& g) {
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
      const int32_t delay = config.initial_rebalance_delay_ms;
      const int32_t remaining = std::max(g.rebalance_timeout_ms() - delay, 0);
      timers.schedule(join_key(gid), now() + delay, [this, gid, serial, delay, remaining] {
        try_complete_initial_rebalance(gid, serial, delay, remaining);
      });
    }
    g.transition_to(state::preparing_rebalance, now());
    log->info("preparing to rebalance group {} with old generation {}", gid, g.generation_id());
    if (!initial) maybe_complete_join_else_schedule(g);
  }

  void maybe_complete_join_else_schedule(classic_group& g) {
    if (g.has_all_members_joined()) {
      complete_join(g);
      return;
    }
    const std::string gid = g.group_id();
    const uint64_t serial = find_slot(gid)->serial;
    timers.schedule(join_key(gid), now() + g.rebalance_timeout_ms(), [this, gid, serial] {
      if (auto* group = group_if(gid, serial)) complete_join(*group);
    });
  }

  void try_complete_initial_rebalance(const std::string& gid, uint64_t serial, int32_t delay,
                                      int32_t remaining) {
    auto* g = group_if(gid, serial);
    if (!g) return;
    if (g->new_member_added() && remaining != 0) {
      g->set_new_member_added(false);
      const int32_t new_delay = std::min(config.initial_rebalance_delay_ms, remaining);
      const int32_t new_remaining = std::max(remaining - delay, 0);
      timers.schedule(join_key(gid), now() + new_delay, [this, gid, serial, new_delay, new_remaining] {
        try_complete_initial_rebalance(gid, serial, new_delay, new_remaining);
      });
      return;
    }
    complete_join(*g);
  }

  void maybe_complete_join_phase(classic_group& g) {
    if (!g.in_state(state::preparing_rebalance)) return;
    if (g.previous_state() == state::empty) return;  // the initial rebalance completes on its timer
    if (!g.has_all_members_joined()) return;
    complete_join(g);
  }

  void complete_join(classic_group& g) {
    const std::string gid = g.group_id();
    timers.cancel(join_key(gid));
    // Dynamic members that did not rejoin in time are out; static ones keep their place.
    for (const auto& id : g.not_yet_rejoined_members()) {
      const auto* m = g.member(id);
      if (m && !m->is_static()) {
        log->info("group {}: member {} did not rejoin in time, removing it", gid, id);
        remove_member(g, id);
      }
    }
    if (g.in_state(state::dead)) return;
    if (!g.maybe_elect_new_joined_leader() && !g.members().empty()) {
      // Nobody rejoined: try again after another rebalance timeout, until sessions expire the members.
      log->warn("group {} could not complete its rebalance because no member rejoined", gid);
      const uint64_t serial = find_slot(gid)->serial;
      timers.schedule(join_key(gid), now() + g.rebalance_timeout_ms(), [this, gid, serial] {
        if (auto* group = group_if(gid, serial)) complete_join(*group);
      });
      return;
    }
    g.init_next_generation(now());
    if (g.in_state(state::empty)) {
      log->info("group {} with generation {} is now empty", gid, g.generation_id());
      write_group_metadata(g, metadata_value(g, nullptr));
      return;
    }
    log->info("stabilized group {} generation {} with {} member(s)", gid, g.generation_id(),
              g.members().size());
    std::vector<std::string> ids;
    for (const auto& [id, m] : g.members()) ids.push_back(id);
    for (const auto& id : ids) {
      auto* m = g.member(id);
      if (!m) continue;
      join_response r;
      r.error_code = to_wire(error_code::none);
      if (g.is_leader(id)) r.members = g.current_member_metadata();
      r.member_id = id;
      r.generation_id = g.generation_id();
      r.protocol_name = g.protocol_name();
      r.protocol_type = g.protocol_type();
      r.leader = g.leader_id().value_or("");
      r.skip_assignment = false;
      g.complete_join(*m, std::move(r));
      reschedule_heartbeat(g, *m);
      m->is_new = false;
      g.add_pending_sync_member(id);
    }
    schedule_pending_sync(g);
  }

  void schedule_pending_sync(classic_group& g) {
    const std::string gid = g.group_id();
    const uint64_t serial = find_slot(gid)->serial;
    const int32_t generation = g.generation_id();
    timers.schedule(sync_key(gid), now() + g.rebalance_timeout_ms(),
                    [this, gid, serial, generation] { expire_pending_sync(gid, serial, generation); });
  }

  void expire_pending_sync(const std::string& gid, uint64_t serial, int32_t generation) {
    auto* g = group_if(gid, serial);
    if (!g || g->generation_id() != generation) return;
    if (!(g->in_state(state::completing_rebalance) || g->in_state(state::stable))) return;
    if (g->has_received_sync_from_all_members()) return;
    const std::set<std::string> late = g->pending_sync_members();
    for (const auto& id : late) {
      log->info("group {}: member {} sent no SyncGroup in time, removing it", gid, id);
      remove_member(*g, id);
    }
    prepare_rebalance(*g);
  }

  void remove_sync_expiration(classic_group& g) {
    g.clear_pending_sync_members();
    timers.cancel(sync_key(g.group_id()));
  }

  void remove_pending_sync_member(classic_group& g, const std::string& member_id) {
    g.remove_pending_sync_member(member_id);
    if (g.in_state(state::completing_rebalance) || g.in_state(state::stable)) {
      if (g.has_received_sync_from_all_members()) timers.cancel(sync_key(g.group_id()));
    } else {
      timers.cancel(sync_key(g.group_id()));
    }
  }

  void propagate_assignment(classic_group& g, error_code e) {
    for (auto& [id, m] : g.members_for_update()) {
      sync_response r;
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

  void reset_and_propagate_assignment_with_error(classic_group& g, error_code e) {
    for (auto& [id, m] : g.members_for_update()) {
      m.assignment.clear();
    }
    propagate_assignment(g, e);
  }

  void set_and_propagate_assignment(classic_group& g, const assignment_map& assignment) {
    for (auto& [id, m] : g.members_for_update()) {
      auto it = assignment.find(id);
      m.assignment = it == assignment.end() ? std::vector<uint8_t>{} : it->second;
    }
    propagate_assignment(g, error_code::none);
  }

  bool accept_joining_member(const classic_group& g, const std::string& member_id) const {
    const auto max = static_cast<size_t>(config.max_group_size);
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

  // --- JoinGroup

  void join_group(const request_origin& origin, proto::join_group_request req, join_callback done) {
    const std::string& gid = req.group_id;
    if (auto e = partition_error(gid); e != error_code::none)
      return done(join_error_response(req.member_id, e));
    if (gid.empty()) return done(join_error_response(req.member_id, error_code::invalid_group_id));
    if (req.session_timeout_ms < config.min_session_timeout_ms ||
        req.session_timeout_ms > config.max_session_timeout_ms) {
      return done(join_error_response(req.member_id, error_code::invalid_session_timeout));
    }
    // A classic member joining a KIP-848 consumer group: hosted as a classic member of the consumer group.
    if (consumer->contains(gid)) return consumer->classic_join(origin, req, std::move(done));
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

  void join_new_member(const request_origin& origin, const proto::join_group_request& req, classic_group& g,
                       const join_callback& done) {
    if (g.in_state(state::dead)) {
      return done(join_error_response(std::string(unknown_member_id), error_code::coordinator_not_available));
    }
    const auto protocols = protocols_of(req);
    if (!g.supports_protocols(req.protocol_type, protocols)) {
      return done(
          join_error_response(std::string(unknown_member_id), error_code::inconsistent_group_protocol));
    }
    // ClassicGroup.generateMemberId: the group.instance.id (static) or the client id, then a random UUID.
    const std::string new_id =
        (req.group_instance_id ? *req.group_instance_id : origin.client_id) + "-" + random_uuid(rng);
    if (req.group_instance_id) {
      if (const std::string* existing = g.static_member_id(*req.group_instance_id)) {
        log->info("static member {} of group {} rejoins with an unknown member id: replacing member {} by {}",
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

  void join_existing_member(const request_origin& origin, const proto::join_group_request& req,
                            classic_group& g, const join_callback& done) {
    const std::string& member_id = req.member_id;
    if (g.in_state(state::dead))
      return done(join_error_response(member_id, error_code::coordinator_not_available));
    auto protocols = protocols_of(req);
    if (!g.supports_protocols(req.protocol_type, protocols)) {
      return done(join_error_response(member_id, error_code::inconsistent_group_protocol));
    }
    if (g.is_pending_member(member_id)) {
      // A pending member cannot be static (static members never get MEMBER_ID_REQUIRED).
      if (req.group_instance_id)
        return done(join_error_response(member_id, error_code::unknown_server_error));
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
    log->warn("member {} rejoins group {} in unexpected state {}", member_id, g.group_id(),
              state_name(g.state()));
    done(join_error_response(member_id, error_code::unknown_member_id));
  }

  void update_member_then_rebalance_or_complete_join(const proto::join_group_request& req, classic_group& g,
                                                     classic_group_member& m,
                                                     std::vector<member_protocol> protocols,
                                                     const join_callback& done) {
    // A JoinGroup replacing one still parked (the client gave up on it and retried): the older one is
    // answered so that it does not stay parked forever.
    if (m.is_awaiting_join()) {
      g.complete_join(m, join_error_response(m.member_id, error_code::rebalance_in_progress));
    }
    g.update_member(m, std::move(protocols), req.rebalance_timeout_ms, req.session_timeout_ms, done);
    maybe_prepare_rebalance_or_complete_join(g);
  }

  void add_member_then_rebalance_or_complete_join(const request_origin& origin,
                                                  const proto::join_group_request& req, classic_group& g,
                                                  const std::string& member_id, const join_callback& done) {
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
    schedule_heartbeat(g, member_id, config.new_member_join_timeout_ms);
    maybe_prepare_rebalance_or_complete_join(g);
  }

  void update_static_member_then_rebalance_or_complete_join(const request_origin& origin,
                                                            const proto::join_group_request& req,
                                                            classic_group& g, const std::string& old_id,
                                                            const std::string& new_id,
                                                            const join_callback& done) {
    const std::string gid = g.group_id();
    const std::string instance_id = *req.group_instance_id;
    const std::optional<std::string> current_leader = g.leader_id();
    timers.cancel(heartbeat_key(gid, old_id));
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
        write(partition_of(gid), {group_metadata_record(gid, metadata_value(g, &assignment))},
              [this, gid, serial, instance_id, old_id, new_id, current_leader, old_rebalance_timeout,
               old_session_timeout, old_protocols, skip_assignment_supported, done](error_code e) {
                auto* group = group_if(gid, serial);
                auto* m = group ? group->member(new_id) : nullptr;
                if (e != error_code::none) {
                  log->warn("failed to persist static member {} of group {} ({}): reverting to member id {}",
                            new_id, gid, error_name(e), old_id);
                  if (group && m) {
                    group->update_member(*m, old_protocols, old_rebalance_timeout, old_session_timeout,
                                         nullptr);
                    auto& old_member = group->replace_static_member(instance_id, new_id, old_id);
                    timers.cancel(heartbeat_key(gid, new_id));
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

  // --- SyncGroup

  void sync_group(const proto::sync_group_request& req, sync_callback done) {
    const std::string& gid = req.group_id;
    if (auto e = partition_error(gid); e != error_code::none) return done(sync_error_response(e));
    if (gid.empty()) return done(sync_error_response(error_code::invalid_group_id));
    if (consumer->contains(gid)) return consumer->classic_sync(req, std::move(done));
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
      log->info("assignment received from leader {} of group {} for generation {}", req.member_id, gid,
                g.generation_id());
      // Every member gets an assignment, empty if the leader gave it none.
      assignment_map assignment;
      for (const auto& a : req.assignments) assignment[a.member_id] = a.assignment;
      for (const auto& [id, member] : g.members()) assignment.try_emplace(id);
      const int32_t generation = req.generation_id;
      const std::string leader_id = req.member_id;
      write(partition_of(gid), {group_metadata_record(gid, metadata_value(g, &assignment))},
            [this, gid, serial, generation, assignment, leader_id](error_code err) {
              // Another member may have joined meanwhile: only the same generation, still completing, goes
              // on.
              auto* group = group_if(gid, serial);
              if (!group || !group->in_state(state::completing_rebalance) ||
                  group->generation_id() != generation) {
                return;
              }
              if (err != error_code::none) {
                const error_code client_error = append_error_to_client_error(err);
                log->warn("failed to store the assignment of group {}: {}", gid, error_name(err));
                reset_and_propagate_assignment_with_error(*group, client_error);
                maybe_prepare_rebalance_or_complete_join(*group);
                return;
              }
              set_and_propagate_assignment(*group, assignment);
              group->transition_to(state::stable, now());
            });
      return;
    }

    if (g.in_state(state::stable)) {
      remove_pending_sync_member(g, req.member_id);
      auto* m = g.member(req.member_id);
      sync_response r;
      r.error_code = to_wire(error_code::none);
      r.protocol_type = g.protocol_type();
      r.protocol_name = g.protocol_name();
      r.assignment = m->assignment;
      return done(std::move(r));
    }
    done(sync_error_response(error_code::coordinator_not_available));
  }

  // --- Heartbeat and LeaveGroup

  proto::heartbeat_response heartbeat(const proto::heartbeat_request& req) {
    proto::heartbeat_response r;
    auto err = [&](error_code e) {
      r.error_code = to_wire(e);
      return r;
    };
    const std::string& gid = req.group_id;
    if (auto e = partition_error(gid); e != error_code::none) {
      // While the group is loading the member is answered as if all were well (Kafka does the same).
      return err(e == error_code::coordinator_load_in_progress ? error_code::none : e);
    }
    if (gid.empty()) return err(error_code::invalid_group_id);
    if (consumer->contains(gid)) return consumer->classic_heartbeat(req);
    group_slot* slot = find_slot(gid);
    if (!slot) return err(error_code::unknown_member_id);
    classic_group& g = slot->group;
    if (g.in_state(state::dead)) return err(error_code::coordinator_not_available);
    if (auto e = g.validate_member(req.member_id, req.group_instance_id); e != error_code::none)
      return err(e);
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

  proto::leave_group_response leave_group(const proto::leave_group_request& req) {
    proto::leave_group_response resp;
    const std::string& gid = req.group_id;
    if (auto e = partition_error(gid); e != error_code::none) {
      resp.error_code = to_wire(e);
      return resp;
    }
    if (gid.empty()) {
      resp.error_code = to_wire(error_code::invalid_group_id);
      return resp;
    }
    if (consumer->contains(gid)) return consumer->classic_leave(req);
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
        const std::string* existing =
            m.group_instance_id ? g.static_member_id(*m.group_instance_id) : nullptr;
        if (existing) {
          const std::string id = *existing;
          log->info("group {}: static member {} removed by LeaveGroup", gid, id);
          remove_member(g, id);
          member_answer(m, error_code::none);
          any_left = true;
        } else {
          member_answer(m, error_code::unknown_member_id);
        }
      } else if (g.is_pending_member(m.member_id)) {
        g.remove(m.member_id);
        timers.cancel(heartbeat_key(gid, m.member_id));
        member_answer(m, error_code::none);
        any_left = true;
      } else if (auto e = g.validate_member(m.member_id, m.group_instance_id); e != error_code::none) {
        member_answer(m, e);
      } else {
        log->info("group {}: member {} left ({})", gid, m.member_id, m.reason.value_or("no reason given"));
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

  // --- Offsets

  error_code validate_offset_commit(const classic_group& g, const proto::offset_commit_request& req) const {
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

  static proto::offset_commit_response commit_error(const proto::offset_commit_request& req, error_code e) {
    proto::offset_commit_response resp;
    for (const auto& t : req.topics) {
      auto& rt = resp.topics.emplace_back();
      rt.name = t.name;
      for (const auto& p : t.partitions) rt.partitions.push_back({p.partition_index, to_wire(e)});
    }
    return resp;
  }

  void commit_offsets(const request_origin& origin, proto::offset_commit_request req,
                      offset_commit_callback done) {
    const std::string gid = req.group_id;
    if (auto e = partition_error(gid); e != error_code::none) return done(commit_error(req, e));
    group_slot* slot = find_slot(gid);
    if (consumer->contains(gid)) {
      if (auto e = consumer->validate_offset_commit(gid, req.member_id, req.generation_id_or_member_epoch,
                                                    origin.api_version);
          e != error_code::none) {
        return done(commit_error(req, e));
      }
      slot = nullptr;
    } else if (!slot) {
      if (req.generation_id_or_member_epoch < 0) {
        // A "simple" group: offsets without membership (the admin client, assign()-based consumers).
        log->info("group {}: created as a simple group by an offset commit", gid);
        slot = &create_group(gid);
      } else {
        // v9+ says what happened; older versions keep ILLEGAL_GENERATION, which their clients handle.
        return done(commit_error(
            req, origin.api_version >= 9 ? error_code::group_id_not_found : error_code::illegal_generation));
      }
    }
    if (slot) {
      classic_group& g = slot->group;
      if (auto e = validate_offset_commit(g, req); e != error_code::none) return done(commit_error(req, e));
      // A commit keeps a classic member's session alive.
      if (g.in_state(state::stable) || g.in_state(state::preparing_rebalance)) {
        if (auto* m = g.member(req.member_id)) reschedule_heartbeat(g, *m);
      }
    }
    const int64_t now_ms = now();
    std::optional<int64_t> expire;
    if (req.retention_time_ms != -1) expire = now_ms + req.retention_time_ms;

    proto::offset_commit_response resp;
    std::vector<coordinator_record> records;
    struct applied {
      std::string topic;
      int32_t partition;
      committed_offset value;
    };
    std::vector<applied> pending;
    for (const auto& t : req.topics) {
      auto& rt = resp.topics.emplace_back();
      rt.name = t.name;
      for (const auto& p : t.partitions) {
        const std::string metadata = p.committed_metadata.value_or("");
        if (p.committed_metadata &&
            p.committed_metadata->size() > static_cast<size_t>(config.offset_metadata_max_bytes)) {
          rt.partitions.push_back({p.partition_index, to_wire(error_code::offset_metadata_too_large)});
          continue;
        }
        rt.partitions.push_back({p.partition_index, to_wire(error_code::none)});
        proto::offset_commit_value v;
        v.offset = p.committed_offset;
        v.leader_epoch = p.committed_leader_epoch;
        v.metadata = metadata;
        v.commit_timestamp = now_ms;
        v.expire_timestamp = expire.value_or(-1);
        records.push_back(offset_commit_record(gid, t.name, p.partition_index, v));
        committed_offset c;
        c.offset = p.committed_offset;
        if (p.committed_leader_epoch >= 0) c.leader_epoch = p.committed_leader_epoch;
        c.metadata = metadata;
        c.commit_timestamp_ms = now_ms;
        c.expire_timestamp_ms = expire;
        pending.push_back({t.name, p.partition_index, std::move(c)});
      }
    }
    if (records.empty()) return done(std::move(resp));
    write(partition_of(gid), std::move(records),
          [this, gid, resp = std::move(resp), pending = std::move(pending),
           done = std::move(done)](error_code e) mutable {
            if (e != error_code::none) {
              const auto client_error = to_wire(append_error_to_client_error(e));
              for (auto& t : resp.topics) {
                for (auto& p : t.partitions) {
                  if (p.error_code == to_wire(error_code::none)) p.error_code = client_error;
                }
              }
              return done(std::move(resp));
            }
            // Committed: now readers see it (a group deleted meanwhile comes back as a simple group, as the
            // log replays the same way).
            if (!find_slot(gid) && !consumer->contains(gid)) create_group(gid);
            for (auto& a : pending) offsets[gid][a.topic][a.partition] = std::move(a.value);
            done(std::move(resp));
          });
  }

  proto::offset_fetch_response::offset_fetch_response_group fetch_offsets_now(
      const proto::offset_fetch_request::offset_fetch_request_group& req) const {
    proto::offset_fetch_response::offset_fetch_response_group out;
    out.group_id = req.group_id;
    if (auto e = partition_error(req.group_id); e != error_code::none) {
      out.error_code = to_wire(e);
      return out;
    }
    const group_slot* slot = find_slot(req.group_id);
    const bool group_exists =
        (slot && !slot->group.in_state(state::dead)) || consumer->contains(req.group_id);
    if (consumer->contains(req.group_id)) {
      // OffsetFetch v9+ from a member of a consumer group: its member epoch must be current.
      if (auto e = consumer->validate_offset_fetch(req.group_id, req.member_id, req.member_epoch);
          e != error_code::none) {
        out.error_code = to_wire(e);
        return out;
      }
    }
    const group_offsets* committed = nullptr;
    if (group_exists) {
      auto it = offsets.find(req.group_id);
      if (it != offsets.end()) committed = &it->second;
    }
    auto fill = [](auto& p, const committed_offset* c) {
      if (c) {
        p.committed_offset = c->offset;
        p.committed_leader_epoch = c->leader_epoch.value_or(-1);
        p.metadata = c->metadata;
      } else {
        p.committed_offset = -1;
        p.committed_leader_epoch = -1;
        p.metadata = "";
      }
      p.error_code = to_wire(error_code::none);
    };
    if (!req.topics) {
      // Every committed partition of the group (kafka-consumer-groups --describe asks so).
      if (!committed) return out;
      for (const auto& [topic, parts] : *committed) {
        auto& t = out.topics.emplace_back();
        t.name = topic;
        for (const auto& [partition, c] : parts) {
          auto& p = t.partitions.emplace_back();
          p.partition_index = partition;
          fill(p, &c);
        }
      }
      return out;
    }
    for (const auto& rt : *req.topics) {
      auto& t = out.topics.emplace_back();
      t.name = rt.name;
      const topic_offsets* parts = nullptr;
      if (committed) {
        auto it = committed->find(rt.name);
        if (it != committed->end()) parts = &it->second;
      }
      for (int32_t index : rt.partition_indexes) {
        auto& p = t.partitions.emplace_back();
        p.partition_index = index;
        const committed_offset* c = nullptr;
        if (parts) {
          auto it = parts->find(index);
          if (it != parts->end()) c = &it->second;
        }
        fill(p, c);
      }
    }
    return out;
  }

  void fetch_offsets(const proto::offset_fetch_request::offset_fetch_request_group& req, bool require_stable,
                     offset_fetch_callback done) {
    if (require_stable) {
      // Kafka runs a require_stable fetch as a write operation, so that it sees every commit in flight: wait
      // for this partition's appends to complete first.
      auto it = partitions.find(partition_of(req.group_id));
      if (it != partitions.end() && it->second.writes_in_flight > 0) {
        it->second.after_writes.push_back(
            [this, req, done = std::move(done)] { done(fetch_offsets_now(req)); });
        return;
      }
    }
    done(fetch_offsets_now(req));
  }

  void delete_offsets(proto::offset_delete_request req, offset_delete_callback done) {
    proto::offset_delete_response resp;
    auto fail = [&](error_code e) {
      resp.error_code = to_wire(e);
      done(std::move(resp));
    };
    const std::string gid = req.group_id;
    if (auto e = partition_error(gid); e != error_code::none) return fail(e);
    if (gid.empty()) return fail(error_code::invalid_group_id);
    if (const consumer_group* cg = consumer->find(gid)) {
      return delete_consumer_group_offsets(*cg, std::move(req), std::move(done));
    }
    group_slot* slot = find_slot(gid);
    if (!slot || slot->group.in_state(state::dead)) return fail(error_code::group_id_not_found);
    classic_group& g = slot->group;
    if ((g.in_state(state::stable) || g.in_state(state::preparing_rebalance) ||
         g.in_state(state::completing_rebalance)) &&
        !g.uses_consumer_protocol()) {
      return fail(error_code::non_empty_group);
    }
    std::vector<coordinator_record> records;
    std::vector<std::pair<std::string, int32_t>> deleted;
    for (const auto& t : req.topics) {
      auto& rt = resp.topics.emplace_back();
      rt.name = t.name;
      const bool subscribed = g.is_subscribed_to_topic(t.name);
      for (const auto& p : t.partitions) {
        rt.partitions.push_back({p.partition_index, to_wire(subscribed ? error_code::group_subscribed_to_topic
                                                                       : error_code::none)});
        if (!subscribed && find_offset(gid, t.name, p.partition_index)) {
          records.push_back(offset_commit_tombstone(gid, t.name, p.partition_index));
          deleted.emplace_back(t.name, p.partition_index);
        }
      }
    }
    if (records.empty()) return done(std::move(resp));
    write(partition_of(gid), std::move(records),
          [this, gid, resp = std::move(resp), deleted = std::move(deleted),
           done = std::move(done)](error_code e) mutable {
            if (e != error_code::none) {
              proto::offset_delete_response failed;
              failed.error_code = to_wire(append_error_to_client_error(e));
              return done(std::move(failed));
            }
            for (const auto& [topic, partition] : deleted) erase_offset(gid, topic, partition);
            done(std::move(resp));
          });
  }

  // OffsetDelete on a consumer group (ConsumerGroup.validateDeleteGroup / isSubscribedToTopic): any state,
  // but not the topics some member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC).
  void delete_consumer_group_offsets(const consumer_group& cg, proto::offset_delete_request req,
                                     offset_delete_callback done) {
    const std::string gid = req.group_id;
    proto::offset_delete_response resp;
    std::set<std::string> subscribed;
    for (const auto& [mid, m] : cg.members()) {
      for (const auto& t : subscribed_topics(m, consumer->topics())) subscribed.insert(t);
    }
    std::vector<coordinator_record> records;
    std::vector<std::pair<std::string, int32_t>> deleted;
    for (const auto& t : req.topics) {
      auto& rt = resp.topics.emplace_back();
      rt.name = t.name;
      const bool is_subscribed = subscribed.contains(t.name);
      for (const auto& p : t.partitions) {
        rt.partitions.push_back(
            {p.partition_index,
             to_wire(is_subscribed ? error_code::group_subscribed_to_topic : error_code::none)});
        if (!is_subscribed && find_offset(gid, t.name, p.partition_index)) {
          records.push_back(offset_commit_tombstone(gid, t.name, p.partition_index));
          deleted.emplace_back(t.name, p.partition_index);
        }
      }
    }
    if (records.empty()) return done(std::move(resp));
    write(partition_of(gid), std::move(records),
          [this, gid, resp = std::move(resp), deleted = std::move(deleted),
           done = std::move(done)](error_code e) mutable {
            if (e != error_code::none) {
              proto::offset_delete_response failed;
              failed.error_code = to_wire(append_error_to_client_error(e));
              return done(std::move(failed));
            }
            for (const auto& [topic, partition] : deleted) erase_offset(gid, topic, partition);
            done(std::move(resp));
          });
  }

  const committed_offset* find_offset(const std::string& gid, const std::string& topic,
                                      int32_t partition) const {
    auto g = offsets.find(gid);
    if (g == offsets.end()) return nullptr;
    auto t = g->second.find(topic);
    if (t == g->second.end()) return nullptr;
    auto p = t->second.find(partition);
    return p == t->second.end() ? nullptr : &p->second;
  }

  void erase_offset(const std::string& gid, const std::string& topic, int32_t partition) {
    auto g = offsets.find(gid);
    if (g == offsets.end()) return;
    auto t = g->second.find(topic);
    if (t == g->second.end()) return;
    t->second.erase(partition);
    if (t->second.empty()) g->second.erase(t);
    if (g->second.empty()) offsets.erase(g);
  }

  // --- Administration

  proto::list_groups_response list_groups(const proto::list_groups_request& req) const {
    proto::list_groups_response resp;
    for (const auto& [p, entry] : partitions) {
      if (entry.status == partition_status::loading) {
        resp.error_code = to_wire(error_code::coordinator_load_in_progress);
        return resp;
      }
    }
    std::set<std::string> states;
    for (const auto& s : req.states_filter) states.insert(lower(trim(s)));
    std::set<std::string> types;
    for (const auto& t : req.types_filter) types.insert(lower(trim(t)));
    for (const auto& [id, slot] : groups) {
      const auto& g = slot.group;
      if (g.in_state(state::dead)) continue;
      if (!states.empty() && !states.contains(lower(std::string(state_name(g.state()))))) continue;
      if (!types.empty() && !types.contains("classic")) continue;
      auto& l = resp.groups.emplace_back();
      l.group_id = id;
      l.protocol_type = g.protocol_type().value_or("");
      l.group_state = std::string(state_name(g.state()));
      l.group_type = "classic";
    }
    consumer->list(states, types, resp.groups);
    std::sort(resp.groups.begin(), resp.groups.end(),
              [](const auto& a, const auto& b) { return a.group_id < b.group_id; });
    return resp;
  }

  std::vector<proto::describe_groups_response::described_group> describe_groups(
      const std::vector<std::string>& ids) const {
    std::vector<proto::describe_groups_response::described_group> out;
    for (const auto& id : ids) {
      auto& d = out.emplace_back();
      d.group_id = id;
      if (auto e = partition_error(id); e != error_code::none) {
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

  void delete_groups(std::vector<std::string> ids, delete_groups_callback done) {
    using result = proto::delete_groups_response::deletable_group_result;
    struct shared_state {
      std::vector<result> results;
      size_t outstanding = 0;
      delete_groups_callback done;
    };
    auto st = std::make_shared<shared_state>();
    st->done = std::move(done);
    std::map<int32_t, std::vector<std::pair<size_t, std::string>>> by_partition;
    std::map<int32_t, std::vector<coordinator_record>> records;
    for (const auto& id : ids) {
      const size_t slot_index = st->results.size();
      st->results.push_back({id, to_wire(error_code::none)});
      if (auto e = partition_error(id); e != error_code::none) {
        st->results[slot_index].error_code = to_wire(e);
        continue;
      }
      const group_slot* slot = find_slot(id);
      if (consumer->contains(id)) {
        std::vector<coordinator_record> group_records;
        if (auto e = consumer->delete_records(id, group_records); e != error_code::none) {
          st->results[slot_index].error_code = to_wire(e);
          continue;
        }
        const int32_t p = partition_of(id);
        auto& recs = records[p];
        if (auto it = offsets.find(id); it != offsets.end()) {
          for (const auto& [topic, parts] : it->second) {
            for (const auto& [partition, c] : parts)
              recs.push_back(offset_commit_tombstone(id, topic, partition));
          }
        }
        for (auto& r : group_records) recs.push_back(std::move(r));
        by_partition[p].emplace_back(slot_index, id);
        continue;
      }
      if (!slot || slot->group.in_state(state::dead)) {
        st->results[slot_index].error_code = to_wire(error_code::group_id_not_found);
        continue;
      }
      if (!slot->group.is_empty()) {
        st->results[slot_index].error_code = to_wire(error_code::non_empty_group);
        continue;
      }
      const int32_t p = partition_of(id);
      auto& recs = records[p];
      if (auto it = offsets.find(id); it != offsets.end()) {
        for (const auto& [topic, parts] : it->second) {
          for (const auto& [partition, c] : parts)
            recs.push_back(offset_commit_tombstone(id, topic, partition));
        }
      }
      recs.push_back(group_metadata_tombstone(id));
      by_partition[p].emplace_back(slot_index, id);
    }
    if (by_partition.empty()) return st->done(std::move(st->results));
    st->outstanding = by_partition.size();
    for (auto& [p, members] : by_partition) {
      write(p, std::move(records[p]), [this, st, members = members](error_code e) {
        for (const auto& [index, id] : members) {
          if (e != error_code::none) {
            st->results[index].error_code = to_wire(append_error_to_client_error(e));
            continue;
          }
          offsets.erase(id);
          if (auto* slot = find_slot(id); slot && slot->group.is_empty()) remove_group(id);
          if (const auto* cg = consumer->find(id); cg && cg->is_empty()) consumer->remove_group(id);
          log->info("group {} deleted", id);
        }
        if (--st->outstanding == 0) st->done(std::move(st->results));
      });
    }
  }

  // --- Retention

  // ClassicGroup.offsetExpirationCondition: whether the group's offsets may expire now at all, and the time
  // an offset's retention counts from.
  static bool offsets_may_expire(const classic_group& g) {
    if (!g.protocol_type()) return true;  // simple group: each offset from its commit
    if (g.in_state(state::empty)) return true;
    // Stable consumers: offsets of topics they no longer subscribe to.
    return g.uses_consumer_protocol() && g.subscribed_topics() && g.in_state(state::stable);
  }
  static int64_t expiration_base(const classic_group& g, const committed_offset& c) {
    if (g.protocol_type() && g.in_state(state::empty)) {
      // From the moment the group became empty (or the commit, for metadata without that timestamp).
      return g.current_state_timestamp().value_or(c.commit_timestamp_ms);
    }
    return c.commit_timestamp_ms;
  }

  // OffsetCommit v2-v4 could set a retention per commit; other commits expire offsets.retention.minutes
  // after `base`.
  bool offset_expired(const committed_offset& c, int64_t base, int64_t now_ms) const {
    return c.expire_timestamp_ms ? now_ms >= *c.expire_timestamp_ms
                                 : now_ms - base >= config.offsets_retention_ms;
  }

  void cleanup_group_metadata() {
    const int64_t now_ms = now();
    std::map<int32_t, std::vector<coordinator_record>> records;
    struct expired_entry {
      std::string group;
      std::string topic;
      int32_t partition;
    };
    std::map<int32_t, std::vector<expired_entry>> expired;
    std::map<int32_t, std::vector<std::string>> deleted_groups;
    for (const auto& [id, slot] : groups) {
      auto ps = partitions.find(slot.partition);
      if (ps == partitions.end() || ps->second.status != partition_status::active) continue;
      const auto& g = slot.group;
      bool all_expired = true;
      auto oit = offsets.find(id);
      if (oit != offsets.end()) {
        if (!offsets_may_expire(g)) continue;
        for (const auto& [topic, parts] : oit->second) {
          if (g.is_subscribed_to_topic(topic)) {
            all_expired = false;
            continue;
          }
          for (const auto& [partition, c] : parts) {
            if (offset_expired(c, expiration_base(g, c), now_ms)) {
              records[slot.partition].push_back(offset_commit_tombstone(id, topic, partition));
              expired[slot.partition].push_back({id, topic, partition});
            } else {
              all_expired = false;
            }
          }
        }
      }
      // An empty group without offsets left is deleted too (GroupMetadataManager.maybeDeleteGroup).
      if (all_expired && g.is_empty()) {
        records[slot.partition].push_back(group_metadata_tombstone(id));
        deleted_groups[slot.partition].push_back(id);
      }
    }
    // Consumer groups (KIP-848; ConsumerGroup.offsetExpirationCondition): an offset of a topic no member
    // subscribes to expires offsets.retention.minutes after its commit, whatever the group's state; an empty
    // group whose offsets are all gone is deleted.
    std::map<int32_t, std::vector<std::string>> deleted_consumer_groups;
    for (const auto& [id, cg] : consumer->groups()) {
      const int32_t p = partition_of(id);
      auto ps = partitions.find(p);
      if (ps == partitions.end() || ps->second.status != partition_status::active) continue;
      std::set<std::string> subscribed;
      for (const auto& [mid, m] : cg.members()) {
        for (const auto& t : subscribed_topics(m, consumer->topics())) subscribed.insert(t);
      }
      bool all_expired = true;
      if (auto oit = offsets.find(id); oit != offsets.end()) {
        for (const auto& [topic, parts] : oit->second) {
          if (subscribed.contains(topic)) {
            all_expired = false;
            continue;
          }
          for (const auto& [partition, c] : parts) {
            if (offset_expired(c, c.commit_timestamp_ms, now_ms)) {
              records[p].push_back(offset_commit_tombstone(id, topic, partition));
              expired[p].push_back({id, topic, partition});
            } else {
              all_expired = false;
            }
          }
        }
      }
      if (all_expired && cg.is_empty() && consumer->delete_records(id, records[p]) == error_code::none) {
        deleted_consumer_groups[p].push_back(id);
      }
    }
    for (auto& [p, recs] : records) {
      log->info("offsets retention: {} tombstone(s) for partition {}", recs.size(), p);
      write(p, std::move(recs),
            [this, ex = std::move(expired[p]), gone = std::move(deleted_groups[p]),
             gone_consumer = std::move(deleted_consumer_groups[p])](error_code e) {
              if (e != error_code::none) return;  // tried again at the next check
              for (const auto& x : ex) erase_offset(x.group, x.topic, x.partition);
              // Only if nothing brought the group back to life meanwhile.
              for (const auto& id : gone) {
                if (auto* slot = find_slot(id); slot && slot->group.is_empty() && !offsets.contains(id))
                  remove_group(id);
              }
              for (const auto& id : gone_consumer) {
                if (const auto* cg = consumer->find(id); cg && cg->is_empty() && !offsets.contains(id)) {
                  log->info("consumer group {} deleted: empty, with no offsets left", id);
                  consumer->remove_group(id);
                }
              }
            });
    }
    schedule_retention_check();
  }

  void schedule_retention_check() {
    timers.schedule(retention_key, now() + config.offsets_retention_check_interval_ms,
                    [this] { cleanup_group_metadata(); });
  }

  // --- Loading

  void begin_loading(int32_t partition) {
    drop_partition(partition, error_code::not_coordinator);
    partitions[partition] = partition_entry{partition_status::loading, next_epoch++, 0, {}};
  }

  void drop_partition(int32_t partition, error_code parked_error) {
    std::vector<std::string> ids;
    for (const auto& [id, slot] : groups) {
      if (slot.partition == partition) ids.push_back(id);
    }
    for (const auto& id : ids) {
      auto& g = groups.at(id).group;
      g.transition_to(state::dead, now());
      // Whatever is parked learns that the coordinator moved (GroupMetadataManager.onUnloaded).
      for (auto& [mid, m] : g.members_for_update()) {
        g.complete_join(m, join_error_response(mid, parked_error));
        g.complete_sync(m, sync_error_response(parked_error));
      }
      remove_group(id);
    }
    consumer->drop_partition(partition);
    for (auto it = offsets.begin(); it != offsets.end();) {
      it = partition_of(it->first) == partition ? offsets.erase(it) : std::next(it);
    }
    auto it = partitions.find(partition);
    if (it != partitions.end()) {
      auto waiting = std::move(it->second.after_writes);
      partitions.erase(it);
      for (auto& fn : waiting) fn();  // answered NOT_COORDINATOR now
    }
  }

  status replay(int32_t partition, int64_t offset, std::span<const uint8_t> key,
                std::optional<std::span<const uint8_t>> value) {
    auto decoded = decode_record(key, value);
    if (!decoded) return decoded.error();
    if (auto* oc = std::get_if<offset_commit_entry>(&*decoded)) {
      const std::string& gid = oc->key.group;
      if (partition_of(gid) != partition) {
        return status::error(error_code::corrupt_message,
                             "offset commit of group " + gid + " in partition " + std::to_string(partition));
      }
      if (!oc->value) {
        erase_offset(gid, oc->key.topic, oc->key.partition);
        return status::success();
      }
      // Offsets without a group belong to a simple group (created as Kafka's replay does).
      if (!find_slot(gid) && !consumer->contains(gid)) create_group(gid);
      committed_offset c;
      c.offset = oc->value->offset;
      if (oc->value->leader_epoch >= 0) c.leader_epoch = oc->value->leader_epoch;
      c.metadata = oc->value->metadata;
      c.commit_timestamp_ms = oc->value->commit_timestamp;
      if (oc->value_version == 1 && oc->value->expire_timestamp >= 0) {
        c.expire_timestamp_ms = oc->value->expire_timestamp;
      }
      c.record_offset = offset;
      offsets[gid][oc->key.topic][oc->key.partition] = std::move(c);
      return status::success();
    }
    if (auto* gm = std::get_if<group_metadata_entry>(&*decoded)) {
      const std::string& gid = gm->key.group;
      if (partition_of(gid) != partition) {
        return status::error(error_code::corrupt_message,
                             "metadata of group " + gid + " in partition " + std::to_string(partition));
      }
      if (!gm->value) {
        remove_group(gid);
        return status::success();
      }
      const auto& v = *gm->value;
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
      timers.cancel_prefix(group_prefix(gid));
      groups.erase(gid);
      groups.emplace(gid, group_slot{partition, next_serial++, std::move(g)});
      return status::success();
    }
    if (auto* other = std::get_if<other_entry>(&*decoded);
        other && other->key_version >= consumer_group_metadata_key_version &&
        other->key_version <= consumer_group_current_member_assignment_key_version) {
      // A consumer group record: a simple (offsets-only) or empty classic group of the same id was upgraded.
      if (const auto* slot = find_slot(key_group_id(key)); slot && slot->group.is_empty()) {
        remove_group(slot->group.group_id());
      }
      return consumer->replay(partition, key, value);
    }
    return status::success();  // a record type this coordinator does not apply (share groups)
  }

  // The group id that starts every consumer group key after its version.
  static std::string key_group_id(std::span<const uint8_t> key) {
    proto::wire_reader r(key);
    (void)r.read_int16();
    std::string id = r.read_string(/*compact=*/false);
    return r.ok() ? id : std::string();
  }

  void complete_loading(int32_t partition) {
    auto it = partitions.find(partition);
    if (it == partitions.end()) return;
    it->second.status = partition_status::active;
    size_t loaded = 0;
    for (auto& [id, slot] : groups) {
      if (slot.partition != partition) continue;
      ++loaded;
      auto& g = slot.group;
      for (const auto& [mid, m] : g.members()) reschedule_heartbeat(g, m);
      if (g.members().size() > static_cast<size_t>(config.max_group_size)) {
        // group.max.size was lowered: a rebalance lets the members commit before some are left out.
        prepare_rebalance(g);
      }
    }
    consumer->complete_loading(partition);
    log->info("__consumer_offsets-{} loaded: {} group(s)", partition, loaded);
    if (!timers.contains(retention_key)) schedule_retention_check();
  }
};

group_coordinator::group_coordinator(group_coordinator_config config, record_writer& writer,
                                     std::function<int64_t()> clock_ms)
    : _config(config) {
  _impl = std::make_unique<impl>(_config, writer, std::move(clock_ms));
}

group_coordinator::~group_coordinator() = default;

int32_t group_coordinator::partition_for(std::string_view group_id) const {
  return group_partition(group_id, _config.offsets_topic_num_partitions);
}

partition_status group_coordinator::status_of(int32_t partition) const {
  auto it = _impl->partitions.find(partition);
  return it == _impl->partitions.end() ? partition_status::not_owned : it->second.status;
}

std::vector<int32_t> group_coordinator::owned_partitions() const {
  std::vector<int32_t> out;
  for (const auto& [p, e] : _impl->partitions) out.push_back(p);
  return out;
}

void group_coordinator::begin_loading(int32_t partition) {
  _impl->begin_loading(partition);
}

status group_coordinator::replay(int32_t partition, int64_t offset, std::span<const uint8_t> key,
                                 std::optional<std::span<const uint8_t>> value) {
  if (status_of(partition) != partition_status::loading) {
    return status::error(error_code::not_coordinator, "partition is not loading");
  }
  return _impl->replay(partition, offset, key, value);
}

void group_coordinator::complete_loading(int32_t partition) {
  _impl->complete_loading(partition);
}

void group_coordinator::unload(int32_t partition) {
  _impl->drop_partition(partition, error_code::not_coordinator);
}

void group_coordinator::join_group(const request_origin& origin, protocol::join_group_request request,
                                   join_callback done) {
  _impl->join_group(origin, std::move(request), std::move(done));
}

void group_coordinator::sync_group(const request_origin& /*origin*/, protocol::sync_group_request request,
                                   sync_callback done) {
  _impl->sync_group(request, std::move(done));
}

protocol::heartbeat_response group_coordinator::heartbeat(const request_origin& /*origin*/,
                                                          const protocol::heartbeat_request& request) {
  return _impl->heartbeat(request);
}

protocol::leave_group_response group_coordinator::leave_group(const request_origin& /*origin*/,
                                                              const protocol::leave_group_request& request) {
  return _impl->leave_group(request);
}

void group_coordinator::commit_offsets(const request_origin& origin, protocol::offset_commit_request request,
                                       offset_commit_callback done) {
  _impl->commit_offsets(origin, std::move(request), std::move(done));
}

void group_coordinator::fetch_offsets(
    const protocol::offset_fetch_request::offset_fetch_request_group& request, bool require_stable,
    offset_fetch_callback done) {
  _impl->fetch_offsets(request, require_stable, std::move(done));
}

void group_coordinator::delete_offsets(protocol::offset_delete_request request, offset_delete_callback done) {
  _impl->delete_offsets(std::move(request), std::move(done));
}

protocol::list_groups_response group_coordinator::list_groups(
    const protocol::list_groups_request& request) const {
  return _impl->list_groups(request);
}

std::vector<protocol::describe_groups_response::described_group> group_coordinator::describe_groups(
    const std::vector<std::string>& group_ids) const {
  return _impl->describe_groups(group_ids);
}

void group_coordinator::delete_groups(std::vector<std::string> group_ids, delete_groups_callback done) {
  _impl->delete_groups(std::move(group_ids), std::move(done));
}

std::optional<int64_t> group_coordinator::next_deadline() const {
  return _impl->timers.next_deadline();
}

void group_coordinator::run_expired_timers() {
  _impl->timers.run_due(_impl->now());
}

void group_coordinator::set_deadline_listener(std::function<void(int64_t)> listener) {
  _impl->timers.set_listener(std::move(listener));
}

void group_coordinator::cleanup_group_metadata() {
  _impl->cleanup_group_metadata();
}

void group_coordinator::set_topics(topic_catalog catalog) {
  _impl->consumer->set_topics(std::move(catalog));
}

void group_coordinator::consumer_group_heartbeat(
    const request_origin& origin, protocol::consumer_group_heartbeat_request request,
    std::function<void(protocol::consumer_group_heartbeat_response)> done) {
  _impl->consumer->heartbeat(origin, std::move(request), std::move(done));
}

std::vector<protocol::consumer_group_describe_response::described_group>
group_coordinator::consumer_group_describe(const std::vector<std::string>& group_ids,
                                           bool include_authorized_operations) const {
  return _impl->consumer->describe(group_ids, include_authorized_operations);
}

const consumer_group* group_coordinator::find_consumer_group(const std::string& group_id) const {
  return _impl->consumer->find(group_id);
}

const classic_group* group_coordinator::find_group(const std::string& group_id) const {
  const auto* slot = _impl->find_slot(group_id);
  return slot ? &slot->group : nullptr;
}

const committed_offset* group_coordinator::find_offset(const std::string& group_id, const std::string& topic,
                                                       int32_t partition) const {
  return _impl->find_offset(group_id, topic, partition);
}

size_t group_coordinator::group_count() const {
  return _impl->groups.size();
}

}  // namespace mala::coordinator
