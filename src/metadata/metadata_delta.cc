#include "mala/metadata/metadata_delta.h"

#include <string>
#include <utility>

#include "mala/common/listener.h"
#include "mala/metadata/acl_records.h"

namespace mala::metadata {

namespace {

std::string security_protocol_name(int16_t id) {
  // RegisterBrokerRecord.EndPoints.SecurityProtocol carries Kafka's SecurityProtocol id, which is the order
  // of mala::security_protocol (PLAINTEXT 0, SSL 1, SASL_PLAINTEXT 2, SASL_SSL 3).
  if (id >= 0 && id <= static_cast<int16_t>(security_protocol::sasl_ssl)) {
    return std::string(to_string(static_cast<security_protocol>(id)));
  }
  return "UNKNOWN(" + std::to_string(id) + ")";
}

// The EndPoints and Features of a RegisterBrokerRecord or RegisterControllerRecord.
template <typename Record>
void read_endpoints_and_features(const Record& r, std::vector<broker_endpoint>& endpoints,
                                 std::map<std::string, supported_feature>& features) {
  for (const auto& e : r.end_points) {
    endpoints.push_back({e.name, e.host, e.port, security_protocol_name(e.security_protocol)});
  }
  for (const auto& f : r.features) features[f.name] = {f.min_supported_version, f.max_supported_version};
}

std::string describe(const uuid& id) {
  return id.to_string();
}

status bad_record(error_code code, std::string message) {
  return status::error(code, std::move(message));
}

bool valid_leader_recovery_state(int8_t value) {
  return value == leader_recovered || value == leader_recovering;
}

// Kafka's DirectoryId.createDirectoriesFrom: replicas that stay keep their directory, new ones are
// unassigned.
std::vector<uuid> directories_from(const std::vector<int32_t>& replicas, const std::vector<uuid>& directories,
                                   const std::vector<int32_t>& new_replicas) {
  std::vector<uuid> out;
  out.reserve(new_replicas.size());
  for (int32_t replica : new_replicas) {
    uuid dir = directory_unassigned;
    if (directories.size() == replicas.size()) {
      for (size_t i = 0; i < replicas.size(); ++i) {
        if (replicas[i] == replica) {
          dir = directories[i];
          break;
        }
      }
    }
    out.push_back(dir);
  }
  return out;
}

}  // namespace

bool is_internal_topic(const std::string& name) {
  return name == "__consumer_offsets" || name == "__transaction_state";
}

metadata_delta::metadata_delta(metadata_image_ptr base)
    : _base(base ? std::move(base) : std::make_shared<const metadata_image>()) {}

metadata_image& metadata_delta::next() {
  if (!_next) _next.emplace(*_base);
  return *_next;
}

metadata_image_ptr metadata_delta::build() const& {
  if (!_next) return _base;
  _quotas_working.reset();
  auto image = std::make_shared<metadata_image>(*_next);
  if (_acls_changed) image->acls.rebuild_index();
  return image;
}

metadata_image_ptr metadata_delta::build() && {
  if (!_next) return _base;
  if (_acls_changed) _next->acls.rebuild_index();
  _acls_changed = false;
  auto image = std::make_shared<const metadata_image>(std::move(*_next));
  _next.reset();
  _quotas_working.reset();
  _base = image;
  return image;
}

const topic_metadata* metadata_delta::topic_by_id(const uuid& id) const {
  return current().find_topic(id);
}

status metadata_delta::apply(const metadata_record& record) {
  return std::visit([this](const auto& r) { return apply_record(r); }, record);
}

status metadata_delta::apply(const metadata_record& record, int64_t offset, int32_t epoch) {
  status s = apply(record);
  if (!s.ok()) return s;
  auto& image = next();
  image.metadata_offset = offset;
  image.metadata_epoch = epoch;
  return s;
}

status metadata_delta::apply_record(const protocol::register_broker_record& r) {
  // Kafka's ClusterDelta.replay(RegisterBrokerRecord): the registration replaces any previous one for the id.
  broker_registration b;
  b.id = r.broker_id;
  b.epoch = r.broker_epoch;
  b.incarnation_id = r.incarnation_id;
  b.rack = r.rack;
  b.fenced = r.fenced;
  b.in_controlled_shutdown = r.in_controlled_shutdown;
  b.log_dirs = r.log_dirs;
  b.cordoned_log_dirs = r.cordoned_log_dirs;
  read_endpoints_and_features(r, b.endpoints, b.supported_features);
  next().brokers[b.id] = std::move(b);
  return status::success();
}

status metadata_delta::apply_record(const protocol::unregister_broker_record& r) {
  // As ClusterDelta: no epoch check on replay (the controller checked it before writing the record).
  next().brokers.erase(r.broker_id);
  return status::success();
}

status metadata_delta::apply_record(const protocol::topic_record& r) {
  const metadata_image& image = current();
  auto existing = image.topics.find(r.name);
  if (existing != image.topics.end() && !(existing->second.id == r.topic_id)) {
    return bad_record(error_code::inconsistent_topic_id,
                      "TopicRecord " + r.name + " id " + describe(r.topic_id) +
                          ": the topic exists with id " + describe(existing->second.id));
  }
  if (const topic_metadata* other = topic_by_id(r.topic_id); other && other->name != r.name) {
    return bad_record(
        error_code::inconsistent_topic_id,
        "TopicRecord " + r.name + ": id " + describe(r.topic_id) + " belongs to " + other->name);
  }
  // A TopicRecord for an existing id starts the topic afresh, as Kafka's TopicsDelta does.
  topic_metadata t;
  t.name = r.name;
  t.id = r.topic_id;
  t.internal = is_internal_topic(r.name);
  next().topics[r.name] = std::move(t);
  next().topic_ids.names.insert_or_assign(r.topic_id, r.name);
  return status::success();
}

status metadata_delta::apply_record(const protocol::partition_record& r) {
  const topic_metadata* topic = topic_by_id(r.topic_id);
  if (!topic) {
    return bad_record(error_code::unknown_topic_id,
                      "PartitionRecord for unknown topic id " + describe(r.topic_id));
  }
  const std::string where = "PartitionRecord " + topic->name + "-" + std::to_string(r.partition_id);
  // Partitions are kept indexed by number; the controller writes them in order (CreateTopics,
  // CreatePartitions).
  if (r.partition_id < 0 || static_cast<size_t>(r.partition_id) > topic->partitions.size()) {
    return bad_record(error_code::invalid_partitions, where + ": partition ids must be written in order");
  }
  if (!valid_leader_recovery_state(r.leader_recovery_state)) {
    return bad_record(error_code::invalid_request,
                      where + ": unknown leader recovery state " + std::to_string(r.leader_recovery_state));
  }
  if (!r.directories.empty() && r.directories.size() != r.replicas.size()) {
    return bad_record(error_code::invalid_replica_assignment,
                      where + ": replicas and directories differ in length");
  }
  partition_state p;
  p.partition = r.partition_id;
  p.leader = r.leader;
  p.leader_epoch = r.leader_epoch;
  p.partition_epoch = r.partition_epoch;
  p.replicas = r.replicas;
  p.isr = r.isr;
  p.removing_replicas = r.removing_replicas;
  p.adding_replicas = r.adding_replicas;
  p.eligible_leader_replicas = r.eligible_leader_replicas.value_or(std::vector<int32_t>{});
  p.last_known_elr = r.last_known_elr.value_or(std::vector<int32_t>{});
  p.leader_recovery_state = r.leader_recovery_state;
  // Records older than v1 (or from brokers before KIP-858) carry no directories: Kafka assumes MIGRATING.
  p.directories =
      r.directories.empty() ? std::vector<uuid>(r.replicas.size(), directory_migrating) : r.directories;

  const std::string name = topic->name;
  auto& partitions = next().topics[name].partitions;
  const auto index = static_cast<size_t>(r.partition_id);
  if (index == partitions.size()) {
    partitions.push_back(std::move(p));
  } else {
    partitions[index] = std::move(p);
  }
  return status::success();
}

status metadata_delta::apply_record(const protocol::partition_change_record& r) {
  // Kafka's PartitionRegistration.merge: only the fields present change.
  const topic_metadata* topic = topic_by_id(r.topic_id);
  if (!topic) {
    return bad_record(error_code::unknown_topic_id,
                      "PartitionChangeRecord for unknown topic id " + describe(r.topic_id));
  }
  const std::string where = "PartitionChangeRecord " + topic->name + "-" + std::to_string(r.partition_id);
  if (r.partition_id < 0 || static_cast<size_t>(r.partition_id) >= topic->partitions.size()) {
    return bad_record(error_code::unknown_topic_or_partition, where + ": no such partition");
  }
  if (r.leader_recovery_state != no_leader_recovery_state_change &&
      !valid_leader_recovery_state(r.leader_recovery_state)) {
    return bad_record(error_code::invalid_request,
                      where + ": unknown leader recovery state " + std::to_string(r.leader_recovery_state));
  }
  if (r.replicas && r.directories && !r.directories->empty() && r.directories->size() != r.replicas->size()) {
    return bad_record(error_code::invalid_replica_assignment,
                      where + ": replicas and directories differ in length");
  }
  const partition_state& old = topic->partitions[static_cast<size_t>(r.partition_id)];
  partition_state p = old;
  if (r.replicas) p.replicas = *r.replicas;
  if (r.directories && !r.directories->empty()) {
    p.directories = *r.directories;
  } else if (r.replicas) {
    p.directories = directories_from(old.replicas, old.directories, *r.replicas);
  }
  if (p.directories.empty()) p.directories.assign(p.replicas.size(), directory_migrating);
  if (r.isr) p.isr = *r.isr;
  if (r.removing_replicas) p.removing_replicas = *r.removing_replicas;
  if (r.adding_replicas) p.adding_replicas = *r.adding_replicas;
  // Any leader in the record bumps the leader epoch, even the same leader: the controller's
  // PartitionChangeBuilder writes one exactly when followers must notice (a new leader, or an ISR shrink /
  // replica removal that needs the epoch fence).
  if (r.leader != no_leader_change) {
    p.leader = r.leader;
    p.leader_epoch = old.leader_epoch + 1;
  }
  if (r.leader_recovery_state != no_leader_recovery_state_change)
    p.leader_recovery_state = r.leader_recovery_state;
  if (r.eligible_leader_replicas) p.eligible_leader_replicas = *r.eligible_leader_replicas;
  if (r.last_known_elr) p.last_known_elr = *r.last_known_elr;
  p.partition_epoch = old.partition_epoch + 1;

  const std::string name = topic->name;
  next().topics[name].partitions[static_cast<size_t>(r.partition_id)] = std::move(p);
  return status::success();
}

status metadata_delta::apply_record(const protocol::remove_topic_record& r) {
  const topic_metadata* topic = topic_by_id(r.topic_id);
  if (!topic) {
    return bad_record(error_code::unknown_topic_id,
                      "RemoveTopicRecord for unknown topic id " + describe(r.topic_id));
  }
  const std::string name = topic->name;
  auto& image = next();
  image.topics.erase(name);
  // Kafka's MetadataDelta.replay(RemoveTopicRecord) also drops the topic's dynamic configs.
  image.configs.erase(config_resource{config_resource_type::topic, name});
  image.topic_ids.names.erase(r.topic_id);
  return status::success();
}

status metadata_delta::apply_record(const protocol::config_record& r) {
  // Kafka's ConfigurationsDelta: a null value deletes the key.
  const config_resource resource{static_cast<config_resource_type>(r.resource_type), r.resource_name};
  auto& configs = next().configs;
  if (r.value) {
    configs[resource][r.name] = *r.value;
    return status::success();
  }
  const config_map* set = configs.get(resource);
  if (!set || !set->contains(r.name)) return status::success();
  config_map& keys = configs[resource];
  keys.erase(r.name);
  if (keys.empty()) configs.erase(resource);
  return status::success();
}

namespace {

// ClusterDelta.getBrokerOrThrow: fencing changes name the registration they apply to by its epoch.
status check_broker(const metadata_image& image, int32_t id, int64_t epoch, const char* record) {
  auto it = image.brokers.find(id);
  if (it == image.brokers.end()) {
    return status::error(error_code::broker_not_available,
                         std::string(record) + " for unregistered broker " + std::to_string(id));
  }
  if (it->second.epoch != epoch) {
    return status::error(error_code::stale_broker_epoch,
                         std::string(record) + " for broker " + std::to_string(id) + " epoch " +
                             std::to_string(epoch) + ", registered epoch is " +
                             std::to_string(it->second.epoch));
  }
  return status::success();
}

}  // namespace

status metadata_delta::apply_record(const protocol::fence_broker_record& r) {
  if (auto s = check_broker(current(), r.id, r.epoch, "FenceBrokerRecord"); !s.ok()) return s;
  next().brokers[r.id].fenced = true;
  return status::success();
}

status metadata_delta::apply_record(const protocol::unfence_broker_record& r) {
  if (auto s = check_broker(current(), r.id, r.epoch, "UnfenceBrokerRecord"); !s.ok()) return s;
  next().brokers[r.id].fenced = false;
  return status::success();
}

status metadata_delta::apply_record(const protocol::broker_registration_change_record& r) {
  if (auto s = check_broker(current(), r.broker_id, r.broker_epoch, "BrokerRegistrationChangeRecord");
      !s.ok())
    return s;
  if (r.fenced != fencing_change_fence && r.fenced != fencing_change_none &&
      r.fenced != fencing_change_unfence) {
    return bad_record(error_code::invalid_request,
                      "BrokerRegistrationChangeRecord: unknown fencing change " + std::to_string(r.fenced));
  }
  if (r.in_controlled_shutdown != controlled_shutdown_change_none &&
      r.in_controlled_shutdown != controlled_shutdown_change_in_controlled_shutdown) {
    return bad_record(error_code::invalid_request,
                      "BrokerRegistrationChangeRecord: unknown controlled shutdown change " +
                          std::to_string(r.in_controlled_shutdown));
  }
  auto& broker = next().brokers[r.broker_id];
  if (r.fenced != fencing_change_none) broker.fenced = r.fenced == fencing_change_fence;
  if (r.in_controlled_shutdown == controlled_shutdown_change_in_controlled_shutdown) {
    broker.in_controlled_shutdown = true;
  }
  // v2 (KIP-858): a broker reports its online log directories; an empty list means no change.
  if (!r.log_dirs.empty()) broker.log_dirs = r.log_dirs;
  // v3 (KIP-1066): the cordoned log dirs, replaced whole when present.
  if (r.cordoned_log_dirs) broker.cordoned_log_dirs = r.cordoned_log_dirs;
  return status::success();
}

status metadata_delta::apply_record(const protocol::feature_level_record& r) {
  // KIP-778: level 0 means the feature is not finalized (disabled); Kafka drops it from the image.
  auto& features = next().finalized_features;
  if (r.feature_level == 0) {
    features.erase(r.name);
  } else {
    features[r.name] = r.feature_level;
  }
  return status::success();
}

status metadata_delta::apply_record(const protocol::producer_ids_record& r) {
  // ProducerIdsDelta: the block handed to r.broker_id ends where the next one starts.
  next().next_producer_id = r.next_producer_id;
  return status::success();
}

status metadata_delta::apply_record(const protocol::no_op_record&) {
  // KIP-835: written by the controller to advance the high watermark; changes nothing but the offset.
  return status::success();
}

status metadata_delta::apply_record(const protocol::user_scram_credential_record& r) {
  // ScramImage: a credential per (user, mechanism); a later record for the pair replaces it.
  scram_credential_entry entry;
  entry.salt = r.salt;
  entry.stored_key = r.stored_key;
  entry.server_key = r.server_key;
  entry.iterations = r.iterations;
  next().scram_credentials[r.name][r.mechanism] = std::move(entry);
  return status::success();
}

status metadata_delta::apply_record(const protocol::remove_user_scram_credential_record& r) {
  auto& users = next().scram_credentials;
  auto user = users.find(r.name);
  if (user == users.end() || user->second.erase(r.mechanism) == 0) {
    // Kafka's ScramControlManager.replay fails on a removal of nothing; the controller never writes one.
    return bad_record(error_code::invalid_request,
                      "RemoveUserScramCredentialRecord: no credential of mechanism " +
                          std::to_string(r.mechanism) + " for user " + r.name);
  }
  if (user->second.empty()) users.erase(user);
  return status::success();
}

status metadata_delta::apply_record(const protocol::access_control_entry_record& r) {
  // AclsDelta.replay: the ACL of the id is set (the controller never writes two ids for one binding).
  acl_binding acl = to_acl_binding(r);
  if (auto invalid = invalid_new_acl(acl)) {
    return bad_record(error_code::invalid_request,
                      "AccessControlEntryRecord " + describe(r.id) + ": " + *invalid);
  }
  next().acls.by_id[r.id] = std::move(acl);
  _acls_changed = true;
  return status::success();
}

status metadata_delta::apply_record(const protocol::remove_access_control_entry_record& r) {
  // AclsDelta.replay(RemoveAccessControlEntryRecord) throws for an unknown id.
  if (!current().acls.by_id.contains(r.id)) {
    return bad_record(error_code::invalid_request,
                      "RemoveAccessControlEntryRecord for unknown ACL id " + describe(r.id));
  }
  next().acls.by_id.erase(r.id);
  _acls_changed = true;
  return status::success();
}

}  // namespace mala::metadata

