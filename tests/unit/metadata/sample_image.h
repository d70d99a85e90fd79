// A populated metadata image for round-trip tests (image_to_records, the controller's snapshot payload):
// several brokers in every fencing / controlled-shutdown state, topics with partitions (leaders, epochs,
// ISR, ELR, last known ELR, reassignments, directories, an unclean-recovering leader), configs of topics,
// brokers and the cluster default, feature levels and the producer id counter.
#pragma once

#include <cstdint>
#include <string>

#include "mala/metadata/metadata_delta.h"
#include "mala/metadata/metadata_image.h"

namespace mala::metadata::testing {

inline uuid sample_uuid(uint8_t first) {
  uuid id;
  for (size_t i = 0; i < id.bytes.size(); ++i) id.bytes[i] = static_cast<uint8_t>(first + i);
  return id;
}

inline metadata_image sample_image() {
  metadata_image image;
  image.cluster_id = "MkU3OEVBNTcwNTJENDM2Qk";
  for (int32_t id = 1; id <= 4; ++id) {
    broker_registration b;
    b.id = id;
    b.rack = id == 4 ? std::nullopt : std::optional<std::string>("rack-" + std::to_string(id % 2));
    b.endpoints.push_back(
        {"PLAINTEXT", "broker" + std::to_string(id), static_cast<uint16_t>(9090 + id), "PLAINTEXT"});
    if (id % 2 == 0) b.endpoints.push_back({"SECURE", "broker" + std::to_string(id), 9443, "SASL_SSL"});
    b.fenced = id == 3;
    b.in_controlled_shutdown = id == 2;
    b.epoch = 100 + id;
    b.incarnation_id = sample_uuid(static_cast<uint8_t>(20 * id));
    b.log_dirs = {sample_uuid(static_cast<uint8_t>(200 + id))};
    b.supported_features["metadata.version"] = {7, 27};
    b.supported_features["kraft.version"] = {0, 1};
    if (id == 4) b.cordoned_log_dirs = std::vector<uuid>{sample_uuid(204)};
    image.brokers[id] = b;
  }
  controller_registration controller;
  controller.id = 3000;
  controller.incarnation_id = sample_uuid(90);
  controller.endpoints.push_back({"CONTROLLER", "controller", 9093, "SSL"});
  controller.supported_features["metadata.version"] = {7, 33};
  image.controllers[controller.id] = controller;
  const uuid d1 = sample_uuid(201), d2 = sample_uuid(202), d3 = sample_uuid(203);

  topic_metadata orders;
  orders.name = "orders";
  orders.id = sample_uuid(10);
  for (int32_t p = 0; p < 3; ++p) {
    partition_state s;
    s.partition = p;
    s.leader = 1 + p % 3;
    s.leader_epoch = 5 + p;
    s.partition_epoch = 9 + p;
    s.replicas = {1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3};
    s.isr = {1 + p % 3, 1 + (p + 1) % 3};
    s.directories = {d1, directory_unassigned, d3};
    if (p == 1) {
      s.eligible_leader_replicas = {3};
      s.last_known_elr = {2};
    }
    if (p == 2) {
      s.adding_replicas = {4};
      s.removing_replicas = {1};
      s.replicas.push_back(4);
      s.directories.push_back(directory_migrating);
    }
    orders.partitions.push_back(s);
  }
  image.topics[orders.name] = orders;

  topic_metadata offsets;
  offsets.name = "__consumer_offsets";
  offsets.id = sample_uuid(40);
  offsets.internal = true;
  partition_state s;
  s.partition = 0;
  s.leader = -1;
  s.leader_epoch = 2;
  s.partition_epoch = 3;
  s.replicas = {2};
  s.isr = {};
  s.leader_recovery_state = leader_recovering;
  s.directories = {d2};
  offsets.partitions.push_back(s);
  image.topics[offsets.name] = offsets;

  topic_metadata empty;
  empty.name = "no-partitions-yet";
  empty.id = sample_uuid(60);
  image.topics[empty.name] = empty;

  image.configs[{config_resource_type::topic, "orders"}] = {{"cleanup.policy", "compact"},
                                                            {"retention.ms", "3600000"}};
  image.configs[{config_resource_type::broker, "2"}] = {{"log.retention.hours", "24"}};
  image.configs[{config_resource_type::broker, ""}] = {{"min.insync.replicas", "2"}};
  image.finalized_features = {{"metadata.version", 27}, {"kraft.version", 1}, {"group.version", 1}};
  image.next_producer_id = 5000;
  auto quotas = std::make_shared<client_quota_map>();
  (*quotas)[{{"user", "alice"}}] = {{"producer_byte_rate", 1048576}, {"consumer_byte_rate", 2097152}};
  (*quotas)[{{"user", std::nullopt}, {"client-id", "app"}}] = {{"request_percentage", 12.5}};
  (*quotas)[{{"ip", "10.0.0.1"}}] = {{"connection_creation_rate", 20}};
  image.client_quotas.entities = quotas;
  delegation_token_entry token;
  token.owner = "User:alice";
  token.requester = "User:admin";
  token.renewers = {"User:bob", "User:carol"};
  token.issue_timestamp = 1000;
  token.max_timestamp = 3000;
  token.expiration_timestamp = 2000;
  image.delegation_tokens["tok-1"] = token;
  return image;
}

}  // namespace mala::metadata::testing
