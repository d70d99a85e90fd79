// Every node's view of the committed metadata on a Raft quorum (Kafka's MetadataLoader with the
// controller's leadership handling): it follows the raft_node's high watermark, applies each newly committed
// record to the image the broker side serves and hands the new image to the publisher, and it switches the
// local quorum_controller between standby and active as this node wins or loses the quorum's leadership.
//
// The published image names the quorum's leader as its controller id (what Metadata and DescribeCluster
// report; in combined mode the leader is a broker too). The controller becomes active once the Raft leader
// has committed the first entry of its epoch: by then every earlier entry is committed and applied here, so
// the controller starts from exactly the committed log (Kafka's QuorumController claims leadership after
// replaying to the epoch's start).
//
// Snapshots (KIP-630): at start-up and whenever the node installs a snapshot from the leader, the image is
// loaded from the log's latest snapshot and the records after it are applied on top; after every
// max_bytes_between_snapshots bytes of applied records the image is written as a snapshot at the applied
// offset (the raft_node then drops the log segments it covers).
//
// Threads: shard 0 only (a raft_node listener). A snapshot's payload is built from the (immutable) image and
// written on the raft_node's blocking thread, never on shard 0.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "mala/controller/quorum_controller.h"
#include "mala/controller/raft_metadata_log.h"
#include "mala/metadata/metadata_image.h"
#include "mala/raft/raft_node.h"

namespace mala::controller {

struct metadata_loader_hooks {
  image_publisher publish;                                // each new committed image
  std::function<void(bool active)> on_activation;         // after the controller became active / standby
  std::function<void(int64_t high_watermark)> on_commit;  // after every move of the high watermark
  std::function<int64_t()> clock_ms;
  // metadata.log.max.record.bytes.between.snapshots: committed record bytes after which this node writes a
  // snapshot of its image (KIP-630; every node snapshots its own state, as Kafka's SnapshotGenerator does).
  int64_t max_bytes_between_snapshots = 20 * 1024 * 1024;
};

class metadata_loader {
 public:
  // `controller` may be null (a broker-only observer). Registers itself as a listener of `node`.
  metadata_loader(raft::raft_node& node, quorum_controller* controller, metadata::metadata_image_ptr base,
                  metadata_loader_hooks hooks);

  // Catches up with the node now (also called on every change of the node).
  void update();
  // The image of everything applied so far.
  const metadata::metadata_image_ptr& image() const { return _image; }
  // The offset of the last applied record; -1 before any.
  int64_t applied_offset() const { return _next_offset - 1; }

 private:
  void apply_committed();
  void load_latest_snapshot();
  void maybe_write_snapshot();

  raft::raft_node& _node;
  raft_metadata_log _log;
  quorum_controller* _controller;
  metadata::metadata_image_ptr _image;
  metadata_loader_hooks _hooks;
  int64_t _next_offset = 0;
  // The committed log ends inside a KIP-868 metadata transaction (its records are not applied yet).
  bool _open_transaction = false;
  int64_t _last_high_watermark = -1;
  uint64_t _snapshots_installed = 0;
  int64_t _bytes_since_snapshot = 0;
  bool _updating = false;
  bool _again = false;
};

}  // namespace mala::controller
