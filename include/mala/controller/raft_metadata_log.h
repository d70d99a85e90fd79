// The metadata log on the Raft quorum: controller writes become entries of the replicated
// __cluster_metadata-0 through raft::raft_node; a write is committed once a majority of the voters has it.
//
// append() returns as soon as the leader has the entries (written locally; synced on the node's blocking
// thread, not yet committed), as Kafka's
// QuorumController does: the controller applies its writes to its own image at once and answers the request
// once the high watermark passes them (the broker's controller_channel waits for that). replay() reads
// committed entries only (below the high watermark), one record per entry; the leader_change entries Raft
// writes are skipped.
//
// Threads: shard 0 only, like the raft_node it wraps.
#pragma once

#include "mala/controller/metadata_log.h"
#include "mala/raft/raft_node.h"

namespace mala::controller {

class raft_metadata_log final : public metadata_log {
 public:
  explicit raft_metadata_log(raft::raft_node& node) : _node(node) {}

  int64_t end_offset() const override;
  int64_t committed_offset() const override;
  int32_t epoch() const override;
  // NOT_CONTROLLER when this node is not the Raft leader.
  result<metadata_append_result> append(
      std::span<const metadata::versioned_metadata_record> records) override;
  status replay(int64_t from_offset, const metadata_replay_callback& callback) const override;
  int16_t kraft_version() const override;
  status upgrade_kraft_version(int32_t epoch, int16_t version, bool validate_only) override;
  // Where a replay stopped.
  struct replay_position {
    // The offset after the last whole write or KIP-868 transaction passed: the next from_offset.
    int64_t next_offset = 0;
    // Whether the replay read every entry below to_offset and stopped inside a metadata transaction (a
    // BeginTransactionRecord whose End or Abort is not below to_offset): next_offset is then the first
    // offset of the write that began it. With to_offset the high watermark of a leader that has committed
    // its epoch's first entry, such a transaction was left open by an earlier leader.
    bool open_transaction = false;
  };
  // The records of the whole writes in [from_offset, to_offset) (a write is delivered only once its last
  // entry is below to_offset), in order. The records between a BeginTransactionRecord and its
  // EndTransactionRecord are delivered together once the End is read, those before an
  // AbortTransactionRecord never (Kafka's KIP-868 metadata transactions, which may span several writes).
  // from_offset must be a write boundary outside a transaction.
  result<replay_position> replay_range(int64_t from_offset, int64_t to_offset,
                                       const metadata_replay_callback& callback) const;

 private:
  raft::raft_node& _node;
};

}  // namespace mala::controller
