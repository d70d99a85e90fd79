// The group coordinator's facade: the broker's calls go to the protocol parts that share one
// coordinator_runtime (the owned partitions, the writes, the timers): classic_group_manager for classic
// groups, consumer_group_manager for KIP-848 consumer groups, offset_manager for the committed offsets of
// both. What spans them is here: which kind of group a request is for, the partitions' load and unload,
// DeleteGroups and the offsets retention check.
#include "mala/coordinator/group_coordinator.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "classic_group_manager.h"
#include "consumer_group_manager.h"
#include "coordinator_runtime.h"
#include "mala/common/logging.h"
#include "mala/coordinator/group_placement.h"
#include "mala/protocol/wire.h"
#include "offset_manager.h"

namespace mala::coordinator {

namespace {

namespace proto = mala::protocol;

const std::string retention_key = "offsets-retention-check";

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

// The group id that starts every consumer group key after its version.
std::string key_group_id(std::span<const uint8_t> key) {
  proto::wire_reader r(key);
  (void)r.read_int16();
  std::string id = r.read_string(/*compact=*/false);
  return r.ok() ? id : std::string();
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
  coordinator_runtime runtime;
  classic_group_manager classic;
  offset_manager offsets;
  std::unique_ptr<consumer_group_manager> consumer;

  impl(const group_coordinator_config& config, record_writer& writer, std::function<int64_t()> clock_ms)
      : runtime(config, writer, std::move(clock_ms)), classic(runtime), offsets(runtime) {
    consumer_group_host host;
    host.classic_group_empty = [this](const std::string& id) { return classic.group_empty(id); };
    host.drop_empty_classic_group = [this](const std::string& id, std::vector<coordinator_record>& records) {
      classic.drop_empty_group(id, records);
    };
    host.classic_group_for_upgrade = [this](const std::string& id) {
      return classic.snapshot_for_upgrade(id);
    };
    host.drop_classic_group = [this](const std::string& id, std::vector<coordinator_record>& records) {
      classic.drop_group(id, records);
    };
    host.create_classic_group = [this](const classic_group_snapshot& snapshot,
                                       std::vector<coordinator_record>& records) {
      classic.create_from_snapshot(snapshot, records);
    };
    consumer = std::make_unique<consumer_group_manager>(runtime, std::move(host));
  }

  // What a classic protocol request for `gid` gets before its group is looked at: NOT_COORDINATOR /
  // COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID for an empty id, otherwise NONE.
  error_code classic_request_error(const std::string& gid) const {
    if (auto e = runtime.partition_error(gid); e != error_code::none) return e;
    return gid.empty() ? error_code::invalid_group_id : error_code::none;
  }

  // The group a commit or a replayed offset belongs to: offsets without a group belong to a simple group
  // (a group deleted meanwhile comes back as one, as the log replays the same way).
  void ensure_group_for_offsets(const std::string& gid) {
    if (!classic.find(gid) && !consumer->contains(gid)) classic.create_simple_group(gid);
  }

  // --- Offsets

  void commit_offsets(const request_origin& origin, proto::offset_commit_request req,
                      offset_commit_callback done) {
    const std::string gid = req.group_id;
    error_code e = runtime.partition_error(gid);
    if (e == error_code::none) {
      e = consumer->contains(gid)
              ? consumer->validate_offset_commit(gid, req.member_id, req.generation_id_or_member_epoch,
                                                 origin.api_version)
              : classic.accept_offset_commit(origin, req);
    }
    if (e != error_code::none) return done(offset_manager::commit_error(req, e));
    offsets.commit(
        std::move(req), [this, gid] { ensure_group_for_offsets(gid); }, std::move(done));
  }

  // TxnOffsetCommit: the checks of validateTransactionalOffsetCommit, then the producer's transactional
  // write; the group of a commit without generation is created once the write is committed.
  void commit_transactional_offsets(const request_origin& origin, proto::txn_offset_commit_request req,
                                    txn_offset_commit_callback done,
                                    std::optional<uint64_t> verification_guard) {
    const std::string gid = req.group_id;
    error_code e = gid.empty() ? error_code::invalid_group_id : runtime.partition_error(gid);
    if (e == error_code::none) {
      e = consumer->contains(gid)
              ? consumer->validate_offset_commit(gid, req.member_id, req.generation_id_or_member_epoch,
                                                 origin.api_version,
                                                 /*transactional=*/true)
              : classic.validate_txn_offset_commit(req);
    }
    if (e != error_code::none) return done(offset_manager::txn_commit_error(req, e));
    offsets.commit_transactional(
        std::move(req), verification_guard, [this, gid] { ensure_group_for_offsets(gid); }, std::move(done));
  }

  void complete_transaction(int32_t partition, const txn_marker_write& marker,
                            std::function<void(error_code)> done) {
    switch (runtime.status_of(partition)) {
      case partition_status::not_owned:
        return done(error_code::not_coordinator);
      case partition_status::loading:
        return done(error_code::coordinator_load_in_progress);
      case partition_status::active:
        break;
    }
    runtime.write_marker(partition, marker,
                         [this, partition, marker, done = std::move(done)](error_code e, int64_t /*offset*/) {
                           if (e == error_code::none) {
                             offsets.complete_transaction(partition, marker.producer_id, marker.commit);
                             runtime.log().debug("__consumer_offsets-{}: transaction of producer {} {}",
                                                 partition, marker.producer_id,
                                                 marker.commit ? "committed" : "aborted");
                           }
                           done(e);
                         });
  }

  proto::offset_fetch_response::offset_fetch_response_group fetch_offsets_now(
      const proto::offset_fetch_request::offset_fetch_request_group& req, bool require_stable) const {
    const std::string& gid = req.group_id;
    auto failed = [&](error_code e) {
      proto::offset_fetch_response::offset_fetch_response_group out;
      out.group_id = gid;
      out.error_code = to_wire(e);
      return out;
    };
    if (auto e = runtime.partition_error(gid); e != error_code::none) return failed(e);
    const classic_group* g = classic.find(gid);
    const bool is_consumer_group = consumer->contains(gid);
    if (is_consumer_group) {
      // OffsetFetch v9+ from a member of a consumer group: its member epoch must be current.
      if (auto e = consumer->validate_offset_fetch(gid, req.member_id, req.member_epoch);
          e != error_code::none)
        return failed(e);
    }
    const bool group_exists = (g && !g->in_state(classic_group_state::dead)) || is_consumer_group;
    return offsets.fetch(req, group_exists, require_stable);
  }

  void fetch_offsets(const proto::offset_fetch_request::offset_fetch_request_group& req, bool require_stable,
                     offset_fetch_callback done) {
    if (!require_stable) return done(fetch_offsets_now(req, false));
    // Kafka runs a require_stable fetch as a write operation, so that it sees every commit in flight: wait
    // for this partition's appends to complete first.
    runtime.after_writes(runtime.partition_of(req.group_id),
                         [this, req, done = std::move(done)] { done(fetch_offsets_now(req, true)); });
  }

  // OffsetDelete: a classic group must not be rebalancing (unless of the "consumer" protocol type), a
  // consumer group may be in any state (ConsumerGroup.validateDeleteGroup); neither loses the offsets of
  // topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC).
  void delete_offsets(proto::offset_delete_request req, offset_delete_callback done) {
    auto fail = [&](error_code e) {
      proto::offset_delete_response resp;
      resp.error_code = to_wire(e);
      done(std::move(resp));
    };
    const std::string gid = req.group_id;
    if (auto e = runtime.partition_error(gid); e != error_code::none) return fail(e);
    if (gid.empty()) return fail(error_code::invalid_group_id);
    if (const consumer_group* cg = consumer->find(gid)) {
      const std::set<std::string> subscribed = consumer->subscribed_topics_of(*cg);
      return offsets.delete_offsets(
          req, [&subscribed](const std::string& topic) { return subscribed.contains(topic); },
          std::move(done));
    }
    if (auto e = classic.validate_offset_delete(gid); e != error_code::none) return fail(e);
    const classic_group& g = *classic.find(gid);
    offsets.delete_offsets(
        req, [&g](const std::string& topic) { return g.is_subscribed_to_topic(topic); }, std::move(done));
  }

  // --- Administration

  proto::list_groups_response list_groups(const proto::list_groups_request& req) const {
    proto::list_groups_response resp;
    if (runtime.any_loading()) {
      resp.error_code = to_wire(error_code::coordinator_load_in_progress);
      return resp;
    }
    std::set<std::string> states;
    for (const auto& s : req.states_filter) states.insert(lower(trim(s)));
    std::set<std::string> types;
    for (const auto& t : req.types_filter) types.insert(lower(trim(t)));
    classic.list(states, types, resp.groups);
    consumer->list(states, types, resp.groups);
    std::sort(resp.groups.begin(), resp.groups.end(),
              [](const auto& a, const auto& b) { return a.group_id < b.group_id; });
    return resp;
  }

  // DeleteGroups: each group's offsets and then its own records get tombstones, one batch per partition;
  // the groups are gone once their batch is committed.
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
    std::map<int32_t, offset_deletion> batches;
    for (const auto& id : ids) {
      const size_t index = st->results.size();
      st->results.push_back({id, to_wire(error_code::none)});
      if (auto e = runtime.partition_error(id); e != error_code::none) {
        st->results[index].error_code = to_wire(e);
        continue;
      }
      std::vector<coordinator_record> group_records;
      if (consumer->contains(id)) {
        auto records = consumer->delete_records(id);
        if (!records) {
          st->results[index].error_code = to_wire(records.error().code);
          continue;
        }
        group_records = std::move(*records);
      } else if (auto e = classic.validate_delete(id); e != error_code::none) {
        st->results[index].error_code = to_wire(e);
        continue;
      } else {
        group_records.push_back(group_metadata_tombstone(id));
      }
      offset_deletion deletion = offsets.select_all(id);
      for (auto& r : group_records) deletion.records.push_back(std::move(r));
      const int32_t p = runtime.partition_of(id);
      batches[p].add(std::move(deletion));
      by_partition[p].emplace_back(index, id);
    }
    if (by_partition.empty()) return st->done(std::move(st->results));
    st->outstanding = by_partition.size();
    for (auto& [p, members] : by_partition) {
      offsets.write_deletion(p, std::move(batches[p]), [this, st, members = members](error_code e) {
        for (const auto& [index, id] : members) {
          if (e != error_code::none) {
            st->results[index].error_code = to_wire(append_error_to_client_error(e));
            continue;
          }
          if (const auto* g = classic.find(id); g && g->is_empty()) classic.remove_group(id);
          if (const auto* cg = consumer->find(id); cg && cg->is_empty()) consumer->remove_group(id);
          runtime.log().info("group {} deleted", id);
        }
        if (--st->outstanding == 0) st->done(std::move(st->results));
      });
    }
  }

