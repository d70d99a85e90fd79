// Runs the group coordinator (coordinator/group_coordinator.h) inside the node: it is the coordinator's
// record_writer (a batch of coordinator records, transactional for TxnOffsetCommit, or a transaction marker,
// appended to the __consumer_offsets replica with acks=-1, its completion posted back once the high watermark
// passes it, REQUEST_TIMED_OUT after offsets.commit.timeout.ms), its clock (an asio timer on the home shard
// fires run_expired_timers at the coordinator's next deadline), and its loader: each new metadata image makes
// the coordinator own the
// __consumer_offsets partitions this node leads (their log is replayed in steps of at most
// offsets.load.buffer.size bytes, yielding to the event loop in between, COORDINATOR_LOAD_IN_PROGRESS
// meanwhile; a transactional batch's records replay as pending under its producer id, a marker ends them)
// and drop the ones it no longer leads.
//
// Threads: everything runs on the home shard (the shard of the replicas): on_metadata is called from the
// metadata publisher there, the timers and load steps run on its io_context. start() and stop() too.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "mala/common/result.h"
#include "mala/coordinator/group_coordinator.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/record_batch.h"

namespace asio {
class io_context;
}
namespace mala::replication {
class partition;
class replica_manager;
struct append_outcome;
}  // namespace mala::replication

namespace mala {
class node_config;
}

namespace mala::broker {

struct group_coordinator_driver_options {
  int32_t node_id = 0;
  coordinator::group_coordinator_config coordinator;
  int32_t commit_timeout_ms = 5000;     // offsets.commit.timeout.ms
  int32_t load_buffer_bytes = 5 << 20;  // offsets.load.buffer.size
  protocol::compression_codec compression =
      protocol::compression_codec::none;  // offsets.topic.compression.codec
  std::function<int64_t()> clock_ms;      // wall clock
};

// The coordinator settings of a node configuration (Kafka's property names and defaults).
group_coordinator_driver_options group_coordinator_options_from(const node_config& config);

class group_coordinator_driver final : public coordinator::record_writer {
 public:
  group_coordinator_driver(asio::io_context& home, replication::replica_manager& replicas,
                           group_coordinator_driver_options options);
  ~group_coordinator_driver() override;
  group_coordinator_driver(const group_coordinator_driver&) = delete;
  group_coordinator_driver& operator=(const group_coordinator_driver&) = delete;

  coordinator::group_coordinator& coordinator();

  // Loads the __consumer_offsets partitions led here that are not loaded yet (a partition whose whole log
  // fits in one step is active when this returns), unloads the ones no longer led.
  void on_metadata(const metadata::metadata_image& image);
  // Arms the timer; stop() cancels it and every load in progress (before the shards stop).
  void start();
  void stop();

  void append(int32_t partition, std::vector<coordinator::coordinator_record> records,
              std::optional<coordinator::transactional_producer> producer, append_callback done) override;
  void append_marker(int32_t partition, const coordinator::txn_marker_write& marker,
                     append_callback done) override;

 private:
  // Runs `append` (acks=-1) on the partition's replica and answers once what it wrote is committed.
  void append_with(int32_t partition,
                   const std::function<result<replication::append_outcome>(replication::partition&)>& append,
                   append_callback done);

  struct impl;
  std::unique_ptr<impl> _impl;
};

}  // namespace mala::broker
