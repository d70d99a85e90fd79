// A node's data path inside one process for the broker unit tests: a real log_manager in a temporary
// directory, real replica_managers (one per shard) whose partitions lead through apply_leadership, a
// shard_pool running its threads, the group coordinator on the home shard with its __consumer_offsets
// partition, a metadata image naming the topics, and the broker_dispatcher that requests go through.
// Parameterised by the shard count (replica_placement spreads the partitions over the shards); requests come
// in on any shard, as connections do.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <asio/co_spawn.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mala/broker/broker_dispatcher.h"
#include "mala/broker/fetch_sessions.h"
#include "mala/broker/group_coordinator_driver.h"
#include "mala/broker/handler_table.h"
#include "mala/broker/request_context.h"
#include "mala/net/shard_pool.h"
#include "mala/protocol/messages/delete_records_request.h"
#include "mala/protocol/messages/delete_records_response.h"
#include "mala/protocol/messages/fetch_request.h"
#include "mala/protocol/messages/fetch_response.h"
#include "mala/protocol/messages/list_offsets_request.h"
#include "mala/protocol/messages/list_offsets_response.h"
#include "mala/protocol/messages/produce_request.h"
#include "mala/protocol/messages/produce_response.h"
#include "mala/protocol/record_batch.h"
#include "mala/replication/replica_manager.h"
#include "mala/storage/log_manager.h"

namespace mala::broker {
namespace {

using namespace mala::protocol;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr int32_t self = 1;
constexpr int64_t start_ms = 1'700'000'000'000;

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// `records` records with timestamps ts, ts+1, ...; an idempotent producer's batch when producer_id >= 0.
std::vector<uint8_t> batch(int records, int64_t ts = start_ms, int64_t producer_id = -1, int16_t epoch = -1,
                           int32_t sequence = -1) {
  record_batch_builder b;
  if (producer_id >= 0) b.producer(producer_id, epoch, sequence);
  const std::string value = "value";
  for (int r = 0; r < records; ++r) b.add(ts + r, std::nullopt, bytes_of(value));
  return b.build();
}

// Base offsets and record counts of the batches in a fetch response's records.
std::vector<std::pair<int64_t, int32_t>> batches_in(const records_view& records) {
  std::vector<std::pair<int64_t, int32_t>> out;
  batch_splitter splitter(records.bytes);
  while (auto b = splitter.next()) {
    auto h = parse_batch_header(*b);
    out.emplace_back(h->base_offset, h->record_count);
  }
  EXPECT_TRUE(splitter.ok());
  return out;
}

class shard_node_test : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override {
    _root = std::filesystem::temp_directory_path() /
            ("mala-produce-fetch-test-" + std::to_string(std::random_device{}()));
    storage::log_manager_options lo;
    lo.dirs = {_root / "data"};
    lo.clock_ms = [this] { return _now.load(); };
    auto logs = storage::log_manager::open(std::move(lo));
    ASSERT_TRUE(logs.ok()) << logs.error().message;
    _logs = std::move(*logs);
    replication::replica_manager_options ro;
    ro.local_replica_id = self;
    ro.clock_ms = [this] { return _now.load(); };
    _placement = replication::replica_placement(GetParam());
    for (size_t shard = 0; shard < GetParam(); ++shard) {
      ro.shard = static_cast<int>(shard);
      _managers.push_back(std::make_unique<replication::replica_manager>(*_logs, ro));
    }

    auto image = std::make_shared<metadata::metadata_image>();
    image->cluster_id = "test-cluster";
    image->controller_id = self;
    for (int32_t id : {1, 2}) {
      metadata::broker_registration b;
      b.id = id;
      b.endpoints.push_back(
          {"PLAINTEXT", "broker-" + std::to_string(id), static_cast<uint16_t>(9090 + id), "PLAINTEXT"});
      image->brokers[id] = b;
    }
    add_topic(*image, "orders", 2, self, {self}, {self});
    add_topic(*image, "replicated", 1, self, {self, 2}, {self, 2});  // a follower that never fetches
    add_topic(*image, "elsewhere", 1, 2, {self, 2}, {self, 2});      // led by node 2
    add_topic(*image, "small", 1, self, {self}, {self});
    add_topic(*image, "spread", 8, self, {self, 2}, {self, 2});  // over every shard, node 2 in the ISR
    add_topic(*image, "events", 6, self, {self}, {self});        // over every shard, led here alone
    add_topic(*image, "__consumer_offsets", 1, self, {self}, {self}, /*internal=*/true);
    // leader.replication.throttled.replicas names this node's replica: node 2 in the ISR, node 3 not.
    add_topic(*image, "throttled", 1, self, {self, 2, 3}, {self, 2});
    _image = image;
    cache.publish(image);

