#include "mala/controller/cluster_control.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <string>

#include "mala/common/listener.h"
#include "mala/common/logging.h"
#include "mala/controller/feature_control.h"
#include "mala/controller/replication_control.h"
#include "mala/metadata/metadata_delta.h"

namespace mala::controller {

using metadata::metadata_image;

bool is_active_broker(const metadata_image& image, int32_t id) {
  auto it = image.brokers.find(id);
  return it != image.brokers.end() && !it->second.fenced && !it->second.in_controlled_shutdown;
}

bool has_uncordoned_dirs(const metadata::broker_registration& broker) {
  if (broker.log_dirs.empty() || !broker.cordoned_log_dirs) return true;
  const auto& cordoned = *broker.cordoned_log_dirs;
  return std::any_of(broker.log_dirs.begin(), broker.log_dirs.end(), [&cordoned](const uuid& dir) {
    return std::find(cordoned.begin(), cordoned.end(), dir) == cordoned.end();
  });
}

std::vector<placement_broker> usable_brokers(const metadata_image& image) {
  std::vector<placement_broker> out;
  for (const auto& [id, b] : image.brokers) {
    if (!b.fenced && !b.in_controlled_shutdown && has_uncordoned_dirs(b)) out.push_back({id, b.rack});
  }
  return out;
}

uuid default_dir(const metadata_image& image, int32_t id) {
  auto it = image.brokers.find(id);
  if (it == image.brokers.end()) return metadata::directory_unassigned;
  const auto& dirs = it->second.log_dirs;
  if (dirs.empty()) return metadata::directory_migrating;
  if (dirs.size() == 1) return dirs.front();
  return metadata::directory_unassigned;
}

namespace {

bool reserved_directory(const uuid& id) {
  return id == metadata::directory_migrating || id == metadata::directory_unassigned ||
         id == metadata::directory_lost;
}

// KIP-858 directory checks: no reserved id, none repeated, none another broker's (INVALID_REGISTRATION).
status check_log_dirs(const metadata_image& image, const metadata::broker_registration& registration) {
  std::set<std::string> dirs;
  for (const auto& dir : registration.log_dirs) {
    if (reserved_directory(dir))
      return status::error(error_code::invalid_registration, "Reserved directory ID in request");
    if (!dirs.insert(dir.to_string()).second) {
      return status::error(error_code::invalid_registration, "Duplicate directory ID in request");
    }
    for (const auto& [other_id, other] : image.brokers) {
      if (other_id == registration.id) continue;
      if (std::find(other.log_dirs.begin(), other.log_dirs.end(), dir) != other.log_dirs.end()) {
        return status::error(error_code::invalid_registration, "Broker " + std::to_string(other_id) +
                                                                   " is already registered with directory " +
                                                                   dir.to_string());
      }
    }
  }
  return status::success();
}

}  // namespace

cluster_control::cluster_control(metadata_writer& writer, replication_control& replication,
                                 const controller_options& options)
    : _writer(writer), _replication(replication), _sessions(options.broker_session_timeout_ms) {}

result<int64_t> cluster_control::register_broker(const metadata::broker_registration& registration,
                                                 int64_t previous_broker_epoch, int64_t now_ms) {
  const metadata::metadata_image_ptr image = _writer.image();
  const int32_t id = registration.id;
  if (id < 0)
    return status::error(error_code::invalid_registration, "Invalid broker id " + std::to_string(id));
  auto existing = image->brokers.find(id);
  if (existing != image->brokers.end() && existing->second.incarnation_id != registration.incarnation_id &&
      _sessions.has_valid_session(id, !existing->second.fenced, now_ms)) {
    return status::error(error_code::duplicate_broker_registration,
                         "Another broker is registered with that broker id.");
  }
  if (auto st = check_log_dirs(*image, registration); !st.ok()) return st;
  const supported_feature_map features = registered_features(registration.supported_features);
  if (auto st = check_finalized_features_supported(*image, features); !st.ok()) return st;

  protocol::register_broker_record record;
  record.broker_id = id;
  record.incarnation_id = registration.incarnation_id;
  record.rack = registration.rack;
  record.log_dirs = registration.log_dirs;
  for (const auto& e : registration.endpoints) {
    auto security = parse_security_protocol(e.security_protocol);
    if (!security) {
      return status::error(
          error_code::invalid_registration,
          "Unknown security protocol " + e.security_protocol + " of listener " + e.listener_name);
    }
    record.end_points.push_back({e.listener_name, e.host, e.port, static_cast<int16_t>(*security)});
  }
  for (const auto& [name, range] : features)
    record.features.push_back({name, range.min_version, range.max_version});

  // The same incarnation registering again amends its registration and keeps its epoch; a new incarnation (a
  // restart) gets a new epoch: the offset of its RegisterBrokerRecord.
  const bool new_incarnation =
      existing == image->brokers.end() || existing->second.incarnation_id != registration.incarnation_id;
  if (!new_incarnation) {
    record.broker_epoch = existing->second.epoch;
    record.fenced = existing->second.fenced;
    record.in_controlled_shutdown = existing->second.in_controlled_shutdown;
  } else {
    record.broker_epoch = _writer.next_offset();
    record.fenced = true;
    record.in_controlled_shutdown = false;
  }
  const int64_t epoch = record.broker_epoch;
  // KIP-966: a new incarnation whose previous broker epoch is not the one it last registered with did not
  // shut down cleanly (ClusterControlManager.registerBroker): it leaves the ISRs and ELRs first.
  const bool unclean_shutdown =
      existing != image->brokers.end() && new_incarnation && previous_broker_epoch != existing->second.epoch;
  record_list records;
  if (unclean_shutdown) {
    _replication.append_unclean_shutdown_records(*image, id, records);
    if (!records.empty()) {
      subsystem_logger("controller")
          ->info(
              "broker {} registered after an unclean shutdown (previous epoch {}, last registered {}): "
              "removed from {} ISR/ELR(s)",
              id, previous_broker_epoch, existing->second.epoch, records.size());
    }
  }
  records.push_back(versioned(std::move(record), register_broker_record_version));
  if (auto st = _writer.write(records); !st.ok()) return st;
  // A new incarnation's session starts afresh (ClusterControlManager.registerBroker drops the old one).
  if (new_incarnation) _sessions.remove(id);
  return epoch;
}

protocol::broker_heartbeat_response cluster_control::broker_heartbeat(
    const protocol::broker_heartbeat_request& request, int64_t now_ms) {
  const metadata::metadata_image_ptr image_ptr = _writer.image();
  const metadata_image& image = *image_ptr;
  const int32_t id = request.broker_id;
  protocol::broker_heartbeat_response response;  // IsFenced true, IsCaughtUp false: what an error answers
  auto fail = [&](error_code code, const std::string& why) {
    subsystem_logger("controller")->debug("heartbeat from broker {} refused: {}", id, why);
    response.error_code = to_wire(code);
    return response;
  };

  // ClusterControlManager.checkBrokerEpoch (StaleBrokerEpochException).
  auto broker = image.brokers.find(id);
  if (broker == image.brokers.end()) {
    return fail(error_code::stale_broker_epoch,
                "Receive a heartbeat from broker " + std::to_string(id) + " before registration");
  }
  const int64_t epoch = broker->second.epoch;
  if (request.broker_epoch != epoch) {
    return fail(error_code::stale_broker_epoch, "Expected broker epoch " + std::to_string(epoch) +
                                                    ", but got broker epoch " +
                                                    std::to_string(request.broker_epoch));
  }

  broker_control_state current = broker_control_state::unfenced;
  if (broker->second.fenced) {
    current = broker_control_state::fenced;
  } else if (_sessions.in_controlled_shutdown(id)) {
    current = broker_control_state::controlled_shutdown;
  }
  heartbeat_facts facts;
  facts.want_fence = request.want_fence;
  facts.want_shut_down = request.want_shut_down;
  // The broker epoch is the offset of its RegisterBrokerRecord.
  facts.caught_up = request.current_metadata_offset >= epoch;
  facts.has_leaderships = leads_any(image, id);
  if (current == broker_control_state::controlled_shutdown) {
    std::vector<int32_t> active;
    for (const auto& [other, b] : image.brokers) {
      if (other != id && !b.fenced && !_sessions.in_controlled_shutdown(other)) active.push_back(other);
    }
    facts.shutdown_offset_reached =
        *_sessions.controlled_shutdown_offset(id) <= _sessions.lowest_offset(active);
  }
  const broker_control_state next = next_broker_state(current, facts);

  record_list records;
  if (next != current) {
    switch (next) {
      case broker_control_state::fenced:
      case broker_control_state::shutdown_now:
        // Kafka writes the fencing again for a fenced broker that shuts down; Mala writes nothing then.
        if (!broker->second.fenced) _replication.append_fence_records(image, {id}, records);
        break;
      case broker_control_state::unfenced:
        _replication.append_unfence_records(image, id, epoch, records);
        break;
      case broker_control_state::controlled_shutdown:
        _replication.append_controlled_shutdown_records(image, id, epoch, records);
        break;
    }
  }
  // KIP-1066 (ReplicationControlManager.handleDirectoriesCordoned): the broker's cordoned log dirs, recorded
  // when they changed or were never recorded; only from metadata.version 4.3-IV0.
  if (request.cordoned_log_dirs &&
      image.feature_level(std::string(metadata_version_feature)) >= cordoned_log_dirs_metadata_version) {
    const auto& stored = broker->second.cordoned_log_dirs;
    const auto& sent = *request.cordoned_log_dirs;
    const auto as_set = [](const std::vector<uuid>& dirs) {
      std::vector<std::array<uint8_t, 16>> out;
      for (const auto& d : dirs) out.push_back(d.bytes);
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
      return out;
    };
    if (!stored || as_set(*stored) != as_set(sent)) {
      protocol::broker_registration_change_record change;
      change.broker_id = id;
      change.broker_epoch = epoch;
      change.cordoned_log_dirs = sent;
      records.push_back(versioned(std::move(change), broker_registration_change_cordoned_version));
      subsystem_logger("controller")->info("broker {} cordoned log dirs: {}", id, sent.size());
    }
  }
  // KIP-858 (handleDirectoriesOffline): the dirs the broker reports failed, from metadata.version 3.7-IV2.
  if (!request.offline_log_dirs.empty() &&
      image.feature_level(std::string(metadata_version_feature)) >= directory_assignment_metadata_version) {
    _replication.append_directories_offline(image, id, epoch, request.offline_log_dirs, records);
  }
  if (auto st = _writer.write(records); !st.ok()) {
    // The heartbeat still counts for the session; the state stays as it was.
    _sessions.touch(id, now_ms, request.current_metadata_offset, broker->second.fenced);
    return fail(st.code, st.message);
  }
  if (next != current) {
    subsystem_logger("controller")
        ->info("broker {} (epoch {}) heartbeat: {} -> {} ({} record(s))", id, epoch, to_string(current),
               to_string(next), records.size());
  }
  _sessions.touch(id, now_ms, request.current_metadata_offset, is_fenced(next));
  // The controlled shutdown is complete once every active broker has replayed past the records that moved
  // its leaderships (QuorumController's processBatchEndOffset).
  if (next == broker_control_state::controlled_shutdown)
    _sessions.maybe_set_controlled_shutdown_offset(id, _writer.next_offset() - 1);

  response.is_caught_up = facts.caught_up;
  response.is_fenced = is_fenced(next);
  response.should_shut_down = should_shut_down(next);
  return response;
}

// ReplicationControlManager.maybeFenceOneStaleBroker, for every stale broker at once.
void cluster_control::fence_stale_brokers(int64_t now_ms) {
  const metadata::metadata_image_ptr image = _writer.image();
  std::vector<int32_t> unfenced;
  for (const auto& [id, b] : image->brokers)
    if (!b.fenced) unfenced.push_back(id);
  const std::vector<int32_t> stale = _sessions.stale_brokers(unfenced, now_ms);
  if (stale.empty()) return;
  // The brokers whose sessions expired by now are fenced in one batch. Kafka fences one stale broker at a
  // time (maybeFenceOneStaleBroker), each fencing handing its leaderships to an ISR member that is still
  // unfenced in the image even when that member's session has expired too and it is fenced next. After a
  // whole-cluster crash every session expires at once (they all restarted when the new controller became
  // active), and that cascade made the last broker fenced the last known leader of every partition, so all of
  // them came back under it. Fenced together, no partition is handed to a broker that is being fenced: each
  // keeps its own last leader (the last known leader once its ISR is empty), and the ELR keeps every ISR
  // member that left at once, which all had every committed record.
  record_list records;
  _replication.append_fence_records(*image, stale, records);
  if (auto st = _writer.write(records); !st.ok()) {
    subsystem_logger("controller")
        ->error("cannot fence broker(s) {} after their sessions timed out: {}", fmt::join(stale, ","),
                st.message);
    return;
  }
  subsystem_logger("controller")
      ->info("fenced broker(s) {} because their sessions have timed out ({} record(s))",
             fmt::join(stale, ","), records.size());
  for (int32_t id : stale) _sessions.fenced(id);
}

status cluster_control::unregister_broker(int32_t id) {
  const metadata::metadata_image_ptr image = _writer.image();
  auto broker = image->brokers.find(id);
  if (broker == image->brokers.end()) {
    return status::error(error_code::broker_id_not_registered,
                         fmt::format("Broker ID {} is not currently registered", id));
  }
  record_list records;
  _replication.append_unregister_records(*image, id, broker->second.epoch, records);
  if (auto st = _writer.write(records); !st.ok()) return st;
  _sessions.remove(id);
  subsystem_logger("controller")
      ->info("unregistered broker {} (epoch {}; {} record(s))", id, broker->second.epoch, records.size());
  return status::success();
}

status cluster_control::register_controller(const protocol::controller_registration_request& request) {
  if (_writer.image()->feature_level("metadata.version") < controller_registration_metadata_version) {
    return status::error(error_code::unsupported_version,
                         "The current MetadataVersion is too old to support controller registrations.");
  }
  protocol::register_controller_record record;
  record.controller_id = request.controller_id;
  record.incarnation_id = request.incarnation_id;
  record.zk_migration_ready = request.zk_migration_ready;
  for (const auto& l : request.listeners) {
    record.end_points.push_back({l.name, l.host, l.port, l.security_protocol});
  }
  for (const auto& f : request.features) {
    record.features.push_back({f.name, f.min_supported_version, f.max_supported_version});
  }
  if (auto st = _writer.write({versioned(std::move(record), record_v0)}); !st.ok()) return st;
  subsystem_logger("controller")
      ->info("registered controller {} (incarnation {})", request.controller_id,
             request.incarnation_id.to_string());
  return status::success();
}

void cluster_control::reset_heartbeat_deadlines(int64_t now_ms) {
  std::vector<int32_t> ids;
  for (const auto& [id, b] : _writer.image()->brokers) ids.push_back(id);
  _sessions.reset(ids, now_ms);
}

}  // namespace mala::controller
