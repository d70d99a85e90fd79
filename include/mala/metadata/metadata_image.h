// An immutable snapshot of cluster metadata as the broker side sees it: brokers and their endpoints, topics,
// partitions (leader, epochs, replicas, ISR, ELR, offline replicas), cluster id and the controller id that
// clients are told about. Built by the controller side (today: from the node's own configuration) and
// published as a shared_ptr<const metadata_image>; readers on any shard hold their own reference, so no locks
// are needed to read.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mala/common/uuid.h"

namespace mala::metadata {

struct broker_endpoint {
  std::string listener_name;
  std::string host;
  uint16_t port = 0;
  std::string security_protocol;
};

struct broker_registration {
  int32_t id = -1;
  std::optional<std::string> rack;
  std::vector<broker_endpoint> endpoints;
  bool fenced = false;

  const broker_endpoint* endpoint_for(const std::string& listener_name) const;
};

struct partition_state {
  int32_t partition = 0;
  int32_t leader = -1;
  int32_t leader_epoch = 0;
  int32_t partition_epoch = 0;
  std::vector<int32_t> replicas;
  std::vector<int32_t> isr;
  std::vector<int32_t> eligible_leader_replicas;
  std::vector<int32_t> last_known_elr;
};

struct topic_metadata {
  std::string name;
  uuid id;
  bool internal = false;
  std::vector<partition_state> partitions;  // indexed by partition number
};

class metadata_image {
 public:
  std::string cluster_id;
  int32_t controller_id = -1;
  std::map<int32_t, broker_registration> brokers;
  std::map<std::string, topic_metadata> topics;

  const topic_metadata* find_topic(const std::string& name) const;
  const topic_metadata* find_topic(const uuid& id) const;
  bool broker_alive(int32_t id) const;
};

using metadata_image_ptr = std::shared_ptr<const metadata_image>;

}  // namespace mala::metadata

namespace mala::metadata {

// Holds the newest published image. publish() and current() may be called from any thread.
class metadata_cache {
 public:
  metadata_image_ptr current() const { return _image.load(std::memory_order_acquire); }
  void publish(metadata_image_ptr image) { _image.store(std::move(image), std::memory_order_release); }

 private:
  std::atomic<metadata_image_ptr> _image{std::make_shared<const metadata_image>()};
};

}  // namespace mala::metadata
