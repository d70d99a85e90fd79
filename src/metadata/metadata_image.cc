#include "mala/metadata/metadata_image.h"

#include <algorithm>

#include "mala/metadata/metadata_delta.h"

namespace mala::metadata {

const broker_endpoint* broker_registration::endpoint_for(const std::string& listener_name) const {
  for (const auto& e : endpoints)
    if (e.listener_name == listener_name) return &e;
  return nullptr;
}

const topic_metadata* metadata_image::find_topic(const std::string& name) const {
  auto it = topics.find(name);
  return it == topics.end() ? nullptr : &it->second;
}

const topic_metadata* metadata_image::find_topic(const uuid& id) const {
  if (const std::string* name = topic_ids.names.get(id)) {
    const topic_metadata* topic = topics.get(*name);
    if (topic && topic->id == id) return topic;
  }
  if (topic_ids.names.size() == topics.size()) return nullptr;  // the index covers every topic
  for (const auto& [name, topic] : topics)
    if (topic.id == id) return &topic;
  return nullptr;
}

bool metadata_image::broker_alive(int32_t id) const {
  auto it = brokers.find(id);
  return it != brokers.end() && !it->second.fenced;
}

bool broker_registration::has_online_dir(const uuid& dir) const {
  if (dir == directory_unassigned || dir == directory_migrating) return true;
  if (dir == directory_lost) return false;
  return log_dirs.empty() || std::find(log_dirs.begin(), log_dirs.end(), dir) != log_dirs.end();
}

bool metadata_image::replica_in_offline_dir(const partition_state& p, int32_t id) const {
  const auto at = std::find(p.replicas.begin(), p.replicas.end(), id);
  const auto index = static_cast<size_t>(at - p.replicas.begin());
  if (at == p.replicas.end() || index >= p.directories.size()) return false;
  auto broker = brokers.find(id);
  return broker != brokers.end() && !broker->second.has_online_dir(p.directories[index]);
}

const config_map* metadata_image::find_configs(config_resource_type type, const std::string& name) const {
  auto it = configs.find(config_resource{type, name});
  return it == configs.end() ? nullptr : &it->second;
}

const client_quota_values* client_quotas_image::find(const client_quota_entity& entity) const {
  if (!entities) return nullptr;
  auto it = entities->find(entity);
  return it == entities->end() ? nullptr : &it->second;
}

int16_t metadata_image::feature_level(const std::string& name) const {
  auto it = finalized_features.find(name);
  return it == finalized_features.end() ? 0 : it->second;
}

const scram_credential_entry* metadata_image::find_scram_credential(const std::string& user,
                                                                    int8_t mechanism) const {
  auto it = scram_credentials.find(user);
  if (it == scram_credentials.end()) return nullptr;
  auto found = it->second.find(mechanism);
  return found == it->second.end() ? nullptr : &found->second;
}

}  // namespace mala::metadata
