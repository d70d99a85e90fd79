// One Mala node: owns every subsystem a configuration asks for and runs them in a fixed order.
//
// open() builds the node, each step needing the ones before it:
//   1. log dirs formatted or checked (meta.properties), the logs opened and recovered;
//   2. the shards (threads not started), the partition replicas, the metadata cache and its publisher;
//   3. the metadata quorum: the Raft replica of __cluster_metadata-0 (a single voter elects itself at
//      once, more voters elect one of them), the controller on it (controller role), the controller channel
//      and the metadata loader that publishes what the quorum commits;
//   4. the broker side (broker role): the group coordinator, the broker lifecycle (registration and
//      heartbeats), the follower fetcher and the AlterPartition manager;
//   5. the request dispatcher and the Kafka server; log maintenance.
// run() is the start sequence (start()), serving until SIGTERM/SIGINT, the stop sequence (stop(), on shard 0)
// and then close(), once the shards have stopped:
//   start: controller listeners open (broker listeners are bound, and open once the broker has caught up
//          with the metadata log), group coordinator, log maintenance, signals, Raft replica and metadata
//          loader, the active controller's periodic work, broker lifecycle, follower fetcher, AlterPartition
//          manager, then the shard threads.
//   stop:  controlled shutdown (the controller moves this broker's leaderships away), then listeners,
//          maintenance, group coordinator, periodic work, lifecycle, fetcher and AlterPartition manager stop;
//          the Raft leader resigns (EndQuorumEpoch) and the Raft replica stops; the shard threads end.
//   close: broker-side objects go, high watermarks are checkpointed, replicas removed, the quorum objects
//          go, and the logs are flushed and closed with the clean-shutdown marker.
//
// Threads: open() and run() on the main thread. The controller, the Raft replica, the group coordinator and
// the broker lifecycle live on shard 0 (the home shard); each shard has its own replica manager, follower
// fetcher, AlterPartition manager and maintenance timers for the partitions replica_placement puts there;
// connections are spread over the shards by the Kafka server.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <asio/awaitable.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>

#include "log_cleaning.h"
#include "log_maintenance.h"
#include "mala/broker/authorizer.h"
#include "mala/broker/broker_dispatcher.h"
#include "mala/broker/broker_lifecycle.h"
#include "mala/broker/broker_metrics.h"
#include "mala/broker/client_quota_manager.h"
#include "mala/broker/client_telemetry.h"
#include "mala/broker/controller_channel.h"
#include "mala/broker/controller_registration_manager.h"
#include "mala/broker/directory_assignments.h"
#include "mala/broker/fetch_sessions.h"
#include "mala/broker/group_coordinator_driver.h"
#include "mala/broker/handler_table.h"
#include "mala/broker/metadata_publisher.h"
#include "mala/broker/metrics_exporter.h"
#include "mala/broker/producer_id_allocator.h"
#include "mala/broker/transaction_coordinator_driver.h"
#include "mala/common/config.h"
#include "mala/common/logging.h"
#include "mala/common/result.h"
#include "mala/controller/metadata_loader.h"
#include "mala/controller/quorum_controller.h"
#include "mala/net/http_server.h"
#include "mala/net/kafka_server.h"
#include "mala/net/peer_client.h"
#include "mala/net/shard_pool.h"
#include "mala/net/tls.h"
#include "mala/raft/raft_node.h"
#include "mala/replication/alter_partition_manager.h"
#include "mala/replication/follower_fetcher.h"
#include "mala/replication/replica_manager.h"
#include "mala/security/sasl_settings.h"
#include "mala/storage/log_dir_format.h"
#include "mala/storage/log_manager.h"

namespace mala::app {

// kafka-storage format's --standalone / --initial-controllers (KIP-853): the initial voters of a new
// metadata log on a controller found through controller.quorum.bootstrap.servers.
struct quorum_bootstrap {
  bool standalone = false;
  std::optional<std::string> initial_controllers;
};

class node {
 public:
  // Steps 1-5 above; nothing runs yet. Errors name what could not be opened.
  static result<std::unique_ptr<node>> open(node_config config, quorum_bootstrap bootstrap);
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  // Starts, serves until SIGTERM/SIGINT, stops and closes. Non-ok (logged) when it could not start or the
  // logs could not be closed cleanly.
  status run();

 private:
  explicit node(node_config config);

  status open_storage();
  void open_replicas();
  status open_quorum(const quorum_bootstrap& bootstrap);
  void open_broker();
  void open_server();
  void apply_dynamic_tls(const metadata::metadata_image& image);
  // leader.replication.throttled.rate / follower.replication.throttled.rate of this broker (dynamic, per
  // broker then cluster-wide; none by default), applied whenever an image is published.
  void apply_replication_throttles(const metadata::metadata_image& image);

  status start();
  asio::awaitable<void> stop();
  // KIP-113: the shard's replicas moving between log dirs copy their logs a slice at a time
  // (replica_manager::copy_to_future_logs) until the node stops.
  asio::awaitable<void> copy_future_logs(size_t shard);
  status close();

  void publish(const metadata::metadata_image_ptr& image);
  // The controller's waits for commits end up to the high watermark, held back while the publisher creates a
  // small image's logs (metadata_publisher::answer_gate). Home shard.
  void release_commit_waits();
  std::vector<replication::replica_manager*> replicas_by_shard() const;
  // Runs fn on the shard owning tp: in place when this thread is that shard or no shard runs, else posted.
  void run_on_owner(const storage::topic_partition& tp, std::function<void()> fn);
  void fence_previous_incarnation();
  void schedule_controller_work();
  std::optional<int64_t> replica_high_watermark(const storage::topic_partition& tp) const;