namespace mala::metadata {

status metadata_delta::apply_record(const protocol::client_quota_record& r) {
  // Kafka's ClientQuotasDelta: Remove drops the key, an entity with no key left is gone.
  client_quota_entity entity;
  for (const auto& e : r.entity) {
    if (!entity.emplace(e.entity_type, e.entity_name).second) {
      return bad_record(error_code::invalid_request,
                        "ClientQuotaRecord names entity type " + e.entity_type + " twice");
    }
  }
  if (entity.empty()) return bad_record(error_code::invalid_request, "ClientQuotaRecord without an entity");
  auto& quotas = next().client_quotas;
  // Copied on the delta's first change: images that share the map keep it as it was.
  if (!_quotas_working) {
    _quotas_working = quotas.entities ? std::make_shared<client_quota_map>(*quotas.entities)
                                      : std::make_shared<client_quota_map>();
  }
  auto updated = _quotas_working;
  if (r.remove) {
    auto it = updated->find(entity);
    if (it == updated->end() || it->second.erase(r.key) == 0) return status::success();
    if (it->second.empty()) updated->erase(it);
  } else {
    (*updated)[entity][r.key] = r.value;
  }
  if (updated->empty()) {
    quotas.entities.reset();
  } else {
    quotas.entities = std::move(updated);
  }
  return status::success();
}

}  // namespace mala::metadata