    for (const auto& [name, topic] : image->topics) {
      for (const auto& p : topic.partitions) {
        replication::partition_leadership l;
        l.topic = name;
        l.partition = p.partition;
        l.topic_id = topic.id;
        l.state = {p.leader, p.leader_epoch, p.partition_epoch, p.replicas, p.isr, 1};
        if (name == "small") l.log_config.max_message_bytes = 200;
        l.state.leader_throttled = name == "throttled";
        _placement.place({name, p.partition});  // as the metadata publisher does
        auto applied = replicas_of(name, p.partition).apply_leadership(l);
        ASSERT_TRUE(applied.ok()) << applied.error().message;
      }
    }

    fetch_session_cache_config fc;
    fc.session_id_seed = 7;
    _sessions = std::make_unique<sharded_fetch_session_cache>(fc, GetParam());
    _pool = std::make_unique<net::shard_pool>(GetParam());
    services.node_id = self;
    services.metadata = &cache;
    services.handlers = &table;
    services.shards = _pool.get();
    services.home_shard = 0;
    services.placement = _placement;
    for (auto& m : _managers) services.replicas_by_shard.push_back(m.get());
    services.fetch_sessions = _sessions.get();
    services.clock_ms = [this] { return _now.load(); };
    services.leader_replication_quota = &leader_throttle;
    // The group coordinator on the home shard with the replicas of shard 0 (__consumer_offsets lives there);
    // a new group rebalances at once, and its clock is the test's (records it writes carry its timestamps).
    group_coordinator_driver_options go;
    go.node_id = self;
    go.coordinator.offsets_topic_num_partitions = 1;
    go.coordinator.initial_rebalance_delay_ms = 0;
    go.clock_ms = [this] { return _now.load(); };
    _groups = std::make_unique<group_coordinator_driver>(_pool->context(0), *_managers[0], std::move(go));
    services.groups = &_groups->coordinator();
    _dispatcher = std::make_unique<broker_dispatcher>(services);
    connection.listener_name = "PLAINTEXT";
    _pool->start();
    on_home([this] {
      _groups->on_metadata(*_image);
      _groups->start();
      return 0;
    });
  }

  void TearDown() override {
    on_home([this] {
      _groups->stop();
      return 0;
    });
    _pool->stop();
    _pool->join();
    _dispatcher.reset();
    _groups.reset();
    // As the node closes: the replicas go while the shards' io_contexts still exist (stopped), since a waiter
    // whose withdrawal was still queued fires as its partition stops and posts to its request's shard.
    _managers.clear();
    _pool.reset();
    _logs.reset();
    std::filesystem::remove_all(_root);
  }

  static void add_topic(metadata::metadata_image& image, const std::string& name, int32_t partitions,
                        int32_t leader, std::vector<int32_t> replicas, std::vector<int32_t> isr,
                        bool internal = false) {
    metadata::topic_metadata t;
    t.name = name;
    t.id = uuid::random();
    t.internal = internal;
    for (int32_t p = 0; p < partitions; ++p) {
      metadata::partition_state s;
      s.partition = p;
      s.leader = leader;
      s.leader_epoch = 3;
      s.partition_epoch = 3;
      s.replicas = replicas;
      s.isr = isr;
      t.partitions.push_back(s);
    }
    image.topics[name] = t;
  }

  uuid topic_id(const std::string& name) const { return _image->find_topic(name)->id; }

  template <typename Request>
  static std::vector<uint8_t> frame(int16_t key, int16_t version, const Request& body,
                                    std::string client_id = "unit-test") {
    std::vector<uint8_t> out;
    wire_writer w(out);
    request_header h{key, version, 42, std::move(client_id)};
    encode_request_header(w, h, request_header_version(Request::is_flexible(version)));
    body.encode(w, version);
    return out;
  }

