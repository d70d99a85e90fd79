// The follower side of partition replication (Kafka's ReplicaFetcherManager / ReplicaFetcherThread /
// AbstractFetcherThread): for every local replica the metadata makes a follower, this node fetches from the
// partition's leader with replica Fetch requests (ReplicaState.ReplicaId = node.id) and appends what comes
// back with partition::append_as_follower, so that the leader's high watermark (min log end over the ISR) can
// move and acks=all produces complete.
//
// Which partitions: every poll_interval_ms the replica manager is scanned for follower replicas; they are
// grouped by leader node and, within a leader, by fetcher id (Kafka's getFetcherId over num.replica.fetchers,
// default 1), and each (leader, fetcher id) gets one fetch loop, all on the fetcher's shard (Kafka runs
// each fetcher on a thread of its own). A loop keeps its partition list between requests and rebuilds it
// when the replica manager adds or removes a partition or the metadata image changes; each request checks
// every listed replica's role, so a partition whose leader changed, or that stopped being a follower, is
// dropped by the next request, and a loop with no partitions ends.
//
// Fetch sessions (KIP-227, Kafka's FetchSessionHandler): a loop's first request is a full fetch asking for a
// session (epoch 0); later ones name only the partitions whose fetch state (offset, leader epoch, last
// fetched epoch, log start) changed and the partitions to forget, and the leader answers only partitions
// with news, so an idle partition costs the request nothing but the leader's own session walk. A failed
// request, FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH starts over with a full fetch; a
// leader that keeps no session (session id 0 in its answer) gets full fetches.
//
// Per partition response: records -> append_as_follower (only if the local log end still equals the fetch
// offset and the leader and leader epoch are unchanged, Kafka's fetch-state check); DivergingEpoch (KIP-595,
// Fetch v12+) -> truncate_to(min(end offset, log end)) and fetch again; the high watermark ->
// update_high_watermark_from_leader; OFFSET_OUT_OF_RANGE -> the leader's log end and log start by ListOffsets
// as a replica (Kafka's handleOutOfRangeError): a local log end above the leader's end is truncated to it,
// one below the leader's start restarts there (truncate_fully_and_start_at); NOT_LEADER_OR_FOLLOWER /
// UNKNOWN_LEADER_EPOCH / UNKNOWN_TOPIC_OR_PARTITION -> retried after replica.fetch.backoff.ms;
// FENCED_LEADER_EPOCH -> left alone until the local leader epoch changes (the next metadata). A failed
// request (network, timeout, malformed answer) backs the whole loop off by replica.fetch.backoff.ms.
//
// ISR changes are the leader's (alter_partition_manager.h). Not here yet: truncation through
// OffsetsForLeaderEpoch for leaders below Fetch v12 (every Mala node serves v17).
//
// Replication throttles (Kafka's ReplicaFetcherThread with its follower quota): a replica the topic's
// follower.replication.throttled.replicas names on this node is left out of a request while it is behind the
// leader's high watermark and the node's follower replication rate is over
// follower.replication.throttled.rate; its records count toward that rate.
//
// Threads: one fetcher per shard, for the follower replicas replica_placement::shard_of puts there (so one
// fetch loop per (shard, leader)); everything runs on that shard's io_context. The object and the replica
// manager must outlive the loops, so stop() (which closes the fetcher's own peer_client and wakes the
// timers) comes before the io_context stops, and the object is destroyed after the context's thread ended.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>

#include "mala/metadata/metadata_image.h"
#include "mala/net/peer_client.h"
#include "mala/replication/replica_manager.h"
#include "mala/replication/replica_placement.h"
#include "mala/replication/replication_quota.h"

namespace mala::replication {

struct follower_fetcher_options {
  int32_t node_id = 0;
  // The listener whose endpoint of the leader is fetched from (inter.broker.listener.name); empty: the
  // leader's first registered endpoint.
  std::string listener_name;
  int32_t max_wait_ms = 500;                  // replica.fetch.wait.max.ms
  int32_t min_bytes = 1;                      // replica.fetch.min.bytes
  int32_t max_bytes = 10 * 1024 * 1024;       // replica.fetch.response.max.bytes
  int32_t partition_max_bytes = 1024 * 1024;  // replica.fetch.max.bytes
  int32_t backoff_ms = 1000;                  // replica.fetch.backoff.ms
  int32_t request_timeout_ms = 30'000;        // replica.socket.timeout.ms (added to max_wait_ms)
  int32_t poll_interval_ms = 100;             // how often a new metadata image is looked for
  // The follower replicas are re-read when the metadata image changes (leaderships change only with it) and
  // at least every this many polls: not every 100 ms for every partition of the node.
  int32_t rescan_polls = 50;
  int32_t fetchers_per_leader = 1;  // num.replica.fetchers
  // The node's connections through the inter-broker listener: TLS when it is SSL or SASL_SSL, SASL when it is
  // SASL_PLAINTEXT or SASL_SSL.
  net::peer_client_options client;
  // follower.replication.throttled.rate (replication_quota.h), shared by the node's fetchers; null: none.
  replication_quota* follower_throttle = nullptr;
  size_t shard = 0;  // the shard it runs on: it follows the partitions placed there
  replica_placement placement;
};

class follower_fetcher {
 public:
  follower_fetcher(asio::io_context& io, replica_manager& replicas, const metadata::metadata_cache& metadata,
                   follower_fetcher_options options);
  ~follower_fetcher();
  follower_fetcher(const follower_fetcher&) = delete;
  follower_fetcher& operator=(const follower_fetcher&) = delete;

  void start();
  // Ends every loop: in-flight fetches fail at once (their connections are closed), timers are cancelled.
  void stop();

  // Fetch loops running (one per leader node), for tests and logs.
  size_t running_loops() const { return _loops.size(); }

 private:
  struct shared_state {
    bool stopped = false;
  };
  struct loop_state;

  asio::awaitable<void> poll(std::shared_ptr<shared_state> state);
  // One fetcher: the partitions led by `leader` whose fetcher id (fetcher_id_of) is `fetcher`.
  asio::awaitable<void> fetch_from(int32_t leader, int32_t fetcher, std::shared_ptr<shared_state> state,
                                   std::shared_ptr<loop_state> loop);
  asio::awaitable<std::optional<int64_t>> list_offset(net::peer_address to, topic_partition tp,
                                                      int32_t leader_epoch, int64_t timestamp);
  // Starts a loop for every leader of a local follower replica that has none.
  void start_missing_loops();
  // The replica of `tp` if it is placed on this fetcher's shard and follows another node.
  partition* follower_replica(const topic_partition& tp) const;

  asio::io_context& _io;
  replica_manager& _replicas;
  const metadata::metadata_cache& _metadata;
  follower_fetcher_options _options;
  net::peer_client _client;
  std::shared_ptr<shared_state> _state;
  // Kafka's AbstractFetcherManager.getFetcherId: abs(31 * topic.hashCode() + partition) %
  // num.replica.fetchers.
  int32_t fetcher_id_of(const topic_partition& tp) const;
  std::map<std::pair<int32_t, int32_t>, std::shared_ptr<loop_state>>
      _loops;                                   // by (leader node id, fetcher id)
  metadata::metadata_image_ptr _scanned_image;  // the image of the last start_missing_loops scan
  int32_t _polls_since_scan = 0;
};

}  // namespace mala::replication
