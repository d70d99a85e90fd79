#include "mala/metadata/image_records.h"

#include <charconv>
#include <string>
#include <string_view>
#include <utility>

#include "mala/common/listener.h"
#include "mala/metadata/acl_records.h"

namespace mala::metadata {

namespace {

// As quorum_controller.cc writes them (MetadataVersion.registerBrokerRecordVersion() /
// partitionRecordVersion() at 4.0-IV1 and later); every other record is v0.
constexpr int16_t register_broker_record_version = 3;
// RegisterBrokerRecord v4 adds KIP-1066's CordonedLogDirs: written only for a registration that has them.
constexpr int16_t register_broker_record_cordoned_version = 4;
constexpr int16_t partition_record_version = 2;
constexpr int16_t v0 = 0;

// Kafka writes metadata.version before every other feature (FeaturesImage.write).
constexpr std::string_view metadata_version_feature = "metadata.version";

// The inverse of metadata_delta's security_protocol_name: Kafka's SecurityProtocol id of a name, and the id
// kept in "UNKNOWN(<id>)" for ids Mala does not know.
int16_t security_protocol_id(const std::string& name) {
  if (auto known = parse_security_protocol(name)) return static_cast<int16_t>(*known);
  std::string_view rest = name;
  if (rest.starts_with("UNKNOWN(") && rest.ends_with(")")) {
    rest = rest.substr(8, rest.size() - 9);
    int16_t id = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), id);
    if (ec == std::errc() && end == rest.data() + rest.size()) return id;
  }
  return -1;
}

template <typename T>
versioned_metadata_record versioned(T record, int16_t version) {
  return versioned_metadata_record{metadata_record(std::move(record)), version};
}

// A broker's or controller's endpoints and feature ranges into its registration record.
template <typename Registration, typename Record>
void write_endpoints_and_features(const Registration& from, Record& r) {
  for (const auto& e : from.endpoints) {
    r.end_points.push_back({e.listener_name, e.host, e.port, security_protocol_id(e.security_protocol)});
  }
  for (const auto& [name, range] : from.supported_features) {
    r.features.push_back({name, range.min_version, range.max_version});
  }
}

protocol::register_broker_record broker_record(const broker_registration& b) {
  // Kafka's BrokerRegistration.toRecord.
  protocol::register_broker_record r;
  r.broker_id = b.id;
  r.is_migrating_zk_broker = false;
  r.incarnation_id = b.incarnation_id;
  r.broker_epoch = b.epoch;
  write_endpoints_and_features(b, r);
  r.rack = b.rack;
  r.fenced = b.fenced;
  r.in_controlled_shutdown = b.in_controlled_shutdown;
  r.log_dirs = b.log_dirs;
  r.cordoned_log_dirs = b.cordoned_log_dirs;
  return r;
}

protocol::register_controller_record controller_record(const controller_registration& c) {
  // Kafka's ControllerRegistration.toRecord.
  protocol::register_controller_record r;
  r.controller_id = c.id;
  r.incarnation_id = c.incarnation_id;
  r.zk_migration_ready = c.zk_migration_ready;
  write_endpoints_and_features(c, r);
  return r;
}

protocol::partition_record partition_record(const uuid& topic_id, const partition_state& p) {
  // Kafka's PartitionRegistration.toRecord. An empty ELR / last known ELR is left null: replayed, null and
  // empty are the same (an empty list).
  protocol::partition_record r;
  r.partition_id = p.partition;
  r.topic_id = topic_id;
  r.replicas = p.replicas;
  r.isr = p.isr;
  r.removing_replicas = p.removing_replicas;
  r.adding_replicas = p.adding_replicas;
  r.leader = p.leader;
  r.leader_recovery_state = p.leader_recovery_state;
  r.leader_epoch = p.leader_epoch;
  r.partition_epoch = p.partition_epoch;
  r.directories = p.directories;
  if (!p.eligible_leader_replicas.empty()) r.eligible_leader_replicas = p.eligible_leader_replicas;
  if (!p.last_known_elr.empty()) r.last_known_elr = p.last_known_elr;
  return r;
}

}  // namespace