  // --- Retention

  // GroupCoordinatorShard.cleanupGroupMetadata: expired offsets get tombstones; a group left empty without
  // offsets is deleted too (GroupMetadataManager.maybeDeleteGroup).
  void cleanup_group_metadata() {
    const int64_t now_ms = runtime.now();
    std::map<int32_t, offset_deletion> batches;
    std::map<int32_t, std::vector<std::string>> deleted_groups;
    for (const auto& [id, slot] : classic.groups()) {
      if (!runtime.is_active(slot.partition)) continue;
      const classic_group& g = slot.group;
      if (offsets.has_offsets(id) && !offsets_may_expire(g)) continue;
      offset_deletion expired = offsets.select_expired(
          id, [&g](const std::string& topic) { return g.is_subscribed_to_topic(topic); },
          [&g](const committed_offset& c) { return expiration_base(g, c); }, now_ms);
      // A group with an open transaction stays (its offsets may be committed yet).
      const bool all_expired =
          expired.offsets.size() == offsets.count(id) && !offsets.has_open_transactions(id);
      if (all_expired && g.is_empty()) {
        expired.records.push_back(group_metadata_tombstone(id));
        deleted_groups[slot.partition].push_back(id);
      }
      if (!expired.empty()) batches[slot.partition].add(std::move(expired));
    }
    // Consumer groups (KIP-848; ConsumerGroup.offsetExpirationCondition): an offset of a topic no member
    // subscribes to expires offsets.retention.minutes after its commit, whatever the group's state; an empty
    // group whose offsets are all gone is deleted.
    std::map<int32_t, std::vector<std::string>> deleted_consumer_groups;
    for (const auto& [id, cg] : consumer->groups()) {
      const int32_t p = runtime.partition_of(id);
      if (!runtime.is_active(p)) continue;
      const std::set<std::string> subscribed = consumer->subscribed_topics_of(cg);
      offset_deletion expired = offsets.select_expired(
          id, [&subscribed](const std::string& topic) { return subscribed.contains(topic); },
          [](const committed_offset& c) { return c.commit_timestamp_ms; }, now_ms);
      const bool all_expired =
          expired.offsets.size() == offsets.count(id) && !offsets.has_open_transactions(id);
      if (all_expired && cg.is_empty()) {
        if (auto records = consumer->delete_records(id)) {
          for (auto& r : *records) expired.records.push_back(std::move(r));
          deleted_consumer_groups[p].push_back(id);
        }
      }
      if (!expired.empty()) batches[p].add(std::move(expired));
    }
    for (auto& [p, batch] : batches) {
      runtime.log().info("offsets retention: {} tombstone(s) for partition {}", batch.records.size(), p);
      offsets.write_deletion(
          p, std::move(batch),
          [this, gone = std::move(deleted_groups[p]),
           gone_consumer = std::move(deleted_consumer_groups[p])](error_code e) {
            if (e != error_code::none) return;  // tried again at the next check
            // Only if nothing brought the group back to life meanwhile.
            for (const auto& id : gone) {
              if (const auto* g = classic.find(id);
                  g && g->is_empty() && !offsets.has_offsets(id) && !offsets.has_open_transactions(id))
                classic.remove_group(id);
            }
            for (const auto& id : gone_consumer) {
              if (const auto* cg = consumer->find(id);
                  cg && cg->is_empty() && !offsets.has_offsets(id) && !offsets.has_open_transactions(id)) {
                runtime.log().info("consumer group {} deleted: empty, with no offsets left", id);
                consumer->remove_group(id);
              }
            }
          });
    }
    schedule_retention_check();
  }

