// Publishes each new metadata image to the broker side (Kafka's BrokerMetadataPublisher): for every partition
// with a replica on this node, the replica manager becomes leader or follower with the image's state and the
// topic's effective log config (topic configs take effect without a restart); replicas of deleted topics (or
// moved away) are removed with their logs; then the image becomes the one handlers read from the metadata
// cache. Replicas are updated before the cache, so a client that sees a partition in Metadata finds it
// hosted.
//
// Threads: publish() runs on the home shard (the shard that owns the replica manager and the controller).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "mala/metadata/metadata_image.h"
#include "mala/replication/replica_manager.h"

namespace mala::broker {

// The node's static value of a broker property (its configuration file), nullopt when not set there.
using static_property_lookup = std::function<std::optional<std::string>(std::string_view property)>;

// A topic's log settings: topic overrides, then dynamic broker defaults, then the static configuration, then
// Kafka's defaults (controller/topic_config.h resolves the chain).
replication::log_config effective_log_config(const metadata::metadata_image& image, const std::string& topic,
                                             int32_t node_id, const static_property_lookup& static_config);
// min.insync.replicas in effect for a topic, resolved the same way.
int32_t effective_min_insync_replicas(const metadata::metadata_image& image, const std::string& topic,
                                      int32_t node_id, const static_property_lookup& static_config);

class metadata_publisher {
 public:
  metadata_publisher(int32_t node_id, replication::replica_manager& replicas, metadata::metadata_cache& cache,
                     static_property_lookup static_config);

  void publish(const metadata::metadata_image_ptr& image);

 private:
  int32_t _node_id;
  replication::replica_manager& _replicas;
  metadata::metadata_cache& _cache;
  static_property_lookup _static_config;
};

}  // namespace mala::broker
