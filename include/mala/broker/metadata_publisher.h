// Publishes each new metadata image to the broker side (Kafka's BrokerMetadataPublisher): for every partition
// with a replica on this node, the replica manager becomes leader or follower with the image's state and the
// topic's effective log config (topic configs take effect without a restart); replicas of deleted topics (or
// moved away) are removed with their logs; then the image becomes the one handlers read from the metadata
// cache. Replicas are updated before the cache, so a client that sees a partition in Metadata finds it
// hosted.
//
// Threads: publish() runs on the home shard (the controller's and the metadata loader's). Each shard's
// replica manager is updated on its own shard (net::shard_pool::run_on_each_and_wait, the home shard
// blocking until every shard applied the image), then the image is published to the cache.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mala/metadata/metadata_image.h"
#include "mala/net/shard_pool.h"
#include "mala/replication/replica_manager.h"
#include "mala/replication/replica_placement.h"

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
  // replicas_by_shard: the replica manager of each shard (placement says which partition goes where);
  // shards null: every manager is updated in place (unit tests).
  metadata_publisher(int32_t node_id, std::vector<replication::replica_manager*> replicas_by_shard,
                     replication::replica_placement placement, net::shard_pool* shards,
                     metadata::metadata_cache& cache, static_property_lookup static_config);

  void publish(const metadata::metadata_image_ptr& image);

 private:
  struct hosted_replica;
  // On the shard of `replicas`: applies what the image says of the replicas it holds.
  static void apply(replication::replica_manager& replicas, const std::vector<hosted_replica>& hosted);

  int32_t _node_id;
  std::vector<replication::replica_manager*> _replicas_by_shard;
  replication::replica_placement _placement;
  net::shard_pool* _shards;
  metadata::metadata_cache& _cache;
  static_property_lookup _static_config;
};

}  // namespace mala::broker
