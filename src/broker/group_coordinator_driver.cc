#include "mala/broker/group_coordinator_driver.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "mala/broker/coordinator_log.h"
#include "mala/common/config.h"
#include "mala/common/logging.h"
#include "mala/coordinator/group_placement.h"
#include "mala/protocol/record_batch.h"
#include "mala/replication/replica_manager.h"

namespace mala::broker {

namespace {

replication::topic_partition offsets_partition(int32_t partition) {
  return {std::string(coordinator::offsets_topic_name), partition};
}

}  // namespace

group_coordinator_driver_options group_coordinator_options_from(const node_config& config) {
  group_coordinator_driver_options o;
  o.node_id = config.node_id();
  auto& c = o.coordinator;
  c.offsets_topic_num_partitions = config.get_int("offsets.topic.num.partitions").value_or(50);
  c.initial_rebalance_delay_ms = config.get_int("group.initial.rebalance.delay.ms").value_or(3000);
  c.min_session_timeout_ms = config.get_int("group.min.session.timeout.ms").value_or(6000);
  c.max_session_timeout_ms = config.get_int("group.max.session.timeout.ms").value_or(1'800'000);
  c.max_group_size = config.get_int("group.max.size").value_or(INT32_MAX);
  c.offsets_retention_ms = int64_t{config.get_int("offsets.retention.minutes").value_or(10080)} * 60'000;
  c.offsets_retention_check_interval_ms =
      config.get_long("offsets.retention.check.interval.ms").value_or(600'000);
  c.offset_metadata_max_bytes = config.get_int("offset.metadata.max.bytes").value_or(4096);
  c.consumer_heartbeat_interval_ms = config.get_int("group.consumer.heartbeat.interval.ms").value_or(5000);
  c.consumer_session_timeout_ms = config.get_int("group.consumer.session.timeout.ms").value_or(45000);
  c.consumer_max_size = config.get_int("group.consumer.max.size").value_or(INT32_MAX);
  if (auto assignors = config.get_list("group.consumer.assignors")) {
    // Kafka also takes class names (org.apache.kafka.coordinator.group.assignor.UniformAssignor); their
    // short names are what ConsumerGroupHeartbeat's ServerAssignor carries.
    c.consumer_assignors.clear();
    for (std::string name : *assignors) {
      if (name.ends_with("UniformAssignor")) name = "uniform";
      if (name.ends_with("RangeAssignor")) name = "range";
      if (!name.empty()) c.consumer_assignors.push_back(name);
    }
  }
  c.consumer_migration_policy =
      config.get_string("group.consumer.migration.policy").value_or("bidirectional");
  o.commit_timeout_ms = config.get_int("offsets.commit.timeout.ms").value_or(5000);
  o.load_buffer_bytes = config.get_int("offsets.load.buffer.size").value_or(5 << 20);
  // Kafka's codec ids are the batch attribute's compression bits (the config's bounds keep it 0..4).
  o.compression =
      static_cast<protocol::compression_codec>(config.get_int("offsets.topic.compression.codec").value_or(0));
  return o;
}

struct group_coordinator_driver::impl {
  asio::io_context& home;
  replication::replica_manager& replicas;
  group_coordinator_driver_options options;
  std::unique_ptr<coordinator::group_coordinator> groups;
  asio::steady_timer timer;
  uint64_t timer_generation = 0;  // a wait from an earlier arm() ignores its completion
  bool stopped = false;
  partition_log_loader loader;
  std::shared_ptr<spdlog::logger> log = subsystem_logger("coordinator");
  // Guards callbacks posted to the io_context against running after the driver is gone.
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);

  impl(asio::io_context& h, replication::replica_manager& r, group_coordinator_driver_options o)
      : home(h), replicas(r), options(std::move(o)), timer(h), loader(h, r, options.load_buffer_bytes) {}

  int64_t now() const { return options.clock_ms(); }

  void arm() {
    if (stopped) return;
    const uint64_t generation = ++timer_generation;
    auto deadline = groups->next_deadline();
    timer.cancel();
    if (!deadline) return;
    const int64_t delay = std::max<int64_t>(0, *deadline - now());
    timer.expires_after(std::chrono::milliseconds(delay));
    timer.async_wait([this, generation, alive = alive](const std::error_code& ec) {
      if (ec || !*alive || stopped || generation != timer_generation) return;
      groups->run_expired_timers();
      arm();
    });
  }

  // --- Loading

  void start_loading(int32_t partition) {
    auto* replica = replicas.get(offsets_partition(partition));
    if (!replica) return;
    groups->begin_loading(partition);
    log->info("loading __consumer_offsets-{} from offset {} to {}", partition, replica->log_start_offset(),
              replica->log_end_offset());
    loader.load(
        offsets_partition(partition),
        [this, partition](std::span<const uint8_t> batch, const protocol::record_batch_view& view,
                          int64_t next) { replay_batch(partition, batch, view, next); },
        [this, partition, alive = alive](bool loaded) {
          if (!*alive || !loaded || stopped) return;  // not the leader any more: the next image unloads it
          groups->complete_loading(partition);
          arm();
        });
  }

  void replay_batch(int32_t partition, std::span<const uint8_t> batch,
                    const protocol::record_batch_view& view, int64_t next) {
    if (view.is_control()) {
      // A transaction marker ends its producer's pending offsets, in log order with the records.
      if (auto marker = replication::decode_txn_marker_batch(batch)) {
        auto st = groups->replay_marker(partition, marker->producer_id, marker->is_commit());
        if (!st.ok()) {
          log->warn("__consumer_offsets-{} offset {}: marker skipped: {}", partition, view.base_offset(),
                    st.message);
        }
      }
      return;
    }
    // A transactional batch's offsets stay pending under its producer id until its marker.
    const int64_t producer_id =
        view.is_transactional() ? view.header().producer_id : protocol::no_producer_id;
    std::vector<uint8_t> decompressed;
    auto reader = view.records(decompressed);
    for (const auto& record : reader) {
      const int64_t offset = view.offset_of(record);
      if (offset < next || !record.key) continue;
      auto st = groups->replay(partition, offset, *record.key, record.value, producer_id);
      if (!st.ok())
        log->warn("__consumer_offsets-{} offset {}: record skipped: {}", partition, offset, st.message);
    }
    if (!reader.ok()) {
      log->warn("__consumer_offsets-{}: batch at {} unreadable ({})", partition, view.base_offset(),
                protocol::batch_status_name(reader.status()));
    }
  }
};

group_coordinator_driver::group_coordinator_driver(asio::io_context& home,
                                                   replication::replica_manager& replicas,
                                                   group_coordinator_driver_options options)
    : _impl(std::make_unique<impl>(home, replicas, std::move(options))) {
  _impl->groups = std::make_unique<coordinator::group_coordinator>(_impl->options.coordinator, *this,
                                                                   _impl->options.clock_ms);
  _impl->groups->set_deadline_listener([this](int64_t) { _impl->arm(); });
}

group_coordinator_driver::~group_coordinator_driver() {
  *_impl->alive = false;
}

coordinator::group_coordinator& group_coordinator_driver::coordinator() {
  return *_impl->groups;
}

void group_coordinator_driver::on_metadata(const metadata::metadata_image& image) {
  auto& groups = *_impl->groups;
  // Consumer group subscriptions resolve against the topics of this image.
  coordinator::topic_catalog catalog;
  for (const auto& [name, topic] : image.topics) {
    catalog.by_name[name] =
        coordinator::topic_info{name, topic.id, static_cast<int32_t>(topic.partitions.size()),
                                topic.internal || name.starts_with("__")};
  }
  groups.set_topics(std::move(catalog));
  std::set<int32_t> led;
  if (const auto* topic = image.find_topic(std::string(coordinator::offsets_topic_name))) {
    groups.set_partition_count(static_cast<int32_t>(topic->partitions.size()));
    for (const auto& p : topic->partitions) {
      if (p.leader != _impl->options.node_id) continue;
      auto* replica = _impl->replicas.get(offsets_partition(p.partition));
      if (replica && replica->is_leader()) led.insert(p.partition);
    }
  }
  for (int32_t p : groups.owned_partitions()) {
    if (!led.contains(p)) {
      _impl->log->info("__consumer_offsets-{} is no longer led here: unloading its groups", p);
      _impl->loader.cancel(offsets_partition(p));
      groups.unload(p);
    }
  }
  for (int32_t p : led) {
    if (groups.status_of(p) == coordinator::partition_status::not_owned) _impl->start_loading(p);
  }
}

void group_coordinator_driver::start() {
  _impl->stopped = false;
  _impl->arm();
}

void group_coordinator_driver::stop() {
  _impl->stopped = true;
  _impl->loader.cancel_all();
  _impl->timer.cancel();
}

void group_coordinator_driver::append(int32_t partition, std::vector<coordinator::coordinator_record> records,
                                      std::optional<coordinator::transactional_producer> producer,
                                      append_callback done) {
  // One batch per write, as the coordinator runtime appends them: magic 2, create time now, compressed with
  // offsets.topic.compression.codec (none by default); a TxnOffsetCommit's batch carries its producer and the
  // transactional attribute (sequence 0, as Kafka's coordinator writes it: sequences are not checked for the
  // coordinator's own writes).
  protocol::record_batch_builder builder;
  builder.compression(_impl->options.compression);
  if (producer) builder.producer(producer->producer_id, producer->producer_epoch, 0).transactional();
  const int64_t now = _impl->now();
  for (const auto& r : records) {
    std::optional<std::span<const uint8_t>> value;
    if (r.value) value = std::span<const uint8_t>(*r.value);
    builder.add(now, std::span<const uint8_t>(r.key), value);
  }
  auto batch = builder.build();
  const std::optional<uint64_t> guard = producer ? producer->verification_guard : std::nullopt;
  append_with(
      partition,
      [&batch, guard](replication::partition& replica) {
        return replica.append(batch, -1, replication::append_origin::coordinator, guard);
      },
      std::move(done));
}

void group_coordinator_driver::append_marker(int32_t partition, const coordinator::txn_marker_write& marker,
                                             append_callback done) {
  // The end-transaction control batch a partition leader writes for WriteTxnMarkers; for __consumer_offsets
  // the group coordinator writes it itself, ordered with its own writes (Kafka's completeTransaction).
  // The partition's marker path checks the coordinator epoch and the transactions v2 epoch rule.
  const storage::txn_marker_request m{.producer_id = marker.producer_id,
                                      .producer_epoch = marker.producer_epoch,
                                      .commit = marker.commit,
                                      .coordinator_epoch = marker.coordinator_epoch,
                                      .transaction_version = marker.transaction_version};
  append_with(
      partition, [&m](replication::partition& replica) { return replica.append_txn_marker(m); },
      std::move(done));
}

void group_coordinator_driver::append_with(
    int32_t partition,
    const std::function<result<replication::append_outcome>(replication::partition&)>& append,
    append_callback done) {
  auto& home = _impl->home;
  // Completions never run inside append() (the coordinator's contract): they are posted to the home shard.
  auto complete = [&home, done = std::move(done)](error_code e, int64_t first_offset) mutable {
    asio::post(home, [done = std::move(done), e, first_offset]() mutable {
      done(e, e == error_code::none ? first_offset : -1);
    });
  };
  auto* replica = _impl->replicas.get(offsets_partition(partition));
  if (!replica) return complete(error_code::not_leader_or_follower, -1);
  auto appended = append(*replica);
  if (!appended) return complete(appended.error().code, -1);
  const int64_t first_offset = appended->appended.first_offset;
  if (appended->done) return complete(appended->error, first_offset);

  // acks=-1: wait until the high watermark passes the batch, at most offsets.commit.timeout.ms.
  struct pending {
    explicit pending(asio::io_context& io) : timer(io) {}
    bool fired = false;
    asio::steady_timer timer;
    replication::waiter_handle handle;
  };
  auto state = std::make_shared<pending>(home);
  auto finish = std::make_shared<std::function<void(error_code, int64_t)>>(std::move(complete));
  state->handle = replica->add_high_watermark_waiter(appended->required_offset,
                                                     [state, finish, first_offset](error_code e) {
                                                       if (state->fired) return;
                                                       state->fired = true;
                                                       state->timer.cancel();
                                                       (*finish)(e, first_offset);
                                                     });
  if (state->fired) return;
  state->timer.expires_after(std::chrono::milliseconds(_impl->options.commit_timeout_ms));
  auto* replicas = &_impl->replicas;
  state->timer.async_wait(
      [state, finish, replicas, partition, alive = _impl->alive](const std::error_code& ec) {
        if (ec || state->fired) return;
        state->fired = true;
        if (*alive) {
          if (auto* r = replicas->get(offsets_partition(partition))) r->cancel_waiter(state->handle);
        }
        (*finish)(error_code::request_timed_out, -1);
      });
}

}  // namespace mala::broker
