#include "mala/controller/replication_control.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <random>
#include <set>
#include <utility>

#include "mala/common/logging.h"
#include "mala/controller/cluster_control.h"
#include "mala/controller/configuration_control.h"
#include "mala/controller/feature_control.h"
#include "mala/controller/partition_change.h"
#include "mala/metadata/metadata_delta.h"

namespace mala::controller {

using metadata::metadata_image;

namespace {

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// What a topic's configs say about its elections: min.insync.replicas (effective: capped at the replication
// factor) and unclean.leader.election.enable, resolved as every node resolves topic configs.
struct election_rules {
  int32_t min_insync_replicas = 1;
  bool unclean_leader_election = false;
};

election_rules election_rules_for(const metadata_image& image, const std::string& topic,
                                  const controller_options& options) {
  election_rules rules;
  for (const auto& e : resolve_topic_configs(image, topic, options.node_id, options.static_config)) {
    if (!e.value) continue;
    if (e.key->name == "min.insync.replicas") {
      if (auto v = parse_config_long(*e.value))
        rules.min_insync_replicas = static_cast<int32_t>(std::max<int64_t>(1, *v));
    } else if (e.key->name == "unclean.leader.election.enable") {
      rules.unclean_leader_election = *e.value == "true";
    }
  }
  return rules;
}

int32_t effective_min_isr(const election_rules& rules, const metadata::partition_state& p) {
  return std::max<int32_t>(
      1, std::min<int32_t>(rules.min_insync_replicas, static_cast<int32_t>(p.replicas.size())));
}

// The change request every election path starts from: the partition's ISR as target, a live (registered,
// unfenced, not shutting down) replica as acceptable leader, the topic's effective min ISR, and an unclean
// election when the topic's unclean.leader.election.enable says so. `image` must outlive the request.
partition_change_request change_request_for(const metadata_image& image, const controller_options& options,
                                            const std::string& topic, const uuid& topic_id,
                                            const metadata::partition_state& p) {
  const election_rules rules = election_rules_for(image, topic, options);
  partition_change_request request;
  request.topic_id = topic_id;
  request.target_isr = p.isr;
  request.acceptable_leader = [&image, &p](int32_t r) {
    return is_active_broker(image, r) && !image.replica_in_offline_dir(p, r);
  };
  request.min_insync_replicas = effective_min_isr(rules, p);
  if (rules.unclean_leader_election) request.election = election_type::unclean;
  return request;
}

void log_election(const std::string& topic, const metadata::partition_state& p,
                  const partition_change& change) {
  if (!change.record || change.leader == p.leader) return;
  auto log = subsystem_logger("controller");
  if (change.unclean) {
    log->warn(
        "{}-{}: unclean leader election (unclean.leader.election.enable) chose {}, a replica outside the ISR "
        "[{}] and ELR [{}]: records the old ISR had beyond its log may be lost",
        topic, p.partition, change.leader, fmt::join(p.isr, ","), fmt::join(p.eligible_leader_replicas, ","));
  } else if (change.from_last_known_leader) {
    // KIP-966: every ISR and ELR member registered again after an unclean shutdown, and the leader they
    // last had is back. It had every committed record when the ISR emptied; only what its own crash kept
    // from reaching the disk can be missing, hence the ISR restarting from it alone (RECOVERING).
    log->info(
        "{}-{}: leader {} elected as the last known leader (KIP-966: every ISR and ELR member restarted "
        "without a clean shutdown); the ISR restarts from it",
        topic, p.partition, change.leader);
  } else if (change.from_elr) {
    log->info("{}-{}: leader {} elected from the ELR", topic, p.partition, change.leader);
  }
}

// generateLeaderAndIsrUpdates for one partition: the target ISR is the ISR without `brokers_to_remove` and
// `broker_with_unclean_shutdown`; an acceptable leader is active (registered, unfenced, not in controlled
// shutdown) or `broker_to_add` (the broker being unfenced, still fenced in the image), and never one of
// `brokers_to_remove` or `broker_with_unclean_shutdown`. Kafka removes one broker at a time; several are
// removed together only when several sessions expired at once (fence_stale_brokers). The topic's
// unclean.leader.election.enable makes it an unclean election. The ISR shrinking alone does not bump the
// leader epoch from metadata.version 3.6 (KAFKA-15021).
std::optional<protocol::partition_change_record> leader_and_isr_change(
    const metadata_image& image, const controller_options& options, const std::string& topic,
    const uuid& topic_id, const metadata::partition_state& p, const std::vector<int32_t>& brokers_to_remove,
    int32_t broker_to_add, int32_t broker_with_unclean_shutdown = metadata::no_leader) {
  partition_change_request request = change_request_for(image, options, topic, topic_id, p);
  const auto removed = [&](int32_t r) {
    return contains(brokers_to_remove, r) || r == broker_with_unclean_shutdown;
  };
  std::erase_if(request.target_isr, removed);
  request.acceptable_leader = [&](int32_t r) {
    return !removed(r) && (r == broker_to_add || is_active_broker(image, r)) &&
           !image.replica_in_offline_dir(p, r);
  };
  if (broker_with_unclean_shutdown != metadata::no_leader) {
    request.unclean_shutdown_replicas.push_back(broker_with_unclean_shutdown);
  }
  partition_change change = build_partition_change(p, request);
  log_election(topic, p, change);
  return std::move(change.record);
}

// A BrokerRegistrationChangeRecord for broker `id` at `epoch` that changes nothing yet.
protocol::broker_registration_change_record registration_change(int32_t id, int64_t epoch) {
  protocol::broker_registration_change_record change;
  change.broker_id = id;
  change.broker_epoch = epoch;
  return change;
}

}  // namespace

replication_control::replication_control(metadata_writer& writer, controller_options options)
    : _writer(writer), _options(std::move(options)) {
  _placement_rng.seed(_options.placement_seed != 0 ? _options.placement_seed : std::random_device{}());
}

// ---------------------------------------------------------------------------------------------------------------
// Broker state changes (ReplicationControlManager.handleBrokerFenced / handleBrokerUnfenced /
// handleBrokerInControlledShutdown / handleBrokerUncleanShutdown and the part of PartitionChangeBuilder they
// use)

template <typename Select>
void replication_control::append_leader_and_isr_changes(const metadata_image& image,
                                                        const std::vector<int32_t>& brokers_to_remove,
                                                        int32_t broker_to_add, Select select,
                                                        record_list& records,
                                                        int32_t broker_with_unclean_shutdown) const {
  for (const auto& [name, topic] : image.topics) {
    for (const auto& p : topic.partitions) {
      if (!select(p)) continue;
      if (auto change = leader_and_isr_change(image, _options, name, topic.id, p, brokers_to_remove,
                                              broker_to_add, broker_with_unclean_shutdown))
        records.push_back(versioned(std::move(*change), partition_change_record_version));
    }
  }
}

bool leads_any(const metadata_image& image, int32_t id) {
  for (const auto& [name, topic] : image.topics)
    for (const auto& p : topic.partitions)
      if (p.leader == id) return true;
  return false;
}

// handleBrokerFenced for `ids` (registered brokers) together: off every ISR, each partition's leadership
// moved to an ISR member that is not being fenced, then BrokerRegistrationChangeRecord Fenced = 1 for each
// (Kafka 4.x's form; FenceBrokerRecord is for metadata.version < 3.3-IV2).
void replication_control::append_fence_records(const metadata_image& image, const std::vector<int32_t>& ids,
                                               record_list& records) const {
  append_leader_and_isr_changes(
      image, ids, metadata::no_leader,
      [&ids](const metadata::partition_state& p) {
        return std::any_of(ids.begin(), ids.end(), [&](int32_t id) { return contains(p.isr, id); });
      },
      records, metadata::no_leader);
  for (int32_t id : ids) {
    auto change = registration_change(id, image.brokers.at(id).epoch);
    change.fenced = metadata::fencing_change_fence;
    records.push_back(versioned(change, record_v0));
  }
}

// handleBrokerUnfenced: BrokerRegistrationChangeRecord Fenced = -1, then leaders for every leaderless
// partition, the newly unfenced broker counting as active.
void replication_control::append_unfence_records(const metadata_image& image, int32_t id, int64_t epoch,
                                                 record_list& records) const {
  auto change = registration_change(id, epoch);
  change.fenced = metadata::fencing_change_unfence;
  records.push_back(versioned(change, record_v0));
  append_leader_and_isr_changes(
      image, {}, id, [](const metadata::partition_state& p) { return p.leader == metadata::no_leader; },
      records, metadata::no_leader);
}

// handleBrokerInControlledShutdown: InControlledShutdown = 1 (once), then off every ISR it can leave, its
// leaderships moved to other active ISR members.
void replication_control::append_controlled_shutdown_records(const metadata_image& image, int32_t id,
                                                             int64_t epoch, record_list& records) const {
  auto broker = image.brokers.find(id);
  if (broker != image.brokers.end() && !broker->second.in_controlled_shutdown) {
    auto change = registration_change(id, epoch);
    change.in_controlled_shutdown = metadata::controlled_shutdown_change_in_controlled_shutdown;
    records.push_back(versioned(change, controlled_shutdown_change_version));
  }
  append_leader_and_isr_changes(
      image, {id}, metadata::no_leader,
      [id](const metadata::partition_state& p) { return contains(p.isr, id); }, records, metadata::no_leader);
}

// handleBrokerUncleanShutdown (KIP-966): a broker that comes back without having shut down cleanly may have
// lost the tail of its logs, so it leaves every ISR and ELR it is in and may not lead until it catches up.
void replication_control::append_unclean_shutdown_records(const metadata_image& image, int32_t id,
                                                          record_list& records) const {
  append_leader_and_isr_changes(
      image, {}, metadata::no_leader,
      [id](const metadata::partition_state& p) {
        // A single replica has no better copy to wait for: it keeps its partition.
        return p.replicas.size() > 1 && (contains(p.isr, id) || contains(p.eligible_leader_replicas, id));
      },
      records, id);
}

void replication_control::append_directories_offline(const metadata_image& image, int32_t id, int64_t epoch,
                                                     const std::vector<uuid>& offline_dirs,
                                                     record_list& records) const {
  auto broker = image.brokers.find(id);
  if (broker == image.brokers.end()) return;
  const auto reported = [&offline_dirs](const uuid& dir) {
    return std::find(offline_dirs.begin(), offline_dirs.end(), dir) != offline_dirs.end();
  };
  std::vector<uuid> newly_offline;
  std::vector<uuid> still_online;
  for (const auto& dir : broker->second.log_dirs)
    (reported(dir) ? newly_offline : still_online).push_back(dir);
  if (newly_offline.empty()) return;
  append_leader_and_isr_changes(
      image, {id}, metadata::no_leader,
      [&](const metadata::partition_state& p) {
        const auto at = std::find(p.replicas.begin(), p.replicas.end(), id);
        const auto index = static_cast<size_t>(at - p.replicas.begin());
        return at != p.replicas.end() && index < p.directories.size() &&
               std::find(newly_offline.begin(), newly_offline.end(), p.directories[index]) !=
                   newly_offline.end();
      },
      records, metadata::no_leader);
  // An empty LogDirs means "no change" to every reader: a broker whose dirs all failed keeps them listed and
  // its replicas simply stay out of the ISRs (each later heartbeat finds nothing more to change).
  if (!still_online.empty()) {
    auto change = registration_change(id, epoch);
    change.log_dirs = still_online;
    records.push_back(versioned(std::move(change), broker_registration_change_log_dirs_version));
    std::vector<std::string> offline_names;
    std::vector<std::string> online_names;
    for (const auto& dir : newly_offline) offline_names.push_back(dir.to_string());
    for (const auto& dir : still_online) online_names.push_back(dir.to_string());
    subsystem_logger("controller")
        ->warn("Directories {} in broker {} marked offline, remaining directories: {}",
               fmt::join(offline_names, ","), id, fmt::join(online_names, ","));
  }
}

// handleBrokerUnregistered: generateLeaderAndIsrUpdates removing the broker over the partitions whose ISR
// holds it, then over those whose ELR holds it, then UnregisterBrokerRecord.
void replication_control::append_unregister_records(const metadata_image& image, int32_t id, int64_t epoch,
                                                    record_list& records) const {
  append_leader_and_isr_changes(
      image, {id}, metadata::no_leader,
      [id](const metadata::partition_state& p) { return contains(p.isr, id); }, records, metadata::no_leader);
  append_leader_and_isr_changes(
      image, {id}, metadata::no_leader,
      [id](const metadata::partition_state& p) {
        return !contains(p.isr, id) && contains(p.eligible_leader_replicas, id);
      },
      records, metadata::no_leader);
  protocol::unregister_broker_record unregister;
  unregister.broker_id = id;
  unregister.broker_epoch = epoch;
  records.push_back(versioned(unregister, record_v0));
}

// ---------------------------------------------------------------------------------------------------------------
// AlterPartition (ReplicationControlManager.alterPartition): a partition leader changes its ISR (and clears
// the RECOVERING state after an unclean election).

namespace {

// validateAlterPartitionData, in Kafka's order.
error_code validate_alter_partition(
    const metadata_image& image, int32_t broker_id, const metadata::partition_state& p,
    const protocol::alter_partition_request::partition_data& data,
    const std::vector<protocol::alter_partition_request::broker_state>& new_isr, int16_t version) {
  auto log = subsystem_logger("controller");
  // A leader ahead of the image: this controller is likely not the active one any more.
  if (data.leader_epoch > p.leader_epoch || data.partition_epoch > p.partition_epoch) {
    return error_code::not_controller;
  }
  if (data.leader_epoch < p.leader_epoch) return error_code::fenced_leader_epoch;
  if (broker_id != p.leader) return error_code::invalid_request;
  if (data.partition_epoch < p.partition_epoch) return error_code::invalid_update_version;
  std::vector<int32_t> ids;
  for (const auto& b : new_isr) {
    if (!contains(p.replicas, b.broker_id) || contains(ids, b.broker_id)) return error_code::invalid_request;
    ids.push_back(b.broker_id);
  }
  if (!contains(ids, p.leader)) return error_code::invalid_request;
  if (data.leader_recovery_state == metadata::leader_recovering && ids.size() > 1) {
    return error_code::invalid_request;
  }
  if (p.leader_recovery_state == metadata::leader_recovered &&
      data.leader_recovery_state == metadata::leader_recovering) {
    return error_code::invalid_request;
  }
  for (const auto& b : new_isr) {
    auto reg = image.brokers.find(b.broker_id);
    std::string why;
    if (reg == image.brokers.end()) {
      why = "not registered";
    } else if (reg->second.in_controlled_shutdown) {
      why = "shutting down";
    } else if (reg->second.fenced) {
      why = "fenced";
    } else if (b.broker_epoch != -1 && b.broker_epoch != reg->second.epoch) {
      why = "broker epoch mismatch: requested=" + std::to_string(b.broker_epoch) +
            " VS expected=" + std::to_string(reg->second.epoch);
    }
    if (!why.empty()) {
      log->info("rejecting AlterPartition from node {}: replica {} is ineligible for the ISR ({})", broker_id,
                b.broker_id, why);
      return version > 1 ? error_code::ineligible_replica : error_code::operation_not_attempted;
    }
  }
  return error_code::none;
}

}  // namespace

protocol::alter_partition_response replication_control::alter_partition(
    const protocol::alter_partition_request& request, int16_t version) {
  const metadata::metadata_image_ptr image = _writer.image();
  protocol::alter_partition_response response;
  auto broker = image->brokers.find(request.broker_id);
  if (broker == image->brokers.end() || broker->second.epoch != request.broker_epoch) {
    response.error_code = to_wire(error_code::stale_broker_epoch);
    return response;
  }
  record_list records;
  // Partitions whose change is written: their answer is filled once the batch is committed.
  struct written {
    size_t topic_index;
    size_t partition_index;
    std::string topic;
    int32_t partition;
  };
  std::vector<written> pending;
  for (const auto& topic_data : request.topics) {
    protocol::alter_partition_response::topic_data out_topic;
    out_topic.topic_name = topic_data.topic_name;
    out_topic.topic_id = topic_data.topic_id;
    const metadata::topic_metadata* topic =
        version > 1 ? image->find_topic(topic_data.topic_id) : image->find_topic(topic_data.topic_name);
    for (const auto& data : topic_data.partitions) {
      protocol::alter_partition_response::partition_data out;
      out.partition_index = data.partition_index;
      auto fail = [&](error_code code) {
        out.error_code = to_wire(code);
        out_topic.partitions.push_back(out);
      };
      if (!topic) {
        fail(version > 1 ? error_code::unknown_topic_id : error_code::unknown_topic_or_partition);
        continue;
      }
      if (data.partition_index < 0 ||
          data.partition_index >= static_cast<int32_t>(topic->partitions.size())) {
        fail(error_code::unknown_topic_or_partition);
        continue;
      }
      const metadata::partition_state& p = topic->partitions[static_cast<size_t>(data.partition_index)];
      std::vector<protocol::alter_partition_request::broker_state> new_isr = data.new_isr_with_epochs;
      if (version < 3) {
        new_isr.clear();
        for (int32_t id : data.new_isr) new_isr.push_back({id, -1});
      }
      if (auto e = validate_alter_partition(*image, request.broker_id, p, data, new_isr, version);
          e != error_code::none) {
        fail(e);
        continue;
      }
      partition_change_request change_request =
          change_request_for(*image, _options, topic->name, topic->id, p);
      change_request.target_isr.clear();
      for (const auto& b : new_isr) change_request.target_isr.push_back(b.broker_id);
      change_request.target_leader_recovery_state = data.leader_recovery_state;
      partition_change change = build_partition_change(p, change_request);
      if (change.record) {
        if (change.leader != p.leader) {
          // Only a reassignment that this ISR change completes may move the leadership (the leader was
          // removed): the change is written and the leader told NEW_LEADER_ELECTED to wait for the metadata.
          if (change.reassignment_completed) {
            records.push_back(versioned(std::move(*change.record), partition_change_record_version));
          }
          fail(version > 1 ? error_code::new_leader_elected : error_code::fenced_leader_epoch);
          continue;
        }
        records.push_back(versioned(std::move(*change.record), partition_change_record_version));
      }
      pending.push_back({response.topics.size(), out_topic.partitions.size(), topic->name, p.partition});
      out_topic.partitions.push_back(out);
    }
    response.topics.push_back(std::move(out_topic));
  }
  if (auto st = _writer.write(records); !st.ok()) {
    response.error_code = to_wire(write_failure_code(st));
    return response;
  }
  // The state after the change (or as it was, when nothing changed).
  for (const written& w : pending) {
    const metadata::topic_metadata* topic = _writer.image()->find_topic(w.topic);
    auto& out = response.topics[w.topic_index].partitions[w.partition_index];
    if (!topic || w.partition >= static_cast<int32_t>(topic->partitions.size())) {
      out.error_code = to_wire(error_code::unknown_topic_or_partition);
      continue;
    }
    const metadata::partition_state& p = topic->partitions[static_cast<size_t>(w.partition)];
    out.error_code = 0;
    out.leader_id = p.leader;
    out.leader_epoch = p.leader_epoch;
    out.isr = p.isr;
    out.leader_recovery_state = p.leader_recovery_state;
    out.partition_epoch = p.partition_epoch;
  }
  if (!records.empty()) {
    subsystem_logger("controller")
        ->info("node {} altered the ISR of {} partition(s)", request.broker_id, records.size());
  }
  return response;
}

// ---------------------------------------------------------------------------------------------------------------
// ElectLeaders (ReplicationControlManager.electLeaders): a preferred election moves leadership to the first
// replica when it is in sync and alive; an unclean one elects a leader for a leaderless partition, from
// outside the ISR if it must.

protocol::assign_replicas_to_dirs_response replication_control::assign_replicas_to_dirs(
    const protocol::assign_replicas_to_dirs_request& request) {
  const metadata::metadata_image_ptr image = _writer.image();
  protocol::assign_replicas_to_dirs_response response;
  if (image->feature_level(std::string(metadata_version_feature)) < directory_assignment_metadata_version) {
    response.error_code = to_wire(error_code::unsupported_version);
    return response;
  }
  auto broker = image->brokers.find(request.broker_id);
  if (broker == image->brokers.end() || broker->second.epoch != request.broker_epoch) {
    response.error_code = to_wire(error_code::stale_broker_epoch);
    return response;
  }
  record_list records;
  std::set<std::pair<std::string, int32_t>> in_offline_dirs;
  for (const auto& dir : request.directories) {
    const bool offline = !broker->second.has_online_dir(dir.id);
    auto& out_dir = response.directories.emplace_back();
    out_dir.id = dir.id;
    for (const auto& topic_data : dir.topics) {
      const metadata::topic_metadata* topic = image->find_topic(topic_data.topic_id);
      auto& out_topic = out_dir.topics.emplace_back();
      out_topic.topic_id = topic_data.topic_id;
      for (const auto& part : topic_data.partitions) {
        auto& out = out_topic.partitions.emplace_back();
        out.partition_index = part.partition_index;
        if (!topic) {
          out.error_code = to_wire(error_code::unknown_topic_id);
          continue;
        }
        if (part.partition_index < 0 ||
            part.partition_index >= static_cast<int32_t>(topic->partitions.size())) {
          out.error_code = to_wire(error_code::unknown_topic_or_partition);
          continue;
        }
        const metadata::partition_state& p = topic->partitions[static_cast<size_t>(part.partition_index)];
        auto replica = std::find(p.replicas.begin(), p.replicas.end(), request.broker_id);
        if (replica == p.replicas.end()) {
          out.error_code = to_wire(error_code::not_leader_or_follower);
          continue;
        }
        // PartitionChangeBuilder.setDirectory: the replica's entry of Directories, written when it changes.
        std::vector<uuid> directories = p.directories;
        directories.resize(p.replicas.size(), metadata::directory_unassigned);
        uuid& entry = directories[static_cast<size_t>(replica - p.replicas.begin())];
        if (!(entry == dir.id)) {
          entry = dir.id;
          protocol::partition_change_record record;
          record.topic_id = topic->id;
          record.partition_id = p.partition;
          record.directories = std::move(directories);
          records.push_back(versioned(std::move(record), partition_change_record_version));
        }
        if (offline) in_offline_dirs.emplace(topic->name, p.partition);
      }
    }
  }
  // A replica in a dir the broker does not have online cannot serve: it leaves the ISR and its leadership
  // moves (generateLeaderAndIsrUpdates "offline-dir-assignment").
  if (!in_offline_dirs.empty()) {
    for (const auto& [name, topic] : image->topics) {
      for (const auto& p : topic.partitions) {
        if (!in_offline_dirs.contains({name, p.partition})) continue;
        if (auto change = leader_and_isr_change(*image, _options, name, topic.id, p, {request.broker_id},
                                                metadata::no_leader, metadata::no_leader))
          records.push_back(versioned(std::move(*change), partition_change_record_version));
      }
    }
  }
  if (auto st = _writer.write(records); !st.ok()) {
    response.error_code = to_wire(write_failure_code(st));
    response.directories.clear();
  }
  return response;
}

protocol::elect_leaders_response replication_control::elect_leaders(
    const protocol::elect_leaders_request& request, int16_t version) {
  const metadata::metadata_image_ptr image = _writer.image();
  const bool unclean = version > 0 && request.election_type == 1;
  protocol::elect_leaders_response response;
  // Every partition when the request names none (kafka-leader-election --all-topic-partitions).
  std::vector<std::pair<std::string, std::vector<int32_t>>> wanted;
  if (!request.topic_partitions) {
    for (const auto& [name, topic] : image->topics) {
      std::vector<int32_t> ids;
      for (const auto& p : topic.partitions) ids.push_back(p.partition);
      wanted.emplace_back(name, std::move(ids));
    }
  } else {
    for (const auto& t : *request.topic_partitions) wanted.emplace_back(t.topic, t.partitions);
  }
  record_list records;
  for (const auto& [name, ids] : wanted) {
    protocol::elect_leaders_response::replica_election_result result;
    result.topic = name;
    const metadata::topic_metadata* topic = image->find_topic(name);
    for (int32_t id : ids) {
      protocol::elect_leaders_response::partition_result_data out;
      out.partition_id = id;
      auto answer = [&](error_code code, std::string message) {
        // Electing every partition answers only for those that needed an election (as Kafka does).
        if (!request.topic_partitions && code == error_code::election_not_needed) return;
        out.error_code = to_wire(code);
        out.error_message =
            code == error_code::none ? std::nullopt : std::optional<std::string>(std::move(message));
        result.partition_result.push_back(out);
      };
      if (!topic || id < 0 || id >= static_cast<int32_t>(topic->partitions.size())) {
        answer(error_code::unknown_topic_or_partition, "The partition does not exist.");
        continue;
      }
      const metadata::partition_state& p = topic->partitions[static_cast<size_t>(id)];
      if (!unclean && !p.replicas.empty() && p.leader == p.replicas.front()) {
        answer(error_code::election_not_needed, "The preferred replica is already the leader.");
        continue;
      }
      if (unclean && p.leader != metadata::no_leader) {
        answer(error_code::election_not_needed, "The partition has a leader.");
        continue;
      }
      partition_change_request change_request = change_request_for(*image, _options, name, topic->id, p);
      change_request.election = unclean ? election_type::unclean : election_type::preferred;
      partition_change change = build_partition_change(p, change_request);
      if (!change.record || change.record->leader == metadata::no_leader_change ||
          change.leader == metadata::no_leader) {
        answer(
            unclean ? error_code::eligible_leaders_not_available : error_code::preferred_leader_not_available,
            unclean ? "No live replica can lead." : "The preferred replica is not in the ISR or not alive.");
        continue;
      }
      log_election(name, p, change);
      records.push_back(versioned(std::move(*change.record), partition_change_record_version));
      answer(error_code::none, "");
    }
    response.replica_election_results.push_back(std::move(result));
  }
  if (auto st = _writer.write(records); !st.ok()) {
    const error_code code = write_failure_code(st);
    for (auto& r : response.replica_election_results)
      for (auto& p : r.partition_result)
        if (p.error_code == 0) p.error_code = to_wire(code);
  }
  return response;
}

// ---------------------------------------------------------------------------------------------------------------
// AlterPartitionReassignments / ListPartitionReassignments (ReplicationControlManager, KIP-455)

protocol::alter_partition_reassignments_response replication_control::alter_partition_reassignments(
    const protocol::alter_partition_reassignments_request& request) {
  const metadata::metadata_image_ptr image = _writer.image();
  protocol::alter_partition_reassignments_response response;
  record_list records;
  auto log = subsystem_logger("controller");
  for (const auto& t : request.topics) {
    protocol::alter_partition_reassignments_response::reassignable_topic_response out_topic;
    out_topic.name = t.name;
    const metadata::topic_metadata* topic = image->find_topic(t.name);
    for (const auto& part : t.partitions) {
      protocol::alter_partition_reassignments_response::reassignable_partition_response out;
      out.partition_index = part.partition_index;
      auto answer = [&](error_code code, std::string message) {
        out.error_code = to_wire(code);
        out.error_message =
            code == error_code::none ? std::nullopt : std::optional<std::string>(std::move(message));
        out_topic.partitions.push_back(out);
      };
      if (!topic || part.partition_index < 0 ||
          part.partition_index >= static_cast<int32_t>(topic->partitions.size())) {
        answer(error_code::unknown_topic_or_partition, "The topic or partition does not exist.");
        continue;
      }
      const metadata::partition_state& p = topic->partitions[static_cast<size_t>(part.partition_index)];
      const bool in_progress = !p.adding_replicas.empty() || !p.removing_replicas.empty();
      // The replicas before any reassignment in progress (Kafka's PartitionReassignmentRevert).
      std::vector<int32_t> original;
      for (int32_t r : p.replicas)
        if (!contains(p.adding_replicas, r)) original.push_back(r);
      std::vector<int32_t> target;
      if (!part.replicas) {
        if (!in_progress) {
          answer(error_code::no_reassignment_in_progress,
                 "No reassignment is in progress for this partition.");
          continue;
        }
        target = original;
      } else {
        target = *part.replicas;
        std::vector<int32_t> seen;
        std::string problem;
        if (target.empty()) problem = "The replica list is empty.";
        for (int32_t r : target) {
          if (contains(seen, r)) problem = "Duplicate replica " + std::to_string(r) + ".";
          if (auto b = image->brokers.find(r); b == image->brokers.end()) {
            problem = "Replica " + std::to_string(r) + " is not a registered broker.";
          } else if (!has_uncordoned_dirs(b->second)) {
            // KIP-1066: the whole target, replicas kept included (Kafka 4.4's changePartitionReassignment).
            problem = "The manual partition assignment includes broker " + std::to_string(r) +
                      ", but all its log directories are cordoned.";
          }
          seen.push_back(r);
        }
        if (!problem.empty()) {
          answer(error_code::invalid_replica_assignment, problem);
          continue;
        }
      }
      // From the original assignment to the target: the target first, then the replicas that go.
      std::vector<int32_t> merged = target, adding, removing;
      for (int32_t r : target)
        if (!contains(original, r)) adding.push_back(r);
      for (int32_t r : original) {
        if (!contains(target, r)) {
          removing.push_back(r);
          merged.push_back(r);
        }
      }
      // A clean election if the leader goes (Kafka's reassignment changes do not elect uncleanly).
      partition_change_request change_request =
          change_request_for(*image, _options, topic->name, topic->id, p);
      change_request.election = election_type::online;
      std::erase_if(change_request.target_isr, [&](int32_t r) { return !contains(merged, r); });
      change_request.target_replicas = merged;
      change_request.target_adding = adding;
      change_request.target_removing = removing;
      partition_change change = build_partition_change(p, change_request);
      if (change.record) {
        log->info("{}-{}: reassignment {} replicas {} (adding {}, removing {}){}", topic->name, p.partition,
                  part.replicas ? "to" : "cancelled, back to", fmt::join(target, ","), fmt::join(adding, ","),
                  fmt::join(removing, ","), change.reassignment_completed ? ": complete at once" : "");
        records.push_back(versioned(std::move(*change.record), partition_change_record_version));
      }
      answer(error_code::none, "");
    }
    response.responses.push_back(std::move(out_topic));
  }
  if (auto st = _writer.write(records); !st.ok()) {
    response.error_code = to_wire(write_failure_code(st));
    response.error_message = st.message;
  }
  return response;
}

protocol::list_partition_reassignments_response replication_control::list_partition_reassignments(
    const protocol::list_partition_reassignments_request& request) const {
  const metadata::metadata_image_ptr image = _writer.image();
  protocol::list_partition_reassignments_response response;
  auto add = [&](const metadata::topic_metadata& topic, const metadata::partition_state& p) {
    if (p.adding_replicas.empty() && p.removing_replicas.empty()) return;
    auto it = std::find_if(response.topics.begin(), response.topics.end(),
                           [&](const auto& t) { return t.name == topic.name; });
    if (it == response.topics.end()) {
      response.topics.emplace_back().name = topic.name;
      it = response.topics.end() - 1;
    }
    auto& out = it->partitions.emplace_back();
    out.partition_index = p.partition;
    out.replicas = p.replicas;
    out.adding_replicas = p.adding_replicas;
    out.removing_replicas = p.removing_replicas;
  };
  if (!request.topics) {
    for (const auto& [name, topic] : image->topics)
      for (const auto& p : topic.partitions) add(topic, p);
  } else {
    for (const auto& t : *request.topics) {
      const metadata::topic_metadata* topic = image->find_topic(t.name);
      if (!topic) continue;
      for (int32_t id : t.partition_indexes)
        if (id >= 0 && id < static_cast<int32_t>(topic->partitions.size()))
          add(*topic, topic->partitions[static_cast<size_t>(id)]);
    }
  }
  return response;
}

void replication_control::elect_unclean_leaders() {
  const metadata::metadata_image_ptr image = _writer.image();
  record_list records;
  for (const auto& [name, topic] : image->topics) {
    bool leaderless = false;
    for (const auto& p : topic.partitions) leaderless = leaderless || p.leader == metadata::no_leader;
    if (!leaderless || !election_rules_for(*image, name, _options).unclean_leader_election) continue;
    for (const auto& p : topic.partitions) {
      if (p.leader != metadata::no_leader) continue;
      if (auto change = leader_and_isr_change(*image, _options, name, topic.id, p, {}, metadata::no_leader))
        records.push_back(versioned(std::move(*change), partition_change_record_version));
    }
  }
  if (records.empty()) return;
  if (auto st = _writer.write(records); !st.ok()) {
    subsystem_logger("controller")->error("cannot write the unclean leader elections: {}", st.message);
  }
}

void replication_control::maybe_rebalance_leaders(int64_t now_ms) {
  if (!_options.auto_leader_rebalance) return;
  if (_next_leader_rebalance_ms == 0)
    _next_leader_rebalance_ms = now_ms + _options.leader_imbalance_check_interval_ms;
  if (now_ms < _next_leader_rebalance_ms) return;
  _next_leader_rebalance_ms = now_ms + _options.leader_imbalance_check_interval_ms;
  const metadata::metadata_image_ptr image = _writer.image();
  record_list records;
  for (const auto& [name, topic] : image->topics) {
    for (const auto& p : topic.partitions) {
      if (p.replicas.empty() || p.leader == p.replicas.front()) continue;
      const int32_t preferred = p.replicas.front();
      if (!contains(p.isr, preferred) || !is_active_broker(*image, preferred)) continue;
      partition_change_request request = change_request_for(*image, _options, name, topic.id, p);
      request.election = election_type::preferred;
      partition_change change = build_partition_change(p, request);
      if (change.record && change.leader == preferred) {
        records.push_back(versioned(std::move(*change.record), partition_change_record_version));
      }
    }
  }
  if (records.empty()) return;
  if (auto st = _writer.write(records); !st.ok()) {
    subsystem_logger("controller")->error("cannot write the preferred leader elections: {}", st.message);
    return;
  }
  subsystem_logger("controller")
      ->info("moved leadership back to the preferred replica of {} partition(s)", records.size());
}

void replication_control::append_elr_clears_for_min_isr_changes(const metadata_image& image,
                                                                record_list& records) const {
  std::set<std::string> topics;
  bool every_topic = false;
  for (const auto& r : records) {
    const auto* c = std::get_if<protocol::config_record>(&r.record);
    if (!c || c->name != "min.insync.replicas") continue;
    if (c->resource_type == config_resource_topic) {
      topics.insert(c->resource_name);
    } else if (c->resource_type == config_resource_broker) {
      every_topic = true;
    }
  }
  if (!every_topic && topics.empty()) return;
  for (const auto& [name, topic] : image.topics) {
    if (!every_topic && !topics.count(name)) continue;
    for (const auto& p : topic.partitions) {
      if (p.eligible_leader_replicas.empty() && p.last_known_elr.empty()) continue;
      protocol::partition_change_record change;
      change.topic_id = topic.id;
      change.partition_id = p.partition;
      change.eligible_leader_replicas = std::vector<int32_t>{};
      change.last_known_elr = std::vector<int32_t>{};
      records.push_back(versioned(std::move(change), partition_change_record_version));
    }
  }
}

}  // namespace mala::controller
