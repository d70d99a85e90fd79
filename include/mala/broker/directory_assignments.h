// KIP-858 on the broker (Kafka's AssignmentsManager, fed as ReplicaManager.maybeUpdateTopicAssignment feeds
// it): every `interval_ms` the replicas this broker hosts whose log dir is not the Directories entry the
// metadata holds for them go to the active controller in one AssignReplicasToDirs (at most
// `max_assignments_per_request`), through the controller channel, once the broker is registered and
// metadata.version is 3.7-IV2 or later. Nothing is queued: each round compares the metadata with the logs
// again, so a refused or lost request is simply made again (after a growing backoff, up to 10 s), and an
// assignment the controller recorded is not sent twice.
//
// Threads: the home shard only (shard 0), like the controller channel.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include "mala/broker/controller_channel.h"
#include "mala/common/uuid.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/assign_replicas_to_dirs_request.h"
#include "mala/storage/partition_log.h"

namespace mala::broker {

// The dir id of each hosted partition's log (the dir's meta.properties directory.id).
using hosted_log_dirs = std::map<storage::topic_partition, uuid>;

struct directory_assignments_options {
  int32_t broker_id = -1;
  std::function<int64_t()> broker_epoch;                // -1 while not registered
  std::function<metadata::metadata_image_ptr()> image;  // the node's applied metadata image
  std::function<hosted_log_dirs()> hosted;              // the logs this node holds, by dir id
  int32_t interval_ms = 1000;
};

// AssignmentsManager.MAX_ASSIGNMENTS_PER_REQUEST.
inline constexpr size_t max_assignments_per_request = 2250;

// The request for the hosted replicas whose dir differs from the image's Directories entry for this broker
// (nullopt: none differs, or the metadata.version has no directory assignment).
std::optional<protocol::assign_replicas_to_dirs_request> directory_assignment_request(
    const metadata::metadata_image& image, int32_t broker_id, int64_t broker_epoch,
    const hosted_log_dirs& hosted);

class directory_assignments {
 public:
  directory_assignments(asio::io_context& io, controller_channel& channel,
                        directory_assignments_options options);
  ~directory_assignments();
  void start();
  void stop();

 private:
  struct state {
    bool stopped = false;
  };
  static asio::awaitable<void> run(directory_assignments* self, std::shared_ptr<state> st);
  // Whether nothing is left to send (sent and accepted, or nothing differs).
  asio::awaitable<bool> send_once();

  asio::io_context& _io;
  controller_channel& _channel;
  directory_assignments_options _options;
  std::shared_ptr<state> _state;
  asio::steady_timer _timer;
};

}  // namespace mala::broker