namespace mala::metadata {

status metadata_delta::apply_record(const protocol::register_controller_record& r) {
  // ClusterDelta.replay(RegisterControllerRecord): the registration replaces any previous one for the id.
  controller_registration c;
  c.id = r.controller_id;
  c.incarnation_id = r.incarnation_id;
  c.zk_migration_ready = r.zk_migration_ready;
  read_endpoints_and_features(r, c.endpoints, c.supported_features);
  next().controllers[c.id] = std::move(c);
  return status::success();
}

status metadata_delta::apply_record(const protocol::unregister_controller_record& r) {
  next().controllers.erase(r.controller_id);
  return status::success();
}

// KIP-868 markers: raft_metadata_log delivers a transaction's records only once its EndTransactionRecord is
// read and drops them at an AbortTransactionRecord; the markers themselves change nothing but the offset.
status metadata_delta::apply_record(const protocol::begin_transaction_record&) {
  return status::success();
}
status metadata_delta::apply_record(const protocol::end_transaction_record&) {
  return status::success();
}
status metadata_delta::apply_record(const protocol::abort_transaction_record&) {
  return status::success();
}

status metadata_delta::apply_record(const protocol::delegation_token_record& r) {
  delegation_token_entry token;
  token.owner = r.owner;
  token.requester = r.requester;
  token.renewers = r.renewers;
  token.issue_timestamp = r.issue_timestamp;
  token.max_timestamp = r.max_timestamp;
  token.expiration_timestamp = r.expiration_timestamp;
  next().delegation_tokens[r.token_id] = std::move(token);
  return status::success();
}

status metadata_delta::apply_record(const protocol::remove_delegation_token_record& r) {
  next().delegation_tokens.erase(r.token_id);
  return status::success();
}

// A ZooKeeper migration's state (a log from Kafka 3.x may hold one) means nothing without ZooKeeper:
// Kafka 4.x's MetadataDelta replays ZkMigrationStateRecord as a no-op, and so does Mala.
status metadata_delta::apply_record(const protocol::zk_migration_state_record&) {
  return status::success();
}

void metadata_delta::clear_elr(const std::string& topic_name) {
  const topic_metadata& topic = current().topics.at(topic_name);
  for (size_t i = 0; i < topic.partitions.size(); ++i) {
    const partition_state& old = topic.partitions[i];
    if (old.eligible_leader_replicas.empty() && old.last_known_elr.empty()) continue;
    partition_state p = old;
    p.eligible_leader_replicas.clear();
    p.last_known_elr.clear();
    p.partition_epoch = old.partition_epoch + 1;
    next().topics[topic_name].partitions[i] = std::move(p);
  }
}

status metadata_delta::apply_record(const protocol::clear_elr_record& r) {
  // TopicsDelta.replay(ClearElrRecord): the ELR and last known ELR of every partition of the topic, or of
  // every topic when the name is empty, become empty (a partition change: its epoch moves).
  if (r.topic_name.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, topic] : current().topics) names.push_back(name);
    for (const auto& name : names) clear_elr(name);
    return status::success();
  }
  if (!current().topics.contains(r.topic_name)) {
    return bad_record(error_code::unknown_topic_or_partition,
                      "ClearElrRecord for unknown topic " + r.topic_name);
  }
  clear_elr(r.topic_name);
  return status::success();
}

}  // namespace mala::metadata
