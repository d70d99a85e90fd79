// Publishes each new metadata image to the broker side (Kafka's BrokerMetadataPublisher): for every partition
// with a replica on this node, the replica manager becomes leader or follower with the image's state and the
// topic's effective log config (topic configs take effect without a restart); replicas of deleted topics (or
// moved away) are removed with their logs; then the image becomes the one handlers read from the metadata
// cache. Replicas are updated before the cache, so a client that sees a partition in Metadata finds it
// hosted.
//
// Threads: publish() runs on the home shard (the controller's and the metadata loader's). Each shard's
// replica manager is updated on its own shard; an image changing more than 256 replicas on a shard is
// applied 256 at a time so that a shard goes on serving between slices (an image that moves 20,000
// leaderships, as fencing a broker does, would otherwise hold the home shard, its heartbeats and its
// controller for seconds); when every shard is done the home shard publishes the image to the cache. Images
// that arrive meanwhile are coalesced: the latest is published next.
//
// No shard creates a log's files (issue 20): when an image names replicas whose logs do not exist yet, the
// publisher's own thread creates them (storage::log_manager locks for itself), then the home shard
// publishes the latest image. Until then the cache keeps the previous image, as Kafka's metadata publisher
// applies an image's log creations before the next image: a client does not see a new partition before it
// is hosted, and a CreateTopics of thousands of partitions does not stall the home shard (its heartbeats,
// its connections) for the seconds their files take. While the logs of a small image (up to
// `max_held_log_creations`) are created, the node holds back what tells the controller it applied the image
// (answer_gate(): this node's next Raft Fetch and its own controller's answers), so that a CreateTopics is
// answered once every broker hosts the new partitions; a larger image holds nothing back (a CreateTopics of
// tens of thousands of partitions would otherwise run into its timeout).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
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
  // logs: when given (with shards), missing logs are created on the publisher's thread first.
  metadata_publisher(int32_t node_id, std::vector<replication::replica_manager*> replicas_by_shard,
                     replication::replica_placement placement, net::shard_pool* shards,
                     metadata::metadata_cache& cache, static_property_lookup static_config,
                     storage::log_manager* logs = nullptr);
  ~metadata_publisher();
  metadata_publisher(const metadata_publisher&) = delete;
  metadata_publisher& operator=(const metadata_publisher&) = delete;

  // The image replaces the one to publish; published at once unless logs are being created (then once
  // they are, with whatever image is latest by then).
  void publish(const metadata::metadata_image_ptr& image);
  // Called on the home shard with every image once it is published (the group coordinator follows it).
  void set_published_listener(std::function<void(const metadata::metadata_image_ptr&)> listener);
  // KIP-858: the directory ids of log.dirs, in the log manager's order. A replica new to this node whose
  // Directories entry names one of them gets its log there (Kafka's getOrCreateLog target directory). Set
  // before the first publish.
  void set_log_dir_ids(std::vector<uuid> ids) { _log_dir_ids = std::move(ids); }
  // Ends the log-creating thread (waits for a creation in progress); nothing is published after.
  void stop();
  // The high watermark up to which this node's controller may answer the writes it committed (its waits for
  // offsets below it end): unbounded, except while the logs of a small image are being created, when it is
  // the published image's offset + 1. The published listener is called when it rises again, or, when no
  // image is published then, the answer-gate listener (home shard). Any thread may read it.
  int64_t answer_gate() const { return _answer_gate.load(std::memory_order_relaxed); }
  void set_answer_gate_listener(std::function<void()> listener);

 private:
  struct hosted_replica;
  struct apply_job;
  struct log_creator;
  // Replicas applied by a shard before it serves other work again; an image changing no more than this many
  // on any shard is applied at once.
  static constexpr size_t apply_slice_size = 256;
  // The most new logs an image may have for this node's controller answers to wait for their creation
  // (a few files each, no fsync, well under a second for all): tools and clients list a topic right after
  // creating it.
  static constexpr size_t max_held_log_creations = 1000;
  void publish_latest();
  // On `shard`: applies hosted[from, from + apply_slice_size) of the job and posts the rest; the last shard
  // done has the home shard publish the image.
  void apply_slice(const std::shared_ptr<apply_job>& job, size_t shard, size_t from);
  // On the home shard: the image to the cache and the listener.
  void finish(const apply_job& job);
  // On the shard of `replicas`: applies what the image says of hosted[from, to), noting those that fail.
  static void apply_range(replication::replica_manager& replicas, const std::vector<hosted_replica>& hosted,
                          size_t from, size_t to, std::vector<replication::topic_partition>& failed);
  // On the shard of `replicas`: removes these replicas (and their logs) where it holds them.
  static void remove_replicas(replication::replica_manager& replicas,
                              const std::vector<replication::topic_partition>& removed);

  int32_t _node_id;
  std::vector<uuid> _log_dir_ids;
  std::vector<replication::replica_manager*> _replicas_by_shard;
  replication::replica_placement _placement;
  net::shard_pool* _shards;
  metadata::metadata_cache& _cache;
  static_property_lookup _static_config;
  storage::log_manager* _logs;
  std::unique_ptr<log_creator> _creator;  // the publisher's thread, when logs are created off the shards
  metadata::metadata_image_ptr _latest;   // the image to publish (home shard only)
  bool _busy = false;  // logs being created or an image applied; when done, _latest is published
  std::atomic<int64_t> _answer_gate{INT64_MAX};  // answer_gate()
  std::function<void()> _answer_gate_opened;
  std::set<replication::topic_partition> _attempted;  // created (or failed) by the last job: not retried
  std::set<replication::topic_partition> _failed;     // apply failed: tried again with the next image
  std::function<void(const metadata::metadata_image_ptr&)> _published_listener;
  std::shared_ptr<std::atomic<bool>> _alive = std::make_shared<std::atomic<bool>>(true);
};

}  // namespace mala::broker