  const node_config _config;
  std::shared_ptr<spdlog::logger> _log;

  // Step 1.
  storage::log_dirs_identity _dirs;
  uuid _metadata_dir_id;
  std::unique_ptr<storage::log_manager> _logs;
  // Step 2.
  std::unique_ptr<net::shard_pool> _shards;
  replication::replica_placement _placement;
  // One replica manager per shard (index: shard), holding the partitions _placement puts there.
  std::vector<std::unique_ptr<replication::replica_manager>> _replicas;
  metadata::metadata_cache _metadata;
  std::unique_ptr<broker::metadata_publisher> _publisher;
  // Step 3.
  // To the controllers (forwarding, registration, heartbeats): through the controller listener.
  std::unique_ptr<net::peer_client> _peers;
  // To other brokers (AddPartitionsToTxn, WriteTxnMarkers): through the inter-broker listener.
  std::unique_ptr<net::peer_client> _broker_peers;
  // The client side of SSL controller / inter-broker listeners (null when PLAINTEXT).
  std::shared_ptr<net::tls_client_context> _controller_tls;
  std::shared_ptr<net::tls_client_context> _inter_broker_tls;
  // The node's own connections through the controller and inter-broker listeners (TLS and SASL).
  net::peer_client_options _controller_client;
  net::peer_client_options _inter_broker_client;
  std::unique_ptr<raft::raft_node> _raft;
  std::unique_ptr<controller::quorum_controller> _controller;  // controller role only
  std::unique_ptr<broker::controller_channel> _controller_link;
  int64_t _committed_high_watermark = 0;  // the metadata log's, as the loader last reported it
  std::unique_ptr<controller::metadata_loader> _loader;
  // Step 4 (broker role only).
  std::unique_ptr<broker::group_coordinator_driver> _groups;
  std::unique_ptr<broker::transaction_coordinator_driver> _transactions;
  std::unique_ptr<broker::broker_lifecycle> _lifecycle;
  // KIP-858: tells the controller which log dir holds each hosted replica (AssignReplicasToDirs).
  std::unique_ptr<broker::directory_assignments> _directory_assignments;
  // A controller's own registration (ControllerRegistration); null without the controller role.
  std::unique_ptr<broker::controller_registration_manager> _controller_registration;
  // One of each per shard (index: shard), for the replicas that shard owns.
  std::vector<std::unique_ptr<replication::follower_fetcher>> _fetchers;
  // Replication throttles, shared by every shard: leader.replication.throttled.rate (the fetch handlers)
  // and follower.replication.throttled.rate (the fetchers), from the dynamic broker configs.
  std::unique_ptr<replication::replication_quota> _leader_throttle;
  std::unique_ptr<replication::replication_quota> _follower_throttle;
  // KIP-113: replica.alter.log.dirs.io.max.bytes.per.second, the copies of replicas moving between log dirs.
  std::unique_ptr<replication::replication_quota> _alter_log_dirs_throttle;
  std::vector<std::unique_ptr<replication::alter_partition_manager>> _isr_changes;
  // Step 5.
  std::unique_ptr<security::sasl_settings> _sasl;  // built before step 1
  std::unique_ptr<broker::sharded_fetch_session_cache> _fetch_sessions;
  std::unique_ptr<broker::client_quota_manager> _client_quotas;
  broker::producer_id_allocator _producer_ids;
  broker::handler_table _handlers;
  std::unique_ptr<broker::authorizer> _authorizer;  // authorizer.class.name set
  broker::broker_services _services;
  std::unique_ptr<broker::broker_dispatcher> _dispatcher;
  std::unique_ptr<net::kafka_server> _server;
  // Per SSL listener: the dynamic key/trust store configs last applied (shard 0).
  std::map<std::string, std::map<std::string, std::string>> _dynamic_tls;
  std::vector<net::listen_endpoint> _listen_now;        // controller listeners (all, without the broker role)
  std::vector<net::listen_endpoint> _listen_caught_up;  // broker listeners
  // The metrics and health endpoint (metrics.listeners; none when empty), on shard 0.
  std::vector<net::http_endpoint> _metrics_endpoints;
  std::unique_ptr<broker::broker_metrics> _metrics;
  std::unique_ptr<broker::metrics_exporter> _exporter;
  std::unique_ptr<broker::client_telemetry> _telemetry;  // with the metrics endpoint only
  std::unique_ptr<net::http_server> _metrics_http;
  // /health/ready: the broker's listeners are open (broker role), until the stop sequence begins.
  std::atomic<bool> _serving{false};
  std::atomic<bool> _shards_stopping{false};  // the stop sequence has begun
  std::unique_ptr<log_maintenance> _maintenance;
  std::unique_ptr<log_cleaning> _cleaning;
  // Timers and signals on shard 0's io_context: they go before the shards.
  std::unique_ptr<asio::steady_timer> _controller_work_timer;
  std::unique_ptr<asio::signal_set> _signals;
  uuid _incarnation_id;        // this process's broker registration
  int64_t _broker_epoch = -1;  // at shutdown: written with the clean-shutdown marker
};

}  // namespace mala::app