  // Dispatches on the thread of `shard` (as a connection of that shard would; the home shard unless given);
  // the future gives the result.
  std::future<net::dispatch_result> start(std::vector<uint8_t> bytes, net::connection_info* conn = nullptr,
                                          size_t shard = 0) {
    net::connection_info* c = conn ? conn : &connection;
    return asio::co_spawn(
        _pool->context(shard),
        [this, c, b = std::move(bytes)]() mutable -> asio::awaitable<net::dispatch_result> {
          net::ordering_point order;
          co_return co_await _dispatcher->dispatch(*c, b, order);
        },
        asio::use_future);
  }

  net::dispatch_result send(std::vector<uint8_t> bytes) { return start(std::move(bytes)).get(); }
  // Sends from a connection of `shard` (taken modulo the shard count) and decodes the answer.
  template <typename Response, typename Request>
  Response call(size_t shard, int16_t version, const Request& body) {
    return decode<Response>(start(frame(Request::api_key, version, body), nullptr, shard % GetParam()).get(),
                            version);
  }

  // A dispatch with an ordering point (as a connection gives it) whose release by the handler `released`
  // reports; the connection, not the dispatcher, releases it at completion, so `released` stays pending for a
  // handler that does not release early.
  struct ordered_dispatch {
    std::future<net::dispatch_result> result;
    std::future<void> released;
    // Kept here: a promise destroyed unset (the dispatch's frame gone) would make `released` ready.
    std::shared_ptr<std::promise<void>> release;
  };
  ordered_dispatch start_ordered(std::vector<uint8_t> bytes) {
    auto release = std::make_shared<std::promise<void>>();
    ordered_dispatch out;
    out.released = release->get_future();
    out.release = release;
    out.result = asio::co_spawn(
        _pool->context(0),
        [this, b = std::move(bytes), release]() mutable -> asio::awaitable<net::dispatch_result> {
          net::ordering_point order([release] { release->set_value(); });
          co_return co_await _dispatcher->dispatch(connection, b, order);
        },
        asio::use_future);
    return out;
  }

  template <typename Response>
  static Response decode(const net::dispatch_result& result, int16_t version) {
    Response resp;
    EXPECT_EQ(result.what, net::dispatch_result::action::respond) << result.close_reason;
    if (result.what != net::dispatch_result::action::respond) return resp;
    wire_reader r(result.response);
    EXPECT_EQ(r.read_int32(), 42);
    if (Response::is_flexible(version)) r.read_uvarint();
    EXPECT_EQ(resp.decode(r, version), decode_status::ok);
    return resp;
  }

  static produce_request produce_req(const std::string& topic, int32_t partition,
                                     const std::vector<uint8_t>& records, int16_t acks = -1,
                                     int32_t timeout_ms = 5000) {
    produce_request req;
    req.acks = acks;
    req.timeout_ms = timeout_ms;
    auto& t = req.topic_data.emplace_back();
    t.name = topic;
    auto& p = t.partition_data.emplace_back();
    p.index = partition;
    p.records = records_view::of(records);
    return req;
  }

  produce_response::partition_produce_response produce(const std::string& topic, int32_t partition,
                                                       const std::vector<uint8_t>& records, int16_t acks = -1,
                                                       int16_t version = 11) {
    auto resp = decode<produce_response>(
        send(frame(0, version, produce_req(topic, partition, records, acks))), version);
    EXPECT_EQ(resp.responses.size(), 1u);
    if (resp.responses.empty() || resp.responses[0].partition_responses.empty()) return {};
    return resp.responses[0].partition_responses[0];
  }

  // Topic ids are filled in for every known topic (versions before 13 do not send them).
  fetch_request fetch_req(std::vector<std::tuple<std::string, int32_t, int64_t>> partitions,
                          int32_t max_wait_ms = 0, int32_t min_bytes = 1) const {
    fetch_request req;
    req.replica_id = -1;
    req.max_wait_ms = max_wait_ms;
    req.min_bytes = min_bytes;
    req.max_bytes = 50 << 20;
    for (const auto& [topic, partition, offset] : partitions) {
      if (req.topics.empty() || req.topics.back().topic != topic) {
        auto& t = req.topics.emplace_back();
        t.topic = topic;
        if (_image->find_topic(topic)) t.topic_id = topic_id(topic);
      }
      auto& p = req.topics.back().partitions.emplace_back();
      p.partition = partition;
      p.fetch_offset = offset;
      p.partition_max_bytes = 1 << 20;
    }
    return req;
  }