  void schedule_retention_check() {
    runtime.timers().schedule(retention_key,
                              runtime.now() + runtime.config().offsets_retention_check_interval_ms,
                              [this] { cleanup_group_metadata(); });
  }

  // --- Loading

  void begin_loading(int32_t partition) {
    drop_partition(partition, error_code::not_coordinator);
    runtime.begin_loading(partition);
  }

  void drop_partition(int32_t partition, error_code parked_error) {
    classic.drop_partition(partition, parked_error);
    consumer->drop_partition(partition);
    offsets.forget_partition(partition);
    runtime.forget(partition);  // fetches waiting for its writes are answered NOT_COORDINATOR now
  }

  status replay(int32_t partition, int64_t offset, std::span<const uint8_t> key,
                std::optional<std::span<const uint8_t>> value, int64_t producer_id) {
    auto decoded = decode_record(key, value);
    if (!decoded) return decoded.error();
    if (auto* oc = std::get_if<offset_commit_entry>(&*decoded)) {
      const std::string& gid = oc->key.group;
      if (runtime.partition_of(gid) != partition) {
        return status::error(error_code::corrupt_message,
                             "offset commit of group " + gid + " in partition " + std::to_string(partition));
      }
      if (oc->value) ensure_group_for_offsets(gid);
      offsets.replay(*oc, offset, producer_id);
      return status::success();
    }
    if (auto* gm = std::get_if<group_metadata_entry>(&*decoded)) {
      const std::string& gid = gm->key.group;
      if (runtime.partition_of(gid) != partition) {
        return status::error(error_code::corrupt_message,
                             "metadata of group " + gid + " in partition " + std::to_string(partition));
      }
      classic.replay(partition, *gm);
      return status::success();
    }
    if (auto* other = std::get_if<other_entry>(&*decoded);
        other && other->key_version >= consumer_group_metadata_key_version &&
        other->key_version <= consumer_group_current_member_assignment_key_version) {
      // A consumer group record: a simple (offsets-only) or empty classic group of the same id was upgraded.
      const std::string gid = key_group_id(key);
      if (const auto* g = classic.find(gid); g && g->is_empty()) classic.remove_group(gid);
      return consumer->replay(partition, key, value);
    }
    return status::success();  // a record type this coordinator does not apply (share groups)
  }

