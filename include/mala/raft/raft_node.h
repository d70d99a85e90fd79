// One controller's Raft replica running for real: the deterministic state machine (replica.h) on the node's
// home shard, its log the partition __cluster_metadata-0 on storage (partition_raft_log), its vote and epoch
// in the quorum-state file, and its messages carried as Kafka's own RPCs (Vote v2, BeginQuorumEpoch v1,
// EndQuorumEpoch v1, Fetch v18; rpc_codec.h) to the other voters' CONTROLLER listeners through a
// net::peer_client. Kafka's KafkaRaftClient with its RaftManager.
//
// The node ticks the replica every few milliseconds, hands it every inbound request and every answer to
// its own requests, and carries out each step's effects in the order replica.h requires: quorum state
// written and fsynced, log synced, then messages sent, then listeners told (high watermark, role, epoch,
// leader). The writes and syncs run on the node's blocking thread, never on the io_context's (a shard: issue
// 20): a step that needs them holds its messages and listener call, and every later step's, until a job that
// started after it completed, so nothing that depends on durable state leaves before it is durable and
// effects leave in step order. The replica goes on meanwhile; its appends during a job go with the next job
// (group commit) and the leader's own log counts toward the high watermark only once synced
// (replica::on_log_flushed). A failed quorum-state write or log sync halts the process, as Kafka halts when
// its metadata log dir fails: continuing could break a vote or lose a committed entry.
//
// Inbound requests (the broker's Vote / BeginQuorumEpoch / EndQuorumEpoch handlers and Fetch of
// __cluster_metadata) come in through handle_request with a callback that receives the answer once the
// replica gives it (a Fetch may long-poll); one that gets no answer within request_timeout_ms is answered
// with REQUEST_TIMED_OUT.
//
// Threads: everything runs on the io_context given to open() (shard 0); every method must be called there.
// The quorum-state writes, the log's syncs and the snapshot files run on one blocking thread of the node's
// own (a follower's snapshot install still writes on the io_context's thread). The header keeps asio out
// (callbacks, not awaitables).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mala/common/result.h"
#include "mala/net/peer_client_options.h"
#include "mala/raft/messages.h"
#include "mala/raft/partition_raft_log.h"
#include "mala/raft/replica.h"
#include "mala/raft/voter_set.h"

namespace asio {
class io_context;
}

namespace mala::raft {

struct raft_node_options {
  raft_config config;
  std::string cluster_id;
  // The CONTROLLER listener of every voter (controller.quorum.voters). Empty with a KIP-853 quorum: the
  // voters and their endpoints then come from the voter set in the log (voter_set.h), and config.voters is
  // filled from it at open().
  std::map<int32_t, voter_endpoint> voter_endpoints;
  // The metadata log dir's directory.id (meta.properties): with node id, this node's KIP-853 ReplicaKey.
  uuid directory_id;
  // controller.quorum.bootstrap.servers; config.bootstrap_servers is set from it at open().
  std::vector<voter_endpoint> bootstrap_servers;
  // The initial voters given when formatting (--standalone / --initial-controllers): written as the bootstrap
  // checkpoint when the metadata log is empty and has no snapshot, ignored otherwise.
  std::optional<std::vector<voter_info>> initial_voters;
  std::filesystem::path metadata_log_dir;
  storage::metadata_segment_settings segments;  // metadata.log.segment.bytes / .ms
  // The log manager's file worker: the metadata log's file work runs there (partition_raft_log_options).
  std::shared_ptr<storage::file_worker> file_worker;
  int32_t tick_interval_ms = 10;
  // The node's connections through the controller listener: TLS when it is SSL or SASL_SSL, SASL when it is
  // SASL_PLAINTEXT or SASL_SSL.
  net::peer_client_options client;
};

class raft_node {
 public:
  // Opens the log and the quorum-state file and builds the replica. Nothing is sent before start().
  static result<std::unique_ptr<raft_node>> open(asio::io_context& io, raft_node_options options);
  ~raft_node();
  raft_node(const raft_node&) = delete;
  raft_node& operator=(const raft_node&) = delete;