std::vector<versioned_metadata_record> image_to_records(const metadata_image& image) {
  std::vector<versioned_metadata_record> out;

  auto feature = [&](const std::string& name, int16_t level) {
    protocol::feature_level_record r;
    r.name = name;
    r.feature_level = level;
    out.push_back(versioned(std::move(r), v0));
  };
  const std::string metadata_version(metadata_version_feature);
  if (auto it = image.finalized_features.find(metadata_version); it != image.finalized_features.end()) {
    feature(it->first, it->second);
  }
  for (const auto& [name, level] : image.finalized_features) {
    if (name != metadata_version) feature(name, level);
  }

  // ClusterImage.write: the brokers, then the controllers.
  for (const auto& [id, broker] : image.brokers) {
    out.push_back(versioned(broker_record(broker), broker.cordoned_log_dirs
                                                       ? register_broker_record_cordoned_version
                                                       : register_broker_record_version));
  }
  for (const auto& [id, controller] : image.controllers) {
    out.push_back(versioned(controller_record(controller), v0));
  }

  for (const auto& [name, topic] : image.topics) {
    protocol::topic_record r;
    r.name = topic.name;
    r.topic_id = topic.id;
    out.push_back(versioned(std::move(r), v0));
    for (const auto& p : topic.partitions) {
      out.push_back(versioned(partition_record(topic.id, p), partition_record_version));
    }
  }

  for (const auto& [resource, configs] : image.configs) {
    for (const auto& [key, value] : configs) {
      protocol::config_record r;
      r.resource_type = static_cast<int8_t>(resource.type);
      r.resource_name = resource.name;
      r.name = key;
      r.value = value;
      out.push_back(versioned(std::move(r), v0));
    }
  }

  // ClientQuotasImage.write: one record per entity and key.
  if (image.client_quotas.entities) {
    for (const auto& [entity, values] : *image.client_quotas.entities) {
      for (const auto& [key, value] : values) {
        protocol::client_quota_record r;
        for (const auto& [type, name] : entity) r.entity.push_back({type, name});
        r.key = key;
        r.value = value;
        out.push_back(versioned(std::move(r), v0));
      }
    }
  }

  // ProducerIdsImage.write: broker id and epoch -1 (no broker asked for this block: it is the counter).
  if (image.next_producer_id > 0) {
    protocol::producer_ids_record r;
    r.broker_id = -1;
    r.broker_epoch = -1;
    r.next_producer_id = image.next_producer_id;
    out.push_back(versioned(std::move(r), v0));
  }

  // AclsImage.write: one AccessControlEntryRecord per ACL, with its id.
  for (const auto& [id, acl] : image.acls.by_id) {
    out.push_back(versioned(to_access_control_entry_record(id, acl), v0));
  }

  // ScramImage.write (after the ACLs, as MetadataImage.write).
  for (const auto& [user, credentials] : image.scram_credentials) {
    for (const auto& [mechanism, credential] : credentials) {
      protocol::user_scram_credential_record r;
      r.name = user;
      r.mechanism = mechanism;
      r.salt = credential.salt;
      r.stored_key = credential.stored_key;
      r.server_key = credential.server_key;
      r.iterations = credential.iterations;
      out.push_back(versioned(std::move(r), v0));
    }
  }

  // DelegationTokenImage.write (last, as MetadataImage.write).
  for (const auto& [id, token] : image.delegation_tokens) {
    protocol::delegation_token_record r;
    r.owner = token.owner;
    r.requester = token.requester;
    r.renewers = token.renewers;
    r.issue_timestamp = token.issue_timestamp;
    r.max_timestamp = token.max_timestamp;
    r.expiration_timestamp = token.expiration_timestamp;
    r.token_id = id;
    out.push_back(versioned(std::move(r), v0));
  }
  return out;
}

}  // namespace mala::metadata
