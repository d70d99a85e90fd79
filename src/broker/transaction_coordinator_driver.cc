#include "mala/broker/transaction_coordinator_driver.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "handlers/write_txn_markers.h"
#include "mala/broker/coordinator_log.h"
#include "mala/broker/producer_id_allocator.h"
#include "mala/common/config.h"
#include "mala/common/logging.h"
#include "mala/controller/feature_control.h"
#include "mala/coordinator/transaction_records.h"
#include "mala/net/peer_client.h"
#include "mala/protocol/messages/add_partitions_to_txn_request.h"
#include "mala/protocol/messages/add_partitions_to_txn_response.h"
#include "mala/protocol/messages/write_txn_markers_request.h"
#include "mala/protocol/messages/write_txn_markers_response.h"
#include "mala/protocol/record_batch.h"
#include "mala/protocol/request_header.h"
#include "mala/replication/replica_manager.h"

namespace mala::broker {

namespace {

replication::topic_partition state_partition(int32_t partition) {
  return {std::string(coordinator::transaction_state_topic_name), partition};
}

// The WriteTxnMarkers version the coordinator sends.
constexpr int16_t write_txn_markers_version = protocol::write_txn_markers_request::max_version;
// The AddPartitionsToTxn version a leader's verification is sent with (v4+ is the broker form, v5 has
// TRANSACTION_ABORTABLE).
constexpr int16_t verification_version = 5;

}  // namespace

transaction_coordinator_driver_options transaction_coordinator_options_from(const node_config& config) {
  transaction_coordinator_driver_options o;
  o.node_id = config.node_id();
  auto& c = o.coordinator;
  c.state_log_partitions = config.get_int("transaction.state.log.num.partitions").value_or(50);
  c.max_timeout_ms = config.get_int("transaction.max.timeout.ms").value_or(900'000);
  c.id_expiration_ms = config.get_int("transactional.id.expiration.ms").value_or(604'800'000);
  c.abort_timed_out_interval_ms =
      config.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms").value_or(10'000);
  c.remove_expired_interval_ms =
      config.get_int("transaction.remove.expired.transaction.cleanup.interval.ms").value_or(3'600'000);
  c.offsets_topic_partitions = config.get_int("offsets.topic.num.partitions").value_or(50);
  o.load_buffer_bytes = config.get_int("transaction.state.log.load.buffer.size").value_or(5 << 20);
  o.listener_name = config.inter_broker_listener_name();
  if (o.listener_name.empty() && !config.advertised_listeners().empty()) {
    o.listener_name = config.advertised_listeners().front().name;
  }
  o.request_timeout_ms = config.get_int("request.timeout.ms").value_or(30'000);
  return o;
}

struct transaction_coordinator_driver::impl {
  asio::io_context& home;
  replication::replica_manager& replicas;
  metadata::metadata_cache& metadata;
  net::peer_client& peers;
  producer_id_allocator& producer_ids;
  transaction_coordinator_driver_options options;
  std::unique_ptr<coordinator::transaction_coordinator> txns;
  partition_log_loader loader;
  asio::steady_timer timer;
  uint64_t timer_generation = 0;
  bool stopped = false;
  std::shared_ptr<spdlog::logger> log = subsystem_logger("txn-coordinator");
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  const broker_services* local = nullptr;  // set_local_services: markers to this node's partitions

  impl(asio::io_context& h, replication::replica_manager& r, metadata::metadata_cache& m, net::peer_client& p,
       producer_id_allocator& ids, transaction_coordinator_driver_options o)
      : home(h),
        replicas(r),
        metadata(m),
        peers(p),
        producer_ids(ids),
        options(std::move(o)),
        loader(h, r, options.load_buffer_bytes),
        timer(h) {}

  int64_t now() const { return options.clock_ms(); }

  void arm() {
    if (stopped) return;
    const uint64_t generation = ++timer_generation;
    auto deadline = txns->next_deadline();
    timer.cancel();
    if (!deadline) return;
    const int64_t delay = std::max<int64_t>(0, *deadline - now());
    timer.expires_after(std::chrono::milliseconds(delay));
    timer.async_wait([this, generation, alive = alive](const std::error_code& ec) {
      if (ec || !*alive || stopped || generation != timer_generation) return;
      txns->run_expired_timers();
      arm();
    });
  }

  void start_loading(int32_t partition, int32_t leader_epoch) {
    txns->begin_loading(partition, leader_epoch);
    log->info("loading __transaction_state-{} at coordinator epoch {}", partition, leader_epoch);
    loader.load(
        state_partition(partition),
        [this, partition](std::span<const uint8_t>, const protocol::record_batch_view& view, int64_t next) {
          if (view.is_control()) return;
          std::vector<uint8_t> decompressed;
          auto reader = view.records(decompressed);
          for (const auto& record : reader) {
            const int64_t offset = view.offset_of(record);
            if (offset < next || !record.key) continue;
            auto st = txns->replay(partition, *record.key, record.value);
            if (!st.ok()) {
              log->warn("__transaction_state-{} offset {}: record skipped: {}", partition, offset,
                        st.message);
            }
          }
        },
        [this, partition, leader_epoch, alive = alive](bool loaded) {
          if (!*alive) return;
          if (!loaded) {
            // Not the leader any more, or unreadable: the next image decides.
            if (txns->coordinator_epoch(partition) == leader_epoch) txns->unload(partition);
            return;
          }
          txns->complete_loading(partition);
          arm();
        });
  }

  // A leader's verification waiting for its turn to `node` (AddPartitionsToTxnManager's per-node data).
  struct queued_verification {
    txn_verification_request request;
    std::function<void(txn_verification_answer)> done;
  };
  struct node_verifications {
    bool in_flight = false;
    std::vector<queued_verification> queued;
  };
  std::map<int32_t, node_verifications> verifications_by_node;

  // Kafka's AddPartitionsToTxnManager: one AddPartitionsToTxn in flight per coordinator node, carrying every
  // verification that arrived meanwhile (one transaction each). A second verification of a transactional id
  // already queued replaces it: the queued one answers INVALID_PRODUCER_EPOCH when the new one has a newer
  // epoch (fenced), NETWORK_EXCEPTION when the same (a retry: retriable); a new one with an older epoch
  // answers INVALID_PRODUCER_EPOCH at once.
  void queue_verification(int32_t leader, txn_verification_request request,
                          std::function<void(txn_verification_answer)> done) {
    auto& node = verifications_by_node[leader];
    auto same = std::find_if(node.queued.begin(), node.queued.end(), [&](const queued_verification& q) {
      return q.request.transactional_id == request.transactional_id;
    });
    if (same != node.queued.end()) {
      if (request.producer_epoch < same->request.producer_epoch) {
        done(txn_verification_answer(request.partitions.size(), error_code::invalid_producer_epoch));
        return;
      }
      const error_code e = same->request.producer_epoch < request.producer_epoch
                               ? error_code::invalid_producer_epoch
                               : error_code::network_exception;
      auto replaced = std::move(*same);
      node.queued.erase(same);
      replaced.done(txn_verification_answer(replaced.request.partitions.size(), e));
    }
    node.queued.push_back({std::move(request), std::move(done)});
    if (node.in_flight) return;
    node.in_flight = true;
    asio::co_spawn(home, send_verifications(leader, alive), asio::detached);
  }

  // Sends the node's queued verifications, one request at a time, until none is left.
  // `keep`: the driver's liveness flag (this is gone once it is false).
  asio::awaitable<void> send_verifications(int32_t leader, std::shared_ptr<bool> keep) {
    for (;;) {
      if (!*keep) co_return;
      auto& node = verifications_by_node[leader];
      if (node.queued.empty()) {
        node.in_flight = false;
        co_return;
      }
      std::vector<queued_verification> batch = std::move(node.queued);
      node.queued.clear();
      std::vector<txn_verification_request> requests;
      requests.reserve(batch.size());
      for (const auto& q : batch) requests.push_back(q.request);
      auto answers = co_await verify_remote(leader, requests);
      if (!*keep) co_return;
      for (size_t i = 0; i < batch.size(); ++i) batch[i].done(std::move(answers[i]));
    }
  }

  // One AddPartitionsToTxn v5 to `leader`, the coordinator of every request's transactional id (distinct
  // ids): an answer per request, an error per partition.
  asio::awaitable<std::vector<txn_verification_answer>> verify_remote(
      int32_t leader, const std::vector<txn_verification_request>& requests) {
    auto every = [&requests](error_code e) {
      std::vector<txn_verification_answer> out;
      out.reserve(requests.size());
      for (const auto& r : requests) out.emplace_back(r.partitions.size(), e);
      return out;
    };
    const auto image = metadata.current();
    auto b = image->brokers.find(leader);
    const auto* ep = b == image->brokers.end() ? nullptr : b->second.endpoint_for(options.listener_name);
    if (!ep || b->second.fenced) co_return every(error_code::coordinator_not_available);
    protocol::add_partitions_to_txn_request req;
    for (const auto& request : requests) {
      auto& t = req.transactions.emplace_back();
      t.transactional_id = request.transactional_id;
      t.producer_id = request.producer_id;
      t.producer_epoch = request.producer_epoch;
      t.verify_only = !request.add;
      for (const auto& [topic, partition] : request.partitions) {
        if (t.topics.empty() || t.topics.back().name != topic) t.topics.emplace_back().name = topic;
        t.topics.back().partitions.push_back(partition);
      }
    }
    std::vector<uint8_t> body;
    protocol::wire_writer w(body);
    req.encode(w, verification_version);
    net::peer_address to{ep->host, static_cast<int32_t>(ep->port)};
    const bool flexible = protocol::add_partitions_to_txn_request::is_flexible(verification_version);
    auto answer = co_await peers.call(to, protocol::add_partitions_to_txn_request::api_key,
                                      verification_version, protocol::request_header_version(flexible),
                                      flexible ? 1 : 0, std::move(body), options.request_timeout_ms);
    if (!answer) {
      log->debug("AddPartitionsToTxn to node {} failed: {}", leader, answer.error().message);
      co_return every(error_code::network_exception);
    }
    protocol::add_partitions_to_txn_response resp;
    protocol::wire_reader r(*answer);
    if (resp.decode(r, verification_version) != protocol::decode_status::ok) {
      co_return every(error_code::unknown_server_error);
    }
    if (resp.error_code != 0) co_return every(static_cast<error_code>(resp.error_code));
    std::map<std::string, std::map<std::pair<std::string, int32_t>, error_code>> by_transaction;
    for (const auto& result : resp.results_by_transaction) {
      auto& by_partition = by_transaction[result.transactional_id];
      for (const auto& topic : result.topic_results) {
        for (const auto& p : topic.results_by_partition)
          by_partition[{topic.name, p.partition_index}] = static_cast<error_code>(p.partition_error_code);
      }
    }
    std::vector<txn_verification_answer> out;
    out.reserve(requests.size());
    for (const auto& request : requests) {
      auto& answer_of = out.emplace_back();
      const auto& by_partition = by_transaction[request.transactional_id];
      for (const auto& p : request.partitions) {
        auto it = by_partition.find(p);
        answer_of.push_back(it == by_partition.end() ? error_code::unknown_server_error : it->second);
      }
    }
    co_return out;
  }

  // The markers of partitions this node leads, through WriteTxnMarkers' own path without the request on the
  // wire (no encode, no loopback connection, no dispatch): the same checks, appends and acks=all wait.
  asio::awaitable<std::vector<coordinator::txn_marker_result>> write_locally(
      coordinator::txn_marker_request request) {
    const storage::txn_marker_request marker{
        .producer_id = request.producer_id,
        .producer_epoch = request.producer_epoch,
        .commit = request.commit,
        .coordinator_epoch = request.coordinator_epoch,
        .transaction_version = static_cast<int8_t>(request.transaction_version)};
    std::vector<handlers::txn_marker_write> writes;
    writes.reserve(request.partitions.size());
    for (const auto& p : request.partitions) writes.push_back({p.topic, p.partition, marker});
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options.request_timeout_ms);
    auto errors = co_await handlers::write_txn_markers_locally(*local, std::move(writes), deadline);
    std::vector<coordinator::txn_marker_result> results;
    results.reserve(request.partitions.size());
    for (size_t i = 0; i < request.partitions.size(); ++i)
      results.push_back({request.partitions[i], errors[i], false});
    co_return results;
  }

  // One WriteTxnMarkers to `leader` for the partitions of `request` it leads; the per-partition errors.
  asio::awaitable<std::vector<coordinator::txn_marker_result>> send_to(
      int32_t leader, coordinator::txn_marker_request request) {
    std::vector<coordinator::txn_marker_result> results;
    auto fail_all = [&results, &request](error_code e) {
      results.clear();
      for (const auto& p : request.partitions) results.push_back({p, e, false});
    };
    if (leader == options.node_id && local) co_return co_await write_locally(std::move(request));
    const auto image = metadata.current();
    auto b = image->brokers.find(leader);
    const auto* ep = b == image->brokers.end() ? nullptr : b->second.endpoint_for(options.listener_name);
    if (!ep || b->second.fenced) {
      fail_all(error_code::not_leader_or_follower);
      co_return results;
    }
    protocol::write_txn_markers_request req;
    auto& m = req.markers.emplace_back();
    m.producer_id = request.producer_id;
    m.producer_epoch = request.producer_epoch;
    m.transaction_result = request.commit;
    m.coordinator_epoch = request.coordinator_epoch;
    m.transaction_version = static_cast<int8_t>(request.transaction_version);
    for (const auto& p : request.partitions) {
      if (m.topics.empty() || m.topics.back().name != p.topic) m.topics.emplace_back().name = p.topic;
      m.topics.back().partition_indexes.push_back(p.partition);
    }
    std::vector<uint8_t> body;
    protocol::wire_writer w(body);
    req.encode(w, write_txn_markers_version);
    net::peer_address to{ep->host, static_cast<int32_t>(ep->port)};
    const bool flexible = protocol::write_txn_markers_request::is_flexible(write_txn_markers_version);
    auto answer = co_await peers.call(to, protocol::write_txn_markers_request::api_key,
                                      write_txn_markers_version, protocol::request_header_version(flexible),
                                      flexible ? 1 : 0, std::move(body), options.request_timeout_ms);
    if (!answer) {
      log->debug("WriteTxnMarkers to node {} failed: {}", leader, answer.error().message);
      fail_all(error_code::network_exception);
      co_return results;
    }
    protocol::write_txn_markers_response resp;
    protocol::wire_reader r(*answer);
    if (resp.decode(r, write_txn_markers_version) != protocol::decode_status::ok) {
      fail_all(error_code::unknown_server_error);
      co_return results;
    }
    std::map<coordinator::txn_partition, error_code> by_partition;
    for (const auto& marker : resp.markers) {
      if (marker.producer_id != request.producer_id) continue;
      for (const auto& t : marker.topics) {
        for (const auto& p : t.partitions)
          by_partition[{t.name, p.partition_index}] = static_cast<error_code>(p.error_code);
      }
    }
    for (const auto& p : request.partitions) {
      auto it = by_partition.find(p);
      results.push_back({p, it == by_partition.end() ? error_code::unknown_server_error : it->second, false});
    }
    co_return results;
  }
};

transaction_coordinator_driver::transaction_coordinator_driver(asio::io_context& home,
                                                               replication::replica_manager& replicas,
                                                               metadata::metadata_cache& metadata,
                                                               net::peer_client& peers,
                                                               producer_id_allocator& producer_ids,
                                                               transaction_coordinator_driver_options options)
    : _impl(std::make_unique<impl>(home, replicas, metadata, peers, producer_ids, std::move(options))) {
  auto* allocator = &producer_ids;
  _impl->txns = std::make_unique<coordinator::transaction_coordinator>(
      _impl->options.coordinator, *this, *this,
      [allocator]() -> result<int64_t> {
        return allocator->next_id([]() -> result<controller::producer_id_block> {
          return status::error(error_code::coordinator_load_in_progress, "no producer id block at hand");
        });
      },
      _impl->options.clock_ms);
  _impl->txns->set_deadline_listener([this](int64_t) { _impl->arm(); });
}

transaction_coordinator_driver::~transaction_coordinator_driver() {
  *_impl->alive = false;
}

coordinator::transaction_coordinator& transaction_coordinator_driver::coordinator() {
  return *_impl->txns;
}

void transaction_coordinator_driver::on_metadata(const metadata::metadata_image& image) {
  auto& txns = *_impl->txns;
  // The finalized transaction.version (kafka-features upgrade / downgrade) applies from the next transaction
  // record and internal abort on.
  const int16_t tv = controller::finalized_feature_level(image, controller::transaction_version_feature);
  if (tv != txns.transaction_version()) {
    _impl->log->info("transaction.version {} (was {})", tv, txns.transaction_version());
    txns.set_transaction_version(tv);
  }
  if (const auto* offsets = image.find_topic("__consumer_offsets")) {
    txns.set_offsets_topic_partitions(static_cast<int32_t>(offsets->partitions.size()));
  }
  std::map<int32_t, int32_t> led;  // partition -> leader epoch
  if (const auto* topic = image.find_topic(std::string(coordinator::transaction_state_topic_name))) {
    txns.set_state_log_partitions(static_cast<int32_t>(topic->partitions.size()));
    for (const auto& p : topic->partitions) {
      if (p.leader != _impl->options.node_id) continue;
      auto* replica = _impl->replicas.get(state_partition(p.partition));
      if (replica && replica->is_leader()) led[p.partition] = p.leader_epoch;
    }
  }
  for (int32_t p : txns.owned_partitions()) {
    auto it = led.find(p);
    if (it == led.end() || txns.coordinator_epoch(p) != it->second) {
      _impl->log->info("__transaction_state-{} is no longer led here (or under another epoch): unloading it",
                       p);
      _impl->loader.cancel(state_partition(p));
      txns.unload(p);
    }
  }
  for (const auto& [p, epoch] : led) {
    if (!txns.is_owned(p)) _impl->start_loading(p, epoch);
  }
}

void transaction_coordinator_driver::start() {
  _impl->stopped = false;
  _impl->arm();
}

void transaction_coordinator_driver::stop() {
  _impl->stopped = true;
  _impl->loader.cancel_all();
  _impl->timer.cancel();
}

void transaction_coordinator_driver::append(int32_t partition, coordinator::coordinator_record record,
                                            int32_t timeout_ms, std::function<void(error_code)> done) {
  // One batch per transition, as Kafka's TransactionStateManager appends: magic 2, no producer, create time
  // now, uncompressed.
  protocol::record_batch_builder builder;
  std::optional<std::span<const uint8_t>> value;
  if (record.value) value = std::span<const uint8_t>(*record.value);
  builder.add(_impl->now(), std::span<const uint8_t>(record.key), value);
  append_committed(_impl->home, _impl->replicas, state_partition(partition), builder.build(), timeout_ms,
                   _impl->alive, std::move(done));
}

void transaction_coordinator_driver::set_local_services(const broker_services* services) {
  _impl->local = services;
}

void transaction_coordinator_driver::send(
    coordinator::txn_marker_request request,
    std::function<void(std::vector<coordinator::txn_marker_result>)> done) {
  // Group the partitions by their current leader.
  const auto image = _impl->metadata.current();
  std::map<int32_t, coordinator::txn_marker_request> by_leader;
  auto results = std::make_shared<std::vector<coordinator::txn_marker_result>>();
  for (const auto& p : request.partitions) {
    const auto* topic = image->find_topic(p.topic);
    if (!topic || p.partition < 0 || p.partition >= static_cast<int32_t>(topic->partitions.size())) {
      results->push_back({p, error_code::unknown_topic_or_partition, true});
      continue;
    }
    const int32_t leader = topic->partitions[static_cast<size_t>(p.partition)].leader;
    if (leader < 0) {
      results->push_back({p, error_code::not_leader_or_follower, false});
      continue;
    }
    auto& r = by_leader[leader];
    if (r.partitions.empty()) {
      r = request;
      r.partitions.clear();
    }
    r.partitions.push_back(p);
  }
  auto finish =
      std::make_shared<std::function<void(std::vector<coordinator::txn_marker_result>)>>(std::move(done));
  auto outstanding = std::make_shared<size_t>(by_leader.size());
  if (by_leader.empty()) {
    asio::post(_impl->home, [finish, results] { (*finish)(std::move(*results)); });
    return;
  }
  for (auto& entry : by_leader) {
    asio::co_spawn(
        _impl->home,
        [impl = _impl.get(), alive = _impl->alive, leader = entry.first, part = std::move(entry.second),
         results, outstanding, finish]() mutable -> asio::awaitable<void> {
          auto got = co_await impl->send_to(leader, std::move(part));
          if (!*alive) co_return;
          results->insert(results->end(), got.begin(), got.end());
          if (--*outstanding == 0) (*finish)(std::move(*results));
        },
        asio::detached);
  }
}

void transaction_coordinator_driver::verify(txn_verification_request request,
                                            std::function<void(txn_verification_answer)> done) {
  const size_t n = request.partitions.size();
  auto& txns = *_impl->txns;
  const auto image = _impl->metadata.current();
  const int32_t state_partition_index = txns.partition_for(request.transactional_id);
  const auto* topic = image->find_topic(std::string(coordinator::transaction_state_topic_name));
  const int32_t leader = topic && state_partition_index < static_cast<int32_t>(topic->partitions.size())
                             ? topic->partitions[static_cast<size_t>(state_partition_index)].leader
                             : -1;
  if (leader < 0) {
    done(txn_verification_answer(n, error_code::coordinator_not_available));
    return;
  }
  if (leader != _impl->options.node_id) {
    _impl->queue_verification(leader, std::move(request), std::move(done));
    return;
  }
  std::vector<coordinator::txn_partition> partitions;
  for (const auto& [t, p] : request.partitions) partitions.push_back({t, p});
  if (request.add) {
    std::set<coordinator::txn_partition> added(partitions.begin(), partitions.end());
    txns.add_partitions(request.transactional_id, request.producer_id, request.producer_epoch,
                        std::move(added), 2,
                        [n, done = std::move(done)](error_code e) { done(txn_verification_answer(n, e)); });
    return;
  }
  auto verified = txns.verify_partitions(request.transactional_id, request.producer_id,
                                         request.producer_epoch, partitions);
  std::map<coordinator::txn_partition, error_code> by_partition(verified.begin(), verified.end());
  txn_verification_answer out;
  for (const auto& p : partitions) {
    auto it = by_partition.find(p);
    out.push_back(it == by_partition.end() ? error_code::unknown_server_error : it->second);
  }
  done(std::move(out));
}

}  // namespace mala::broker