  // Sends and keeps the raw response alive with the decoded one (records point into it).
  struct fetched {
    net::dispatch_result raw;
    fetch_response resp;
    const fetch_response::partition_data& partition(size_t topic = 0, size_t index = 0) const {
      return resp.responses.at(topic).partitions.at(index);
    }
  };
  fetched fetch(const fetch_request& req, int16_t version) {
    fetched out;
    out.raw = send(frame(1, version, req));
    out.resp = decode<fetch_response>(out.raw, version);
    return out;
  }

  list_offsets_response::list_offsets_partition_response list_offset(const std::string& topic,
                                                                     int64_t timestamp, int16_t version = 10,
                                                                     int32_t current_leader_epoch = -1,
                                                                     int8_t isolation = 0) {
    list_offsets_request req;
    req.replica_id = -1;
    req.isolation_level = isolation;
    auto& t = req.topics.emplace_back();
    t.name = topic;
    auto& p = t.partitions.emplace_back();
    p.partition_index = 0;
    p.timestamp = timestamp;
    p.current_leader_epoch = current_leader_epoch;
    auto resp = decode<list_offsets_response>(send(frame(2, version, req)), version);
    EXPECT_EQ(resp.topics.size(), 1u);
    if (resp.topics.empty() || resp.topics[0].partitions.empty()) return {};
    return resp.topics[0].partitions[0];
  }

  delete_records_response::delete_records_partition_result delete_records(const std::string& topic,
                                                                          int64_t offset,
                                                                          int32_t timeout_ms = 1000) {
    delete_records_request req;
    req.timeout_ms = timeout_ms;
    auto& t = req.topics.emplace_back();
    t.name = topic;
    t.partitions.push_back({0, offset});
    auto resp = decode<delete_records_response>(send(frame(21, 2, req)), 2);
    EXPECT_EQ(resp.topics.size(), 1u);
    if (resp.topics.empty() || resp.topics[0].partitions.empty()) return {};
    return resp.topics[0].partitions[0];
  }

  size_t shard_of(const std::string& topic, int32_t partition) const {
    return _placement.shard_of(topic, partition);
  }
  replication::replica_manager& replicas_of(const std::string& topic, int32_t partition) {
    return *_managers[shard_of(topic, partition)];
  }
  // Runs fn on the home shard (where the group coordinator lives) and returns its result.
  template <typename Fn>
  auto on_home(Fn fn) -> decltype(fn()) {
    using value = decltype(fn());
    return asio::co_spawn(
               _pool->context(0), [f = std::move(fn)]() mutable -> asio::awaitable<value> { co_return f(); },
               asio::use_future)
        .get();
  }
  // Runs fn on the shard owning the partition (its replica may be touched only there) and returns its result.
  template <typename Fn>
  auto on_owner(const std::string& topic, int32_t partition, Fn fn) -> decltype(fn()) {
    using value = decltype(fn());
    return asio::co_spawn(
               _pool->context(shard_of(topic, partition)),
               [f = std::move(fn)]() mutable -> asio::awaitable<value> { co_return f(); }, asio::use_future)
        .get();
  }

  std::filesystem::path _root;
  std::atomic<int64_t> _now{start_ms};
  std::unique_ptr<storage::log_manager> _logs;
  replication::replica_placement _placement;
  std::vector<std::unique_ptr<replication::replica_manager>> _managers;  // by shard
  std::unique_ptr<sharded_fetch_session_cache> _sessions;
  std::unique_ptr<net::shard_pool> _pool;
  std::unique_ptr<group_coordinator_driver> _groups;
  std::unique_ptr<broker_dispatcher> _dispatcher;
  metadata::metadata_image_ptr _image;
  metadata::metadata_cache cache;
  handler_table table;
  broker_services services;
  replication::replication_quota leader_throttle;  // leader.replication.throttled.rate: no bound unless set
  net::connection_info connection;
};

}  // namespace
}  // namespace mala::broker