  void start();
  // Stops ticking and sending; requests in flight are dropped. Called on the io_context's thread.
  void stop();

  using response_callback = std::function<void(raft_message_body)>;
  // An inbound request from node `from`; `respond` is called once with the answer.
  void handle_request(int32_t from, raft_message_body request, response_callback respond);

  // Leader only: appends one entry per record in the current epoch (not committed yet).
  result<append_info> append(const std::vector<std::vector<uint8_t>>& records);
  // KIP-630: stores a snapshot of the state at id.offset (at most the high watermark) and drops the log
  // segments it covers, without file I/O on this thread: `build` makes the payload and the file is written
  // and fsynced on the node's blocking thread; back here the log adopts it (checked against the log again),
  // the covered segments go, and `done(stored)` is called. False at once (and neither `build` nor `done`
  // is called) when the replica refuses the id (see replica::create_snapshot) or a snapshot is still being
  // written.
  using snapshot_builder = std::function<result<std::vector<uint8_t>>()>;
  bool create_snapshot(offset_and_epoch id, snapshot_builder build, std::function<void(bool stored)> done);
  // How many snapshots were installed from the leader so far: a listener that sees it change reloads its
  // state from log().latest_snapshot().
  uint64_t snapshots_installed() const;
  // Graceful resignation (EndQuorumEpoch), for controlled shutdown.
  void resign();

  const replica& state() const;
  partition_raft_log& log();
  const std::string& cluster_id() const;
  // A voter's endpoint, or one learned from a Fetch answer's NodeEndpoints (how an observer that started
  // from bootstrap servers reaches the leader).
  std::optional<voter_endpoint> endpoint_of(int32_t node_id) const;
  // The voter ids in effect.
  const std::vector<int32_t>& voters() const;
  // The voter set in effect (kraft.version 1: the latest snapshot's, then the VotersRecords in the log);
  // nullopt with static voters (kraft.version 0).
  std::optional<std::vector<voter_info>> voter_set() const;
  // kraft.version in effect (replica::kraft_version) and its upgrade (replica::upgrade_kraft_version; the
  // write goes out like an append's).
  int16_t kraft_version() const;
  status upgrade_kraft_version(int32_t epoch, int16_t version, bool validate_only);
  // The voter set a snapshot ending at `offset` carries.
  std::optional<std::vector<voter_info>> voter_set_before(int64_t offset) const;
  // KIP-853 AddRaftVoter / RemoveRaftVoter (replica.h): `done` is called once, on this node's thread, with
  // the answer (after the change committed, or the refusal or timeout).
  void add_voter(voter_info voter, bool ack_when_committed, std::function<void(voter_change_answer)> done);
  void remove_voter(int32_t voter_id, uuid directory_id, std::function<void(voter_change_answer)> done);
  void update_voter(int32_t leader_epoch, voter_info voter, int16_t min_kraft_version,
                    int16_t max_kraft_version, std::function<void(voter_change_answer)> done);

  // Called after every step that moved the high watermark or changed the role, epoch or leader.
  void add_listener(std::function<void()> on_change);
  // While `open` returns false (checked after the listeners ran), this node's Fetch requests to the leader
  // wait: the leader takes a follower's next Fetch as the sign that it applied the high watermark it was last
  // sent (controller_channel's broker propagation), and the broker side may need a moment after its listener
  // returned (the metadata publisher creating a new topic's logs off the shards). fetch_gate_opened() sends
  // what waited; a Fetch waits at most 500 ms (a fraction of controller.quorum.fetch.timeout.ms) and only the
  // newest waits. Both on the io_context's thread.
  void set_fetch_gate(std::function<bool()> open);
  void fetch_gate_opened();

 private:
  struct impl;
  explicit raft_node(std::shared_ptr<impl> i);
  std::shared_ptr<impl> _impl;
};

}  // namespace mala::raft
