// replication_control's topic lifecycle: CreateTopics, DeleteTopics and CreatePartitions (the rest of the
// class is in replication_control.cc).
#include <map>
#include <set>
#include <utility>

#include "mala/controller/cluster_control.h"
#include "mala/controller/configuration_control.h"
#include "mala/controller/metadata_log.h"
#include "mala/controller/replica_placement.h"
#include "mala/controller/replication_control.h"
#include "mala/controller/topic_config.h"
#include "mala/controller/topic_names.h"

namespace mala::controller {

using metadata::config_map;
using metadata::metadata_image;

namespace {

// A new partition as ReplicationControlManager.buildPartitionRegistration makes it: the ISR is the active
// replicas, the leader the first of them, epochs 0.
protocol::partition_record new_partition_record(const metadata_image& image, const uuid& topic_id,
                                                int32_t partition, const std::vector<int32_t>& replicas,
                                                std::vector<int32_t> isr) {
  protocol::partition_record r;
  r.partition_id = partition;
  r.topic_id = topic_id;
  r.replicas = replicas;
  r.leader = isr.front();
  r.isr = std::move(isr);
  r.leader_recovery_state = metadata::leader_recovered;
  r.leader_epoch = 0;
  r.partition_epoch = 0;
  for (int32_t replica : replicas) r.directories.push_back(default_dir(image, replica));
  return r;
}

std::vector<int32_t> active_replicas(const metadata_image& image, const std::vector<int32_t>& replicas) {
  std::vector<int32_t> out;
  for (int32_t r : replicas)
    if (is_active_broker(image, r)) out.push_back(r);
  return out;
}

// ReplicationControlManager.validateManualPartitionAssignment.
api_error check_manual_assignment(const metadata_image& image, const std::vector<int32_t>& replicas,
                                  std::optional<size_t> replication_factor) {
  if (replicas.empty()) {
    return error_of(error_code::invalid_replica_assignment,
                    "The manual partition assignment includes an empty replica list.");
  }
  std::vector<int32_t> sorted = replicas;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    const auto broker = image.brokers.find(sorted[i]);
    if (broker == image.brokers.end()) {
      return error_of(error_code::invalid_replica_assignment,
                      "The manual partition assignment includes broker " + std::to_string(sorted[i]) +
                          ", but no such broker is registered.");
    }
    if (!has_uncordoned_dirs(broker->second)) {
      return error_of(error_code::invalid_replica_assignment,
                      "The manual partition assignment includes broker " + std::to_string(sorted[i]) +
                          ", but all its log directories are cordoned.");
    }
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      return error_of(error_code::invalid_replica_assignment,
                      "The manual partition assignment includes the broker " + std::to_string(sorted[i]) +
                          " more than once.");
    }
  }
  if (replication_factor && sorted.size() != *replication_factor) {
    return error_of(error_code::invalid_replica_assignment,
                    "The manual partition assignment includes a partition with " +
                        std::to_string(sorted.size()) +
                        " replica(s), but this is not consistent with previous partitions, which have " +
                        std::to_string(*replication_factor) + " replica(s).");
  }
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// CreateTopics (ControllerApis.createTopics + ReplicationControlManager.createTopics)

protocol::create_topics_response replication_control::create_topics(
    const protocol::create_topics_request& request) {
  const metadata::metadata_image_ptr image_ptr = _writer.image();
  const metadata_image& image = *image_ptr;
  using topic_result = protocol::create_topics_response::creatable_topic_result;

  std::map<std::string, int> occurrences;
  for (const auto& t : request.topics) ++occurrences[t.name];
  // Existing names by their collision-unified form.
  std::map<std::string, std::string> collision_names;
  for (const auto& [name, topic] : image.topics)
    if (has_collision_chars(name)) collision_names.emplace(unify_collision_chars(name), name);

  protocol::create_topics_response response;
  record_list records;
  bool too_large = false;

  auto create_one = [&](const protocol::create_topics_request::creatable_topic& topic, topic_result& result,
                        record_list& out) -> api_error {
    // Names.
    api_error name_error;
    if (auto why = invalid_topic_name_reason(topic.name))
      name_error = error_of(error_code::invalid_topic_exception, *why);
    if (has_collision_chars(topic.name)) {
      if (auto it = collision_names.find(unify_collision_chars(topic.name)); it != collision_names.end()) {
        name_error = error_of(error_code::invalid_topic_exception,
                              "Topic '" + topic.name + "' collides with existing topic: " + it->second);
      }
    }
    if (image.topics.contains(topic.name)) {
      return error_of(error_code::topic_already_exists, "Topic '" + topic.name + "' already exists.");
    }
    if (!name_error.ok()) return name_error;

    // Configs, checked as ConfigurationControlManager checks a newly created resource's.
    auto validated_configs = new_topic_configs(topic.configs);
    if (!validated_configs.ok()) return error_of(validated_configs.error());
    const config_map configs = std::move(*validated_configs);

    // Replica assignment: manual, or placed over the usable brokers.
    std::vector<std::vector<int32_t>> replicas;
    std::vector<std::vector<int32_t>> isrs;
    if (!topic.assignments.empty()) {
      if (topic.replication_factor != -1) {
        return error_of(
            error_code::invalid_request,
            "A manual partition assignment was specified, but replication factor was not set to -1.");
      }
      if (topic.num_partitions != -1) {
        return error_of(error_code::invalid_request,
                        "A manual partition assignment was specified, but numPartitions was not set to -1.");
      }
      std::map<int32_t, std::vector<int32_t>> by_partition;
      std::optional<size_t> replication_factor;
      for (const auto& a : topic.assignments) {
        if (by_partition.contains(a.partition_index)) {
          return error_of(error_code::invalid_replica_assignment,
                          "Found multiple manual partition assignments for partition " +
                              std::to_string(a.partition_index));
        }
        if (auto e = check_manual_assignment(image, a.broker_ids, replication_factor); !e.ok()) return e;
        replication_factor = a.broker_ids.size();
        if (active_replicas(image, a.broker_ids).empty()) {
          return error_of(error_code::invalid_replica_assignment,
                          "All brokers specified in the manual partition assignment for partition " +
                              std::to_string(a.partition_index) + " are fenced or in controlled shutdown.");
        }
        by_partition.emplace(a.partition_index, a.broker_ids);
      }
      for (int32_t p = 0; p < static_cast<int32_t>(by_partition.size()); ++p) {
        if (!by_partition.contains(p)) {
          return error_of(error_code::invalid_replica_assignment,
                          "partitions should be a consecutive 0-based integer sequence");
        }
      }
      for (auto& [p, r] : by_partition) {
        isrs.push_back(active_replicas(image, r));
        replicas.push_back(std::move(r));
      }
    } else if (topic.replication_factor < -1 || topic.replication_factor == 0) {
      return error_of(error_code::invalid_replication_factor,
                      "Replication factor must be larger than 0, or -1 to use the default value.");
    } else if (topic.num_partitions < -1 || topic.num_partitions == 0) {
      return error_of(error_code::invalid_partitions,
                      "Number of partitions was set to an invalid non-positive value.");
    } else {
      const int32_t num_partitions =
          topic.num_partitions == -1 ? _options.num_partitions : topic.num_partitions;
      const int16_t replication_factor =
          topic.replication_factor == -1 ? _options.default_replication_factor : topic.replication_factor;
      if (static_cast<size_t>(num_partitions) + configs.size() + 1 > max_records_per_user_op) {
        too_large = true;
        return {};
      }
      auto placed =
          place_replicas(usable_brokers(image), num_partitions, replication_factor, _placement_rng());
      if (!placed.ok()) {
        // Kafka counts fenced brokers as placeable followers; Mala places only on usable (unfenced) brokers,
        // so a factor above the live brokers is refused here rather than leaving the ISR short.
        return error_of(placed.error().code, "Unable to replicate the partition " +
                                                 std::to_string(replication_factor) +
                                                 " time(s): " + placed.error().message);
      }
      replicas = std::move(*placed);
      isrs = replicas;
    }

    uuid topic_id = uuid::random();
    while (image.find_topic(topic_id)) topic_id = uuid::random();
    result.topic_id = topic_id;
    result.num_partitions = static_cast<int32_t>(replicas.size());
    result.replication_factor = static_cast<int16_t>(replicas.front().size());
    result.topic_config_error_code = to_wire(error_code::none);
    result.configs.emplace();
    for (const auto& e : resolve_topic_configs(image, &configs, _options.node_id, _options.static_config)) {
      protocol::create_topics_response::creatable_topic_configs c;
      c.name = std::string(e.key->name);
      c.value = e.value;
      c.read_only = false;
      c.config_source = static_cast<int8_t>(e.source);
      c.is_sensitive = false;
      result.configs->push_back(std::move(c));
    }

    // TopicRecord, then its ConfigRecords, then the PartitionRecords (Kafka's order).
    protocol::topic_record topic_record;
    topic_record.name = topic.name;
    topic_record.topic_id = topic_id;
    out.push_back(versioned(std::move(topic_record), record_v0));
    for (const auto& [name, value] : configs) {
      out.push_back(versioned(config_record_for(config_resource_topic, topic.name, name, value), record_v0));
    }
    for (size_t p = 0; p < replicas.size(); ++p) {
      out.push_back(versioned(
          new_partition_record(image, topic_id, static_cast<int32_t>(p), replicas[p], std::move(isrs[p])),
          partition_record_version));
    }
    return {};
  };

  std::vector<std::string> duplicates;
  bool cluster_metadata_requested = false;
  for (const auto& topic : request.topics) {
    int& count = occurrences[topic.name];
    if (count > 1) duplicates.push_back(topic.name);
    if (count != 1) {
      count = -1;  // a duplicate: reported once, after the others (ControllerApis.createTopics)
      continue;
    }
    if (topic.name == metadata_topic_name) {
      cluster_metadata_requested = true;
      continue;
    }
    topic_result result;
    result.name = topic.name;
    record_list topic_records;
    api_error e = create_one(topic, result, topic_records);
    if (!e.ok()) {
      result = topic_result{};
      result.name = topic.name;
      result.error_code = to_wire(e.code);
      result.error_message = e.message;
    } else {
      result.error_message = std::nullopt;
      records.insert(records.end(), std::make_move_iterator(topic_records.begin()),
                     std::make_move_iterator(topic_records.end()));
      if (records.size() > max_records_per_user_op) too_large = true;
    }
    response.topics.push_back(std::move(result));
  }
  for (const auto& name : duplicates) {
    topic_result result;
    result.name = name;
    result.error_code = to_wire(error_code::invalid_request);
    result.error_message = "Duplicate topic name.";
    response.topics.push_back(std::move(result));
  }
  if (cluster_metadata_requested) {
    topic_result result;
    result.name = std::string(metadata_topic_name);
    result.error_code = to_wire(error_code::invalid_request);
    result.error_message =
        "Creation of internal topic " + std::string(metadata_topic_name) + " is prohibited.";
    response.topics.push_back(std::move(result));
  }

  // A failure of the whole operation answers every topic of the request with it (CreateTopicsRequest's
  // getErrorResponse).
  auto fail_all = [&](const api_error& e) {
    response.topics.clear();
    std::set<std::string> seen;
    for (const auto& t : request.topics) {
      if (!seen.insert(t.name).second) continue;
      topic_result result;
      result.name = t.name;
      result.error_code = to_wire(e.code);
      result.error_message = e.message;
      response.topics.push_back(std::move(result));
    }
  };
  if (auto e = write_user_operation(_writer, records, too_large, request.validate_only); !e.ok()) fail_all(e);
  return response;
}

// ---------------------------------------------------------------------------------------------------------------
// DeleteTopics (ControllerApis.deleteTopics + ReplicationControlManager.deleteTopics)

protocol::delete_topics_response replication_control::delete_topics(
    const protocol::delete_topics_request& request, int16_t version) {
  const metadata::metadata_image_ptr image_ptr = _writer.image();
  const metadata_image& image = *image_ptr;
  using topic_result = protocol::delete_topics_response::deletable_topic_result;
  protocol::delete_topics_response response;

  auto append = [&](std::optional<std::string> name, const uuid& id, const api_error& e) {
    topic_result r;
    r.name = std::move(name);
    r.topic_id = id;
    r.error_code = to_wire(e.code);
    r.error_message = e.message;
    response.responses.push_back(std::move(r));
  };

  if (!_options.delete_topic_enable) {
    // DeleteTopicsRequest.getErrorResponse: every topic of the request gets the error.
    const api_error e = version < 3 ? error_of(error_code::invalid_request, "Topic deletion is disabled.")
                                    : api_error{error_code::topic_deletion_disabled, std::nullopt};
    for (const auto& name : request.topic_names) append(name, uuid{}, e);
    for (const auto& t : request.topics) append(t.name, t.topic_id, e);
    return response;
  }

  // Collect names and ids, refusing duplicates and malformed entries.
  std::vector<std::string> names;  // request order, duplicates removed below
  std::map<std::string, int> name_count;
  std::vector<uuid> ids;
  std::map<std::string, int> id_count;  // by the id's text form
  auto add_name = [&](const std::string& name) {
    if (name_count[name]++ == 0) names.push_back(name);
  };
  for (const auto& name : request.topic_names) add_name(name);
  for (const auto& t : request.topics) {
    if (!t.name) {
      if (t.topic_id.is_zero()) {
        append(std::nullopt, uuid{},
               error_of(error_code::invalid_request, "Neither topic name nor id were specified."));
      } else if (id_count[t.topic_id.to_string()]++ == 0) {
        ids.push_back(t.topic_id);
      }
    } else if (t.topic_id.is_zero()) {
      add_name(*t.name);
    } else {
      append(t.name, t.topic_id,
             error_of(error_code::invalid_request, "You may not specify both topic name and topic id."));
    }
  }
  for (const auto& name : names) {
    if (name_count[name] > 1)
      append(name, uuid{}, error_of(error_code::invalid_request, "Duplicate topic name."));
  }
  for (const auto& id : ids) {
    if (id_count[id.to_string()] > 1)
      append(std::nullopt, id, error_of(error_code::invalid_request, "Duplicate topic id."));
  }

  // Resolve to (id, name) pairs, by id first, as Kafka does.
  std::vector<std::pair<uuid, std::string>> to_delete;
  std::set<std::string> chosen_ids;
  for (const auto& id : ids) {
    if (id_count[id.to_string()] > 1) continue;
    const metadata::topic_metadata* topic = image.find_topic(id);
    if (!topic) {
      append(std::nullopt, id, default_error(error_code::unknown_topic_id));
      continue;
    }
    to_delete.emplace_back(id, topic->name);
    chosen_ids.insert(id.to_string());
  }
  for (const auto& name : names) {
    if (name_count[name] > 1) continue;
    const metadata::topic_metadata* topic = image.find_topic(name);
    if (!topic) {
      append(name, uuid{}, default_error(error_code::unknown_topic_or_partition));
      continue;
    }
    if (chosen_ids.contains(topic->id.to_string()) || id_count[topic->id.to_string()] > 1) {
      // The name maps to an id the request also gave: neither is deleted.
      std::erase_if(to_delete, [&](const auto& p) { return p.first == topic->id; });
      chosen_ids.erase(topic->id.to_string());
      id_count[topic->id.to_string()] = 2;
      append(name, topic->id,
             error_of(error_code::invalid_request,
                      "The provided topic name maps to an ID that was already supplied."));
      continue;
    }
    to_delete.emplace_back(topic->id, name);
    chosen_ids.insert(topic->id.to_string());
  }

  record_list records;
  for (const auto& [id, name] : to_delete) {
    protocol::remove_topic_record r;
    r.topic_id = id;
    records.push_back(versioned(r, record_v0));
  }
  const api_error outcome = write_user_operation(_writer, records, records.size() > max_records_per_user_op,
                                                 /*validate_only=*/false);
  for (const auto& [id, name] : to_delete) append(name, id, outcome);
  return response;
}

// ---------------------------------------------------------------------------------------------------------------
// CreatePartitions (ControllerApis.createPartitions + ReplicationControlManager.createPartitions)

protocol::create_partitions_response replication_control::create_partitions(
    const protocol::create_partitions_request& request) {
  const metadata::metadata_image_ptr image_ptr = _writer.image();
  const metadata_image& image = *image_ptr;
  using topic_result = protocol::create_partitions_response::create_partitions_topic_result;
  protocol::create_partitions_response response;

  auto result_of = [](const std::string& name, const api_error& e) {
    topic_result r;
    r.name = name;
    r.error_code = to_wire(e.code);
    r.error_message = e.message;
    return r;
  };

  std::map<std::string, int> occurrences;
  for (const auto& t : request.topics) ++occurrences[t.name];
  for (const auto& [name, count] : occurrences) {
    if (count > 1)
      response.results.push_back(
          result_of(name, error_of(error_code::invalid_request, "Duplicate topic name.")));
  }

  bool too_large = false;
  auto grow = [&](const protocol::create_partitions_request::create_partitions_topic& topic,
                  record_list& out) -> api_error {
    const metadata::topic_metadata* existing = image.find_topic(topic.name);
    if (!existing) return {error_code::unknown_topic_or_partition, std::nullopt};
    const auto current = static_cast<int32_t>(existing->partitions.size());
    if (topic.count == current) {
      return error_of(error_code::invalid_partitions,
                      "Topic already has " + std::to_string(current) + " partition(s).");
    }
    if (topic.count < current) {
      return error_of(error_code::invalid_partitions,
                      "The topic " + topic.name + " currently has " + std::to_string(current) +
                          " partition(s); " + std::to_string(topic.count) + " would not be an increase.");
    }
    const int32_t additional = topic.count - current;
    if (topic.assignments && topic.assignments->size() != static_cast<size_t>(additional)) {
      return error_of(error_code::invalid_replica_assignment,
                      "Attempted to add " + std::to_string(additional) +
                          " additional partition(s), but only " + std::to_string(topic.assignments->size()) +
                          " assignment(s) were specified.");
    }
    if (existing->partitions.empty()) {
      return error_of(error_code::unknown_server_error,
                      "Invalid state: topic " + topic.name + " appears to have no partitions.");
    }
    if (static_cast<size_t>(additional) > max_records_per_user_op) {
      too_large = true;
      return {};
    }
    const size_t replication_factor = existing->partitions.front().replicas.size();
    std::vector<std::vector<int32_t>> replicas;
    if (topic.assignments) {
      for (size_t i = 0; i < topic.assignments->size(); ++i) {
        const auto& ids = (*topic.assignments)[i].broker_ids;
        if (auto e = check_manual_assignment(image, ids, replication_factor); !e.ok()) return e;
        if (active_replicas(image, ids).empty()) {
          return error_of(error_code::invalid_replica_assignment,
                          "All brokers specified in the manual partition assignment for partition " +
                              std::to_string(current + static_cast<int32_t>(i)) +
                              " are fenced or in controlled shutdown.");
        }
        replicas.push_back(ids);
      }
    } else {
      auto placed = place_replicas(usable_brokers(image), additional,
                                   static_cast<int32_t>(replication_factor), _placement_rng());
      if (!placed.ok()) return error_of(placed.error());
      replicas = std::move(*placed);
    }
    for (size_t i = 0; i < replicas.size(); ++i) {
      out.push_back(versioned(new_partition_record(image, existing->id, current + static_cast<int32_t>(i),
                                                   replicas[i], active_replicas(image, replicas[i])),
                              partition_record_version));
    }
    return {};
  };

  record_list records;
  for (const auto& topic : request.topics) {
    if (occurrences[topic.name] > 1) continue;
    record_list topic_records;
    api_error e = grow(topic, topic_records);
    if (e.ok()) {
      records.insert(records.end(), std::make_move_iterator(topic_records.begin()),
                     std::make_move_iterator(topic_records.end()));
      if (records.size() > max_records_per_user_op) too_large = true;
    }
    response.results.push_back(result_of(topic.name, e));
  }

  auto fail_all = [&](const api_error& e) {
    response.results.clear();
    std::set<std::string> seen;
    for (const auto& t : request.topics)
      if (seen.insert(t.name).second) response.results.push_back(result_of(t.name, e));
  };
  if (auto e = write_user_operation(_writer, records, too_large, request.validate_only); !e.ok()) fail_all(e);
  return response;
}

}  // namespace mala::controller