  void complete_loading(int32_t partition) {
    if (!runtime.mark_active(partition)) return;
    const size_t loaded = classic.complete_loading(partition);
    consumer->complete_loading(partition);
    runtime.log().info("__consumer_offsets-{} loaded: {} group(s)", partition, loaded);
    if (!runtime.timers().contains(retention_key)) schedule_retention_check();
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
  return _impl->runtime.status_of(partition);
}

std::vector<int32_t> group_coordinator::owned_partitions() const {
  return _impl->runtime.owned_partitions();
}

void group_coordinator::begin_loading(int32_t partition) {
  _impl->begin_loading(partition);
}

status group_coordinator::replay(int32_t partition, int64_t offset, std::span<const uint8_t> key,
                                 std::optional<std::span<const uint8_t>> value, int64_t producer_id) {
  if (status_of(partition) != partition_status::loading) {
    return status::error(error_code::not_coordinator, "partition is not loading");
  }
  return _impl->replay(partition, offset, key, value, producer_id);
}

status group_coordinator::replay_marker(int32_t partition, int64_t producer_id, bool commit) {
  if (status_of(partition) != partition_status::loading) {
    return status::error(error_code::not_coordinator, "partition is not loading");
  }
  _impl->offsets.complete_transaction(partition, producer_id, commit);
  return status::success();
}

void group_coordinator::complete_loading(int32_t partition) {
  _impl->complete_loading(partition);
}

void group_coordinator::unload(int32_t partition) {
  _impl->drop_partition(partition, error_code::not_coordinator);
}

// --- Classic protocol: the checks common to both kinds of group, then the group's own protocol part (a
// classic member of a KIP-848 consumer group is hosted by the consumer group).

void group_coordinator::join_group(const request_origin& origin, protocol::join_group_request request,
                                   join_callback done) {
  const std::string& gid = request.group_id;
  if (auto e = _impl->classic_request_error(gid); e != error_code::none)
    return done(join_error_response(request.member_id, e));
  if (request.session_timeout_ms < _config.min_session_timeout_ms ||
      request.session_timeout_ms > _config.max_session_timeout_ms) {
    return done(join_error_response(request.member_id, error_code::invalid_session_timeout));
  }
  if (_impl->consumer->contains(gid)) return _impl->consumer->classic_join(origin, request, std::move(done));
  _impl->classic.join_group(origin, std::move(request), std::move(done));
}

void group_coordinator::sync_group(const request_origin& /*origin*/, protocol::sync_group_request request,
                                   sync_callback done) {
  const std::string& gid = request.group_id;
  if (auto e = _impl->classic_request_error(gid); e != error_code::none) return done(sync_error_response(e));
  if (_impl->consumer->contains(gid)) return _impl->consumer->classic_sync(request, std::move(done));
  _impl->classic.sync_group(request, std::move(done));
}

protocol::heartbeat_response group_coordinator::heartbeat(const request_origin& /*origin*/,
                                                          const protocol::heartbeat_request& request) {
  const std::string& gid = request.group_id;
  if (auto e = _impl->classic_request_error(gid); e != error_code::none) {
    protocol::heartbeat_response r;
    // While the group is loading the member is answered as if all were well (Kafka does the same).
    r.error_code = to_wire(e == error_code::coordinator_load_in_progress ? error_code::none : e);
    return r;
  }
  if (_impl->consumer->contains(gid)) return _impl->consumer->classic_heartbeat(request);
  return _impl->classic.heartbeat(request);
}

protocol::leave_group_response group_coordinator::leave_group(const request_origin& /*origin*/,
                                                              const protocol::leave_group_request& request) {
  const std::string& gid = request.group_id;
  if (auto e = _impl->classic_request_error(gid); e != error_code::none) {
    protocol::leave_group_response r;
    r.error_code = to_wire(e);
    return r;
  }
  if (_impl->consumer->contains(gid)) return _impl->consumer->classic_leave(request);
  return _impl->classic.leave_group(request);
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

void group_coordinator::commit_transactional_offsets(const request_origin& origin,
                                                     protocol::txn_offset_commit_request request,
                                                     txn_offset_commit_callback done,
                                                     std::optional<uint64_t> verification_guard) {
  _impl->commit_transactional_offsets(origin, std::move(request), std::move(done), verification_guard);
}

void group_coordinator::complete_transaction(int32_t partition, const txn_marker_write& marker,
                                             std::function<void(error_code)> done) {
  _impl->complete_transaction(partition, marker, std::move(done));
}

protocol::list_groups_response group_coordinator::list_groups(
    const protocol::list_groups_request& request) const {
  return _impl->list_groups(request);
}

std::vector<protocol::describe_groups_response::described_group> group_coordinator::describe_groups(
    const std::vector<std::string>& group_ids) const {
  return _impl->classic.describe(group_ids);
}

void group_coordinator::delete_groups(std::vector<std::string> group_ids, delete_groups_callback done) {
  _impl->delete_groups(std::move(group_ids), std::move(done));
}

std::optional<int64_t> group_coordinator::next_deadline() const {
  return _impl->runtime.timers().next_deadline();
}

void group_coordinator::run_expired_timers() {
  _impl->runtime.timers().run_due(_impl->runtime.now());
}

void group_coordinator::set_deadline_listener(std::function<void(int64_t)> listener) {
  _impl->runtime.timers().set_listener(std::move(listener));
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
  return _impl->classic.find(group_id);
}

const committed_offset* group_coordinator::find_offset(const std::string& group_id, const std::string& topic,
                                                       int32_t partition) const {
  return _impl->offsets.find(group_id, topic, partition);
}

const committed_offset* group_coordinator::find_pending_offset(int64_t producer_id,
                                                               const std::string& group_id,
                                                               const std::string& topic,
                                                               int32_t partition) const {
  return _impl->offsets.find_pending(producer_id, group_id, topic, partition);
}

void group_coordinator::for_each_committed_offset(
    const std::function<void(const std::string&, const std::string&, int32_t, const committed_offset&)>& fn)
    const {
  for (const auto& [group, topics] : _impl->offsets.all()) {
    for (const auto& [topic, partitions] : topics) {
      for (const auto& [partition, offset] : partitions) fn(group, topic, partition, offset);
    }
  }
}

size_t group_coordinator::group_count() const {
  return _impl->classic.groups().size();
}

}  // namespace mala::coordinator
