#include "mala/raft/raft_node.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <limits>
#include <utility>

#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>

#include "mala/common/logging.h"
#include "mala/net/peer_client.h"
#include "mala/raft/quorum_state_file.h"
#include "mala/raft/rpc_codec.h"

namespace mala::raft {

namespace {

int64_t steady_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool is_response(const raft_message_body& body) {
  return std::holds_alternative<vote_response>(body) ||
         std::holds_alternative<begin_quorum_epoch_response>(body) ||
         std::holds_alternative<end_quorum_epoch_response>(body) ||
         std::holds_alternative<fetch_response>(body) ||
         std::holds_alternative<fetch_snapshot_response>(body) ||
         std::holds_alternative<update_voter_response>(body);
}

// The answer to `request` when the replica gave none in time.
raft_message_body timed_out_answer(const raft_message_body& request) {
  constexpr auto code = error_code::request_timed_out;
  if (std::holds_alternative<vote_request>(request)) {
    vote_response r;
    r.error_code = code;
    r.pre_vote = std::get<vote_request>(request).pre_vote;
    return r;
  }
  if (std::holds_alternative<begin_quorum_epoch_request>(request)) {
    begin_quorum_epoch_response r;
    r.error_code = code;
    return r;
  }
  if (std::holds_alternative<end_quorum_epoch_request>(request)) {
    end_quorum_epoch_response r;
    r.error_code = code;
    return r;
  }
  if (std::holds_alternative<fetch_snapshot_request>(request)) {
    fetch_snapshot_response r;
    r.error_code = code;
    return r;
  }
  fetch_response r;
  r.error_code = code;
  return r;
}

}  // namespace

struct raft_node::impl : std::enable_shared_from_this<impl> {
  impl(asio::io_context& io_, raft_node_options options_, std::unique_ptr<partition_raft_log> log_,
       quorum_state_file state_file_, std::optional<quorum_state> persisted)
      : io(io_),
        options(std::move(options_)),
        log(std::move(log_)),
        state_file(std::move(state_file_)),
        node(options.config, *log, persisted, steady_now_ms()),
        client(io_, "mala-raft-" + std::to_string(options.config.node_id), options.client),
        timer(io_),
        logger(subsystem_logger("raft")) {}

  struct pending_inbound {
    int32_t from;
    raft_message_body request;
    response_callback respond;
    int64_t deadline_ms;
  };

  asio::io_context& io;
  raft_node_options options;
  std::unique_ptr<partition_raft_log> log;
  quorum_state_file state_file;
  replica node;
  net::peer_client client;
  asio::steady_timer timer;
  std::shared_ptr<spdlog::logger> logger;
  bool running = false;
  int64_t next_inbound_correlation = int64_t{1} << 50;
  std::map<std::pair<int32_t, int64_t>, pending_inbound> inbound;
  std::vector<std::function<void()>> listeners;
  std::function<bool()> fetch_gate;  // set_fetch_gate()
  // The newest Fetch waiting for the gate (an older one it replaced is obsolete), and since when one waits:
  // after max_fetch_hold_ms it goes anyway, well within the leader's fetch timeout.
  std::optional<outbound_message> gated;
  int64_t gated_since_ms = 0;
  static constexpr int64_t max_fetch_hold_ms = 500;
  // AddRaftVoter / RemoveRaftVoter requests waiting for the replica's answer, by request id.
  std::map<int64_t, std::function<void(voter_change_answer)>> voter_changes;
  int64_t next_voter_change = 1;
  std::map<int32_t, voter_endpoint> learned_endpoints;  // from Fetch answers' NodeEndpoints
  std::optional<offset_and_epoch> installed_snapshot;
  uint64_t snapshots_installed = 0;
  // The node's blocking thread: the quorum-state writes, the log's syncs (one persistence job at a time) and
  // the snapshot files (create_snapshot, one at a time). Nothing on `io` waits for it.
  asio::thread_pool blocking{1};
  bool snapshot_in_flight = false;

  // Persistence. A step whose effects need the quorum state written or the log synced holds its messages
  // and its listener call until a persistence job that started after the step completed; every later step's
  // are held behind them, so they leave in step order. The replica goes on meanwhile: what it appends while a
  // job runs is made durable by the next job (group commit), and the leader counts its own log toward the
  // high watermark only once synced (replica::on_log_flushed).
  struct held_step {
    std::vector<outbound_message> messages;
    std::optional<offset_and_epoch> snapshot_installed;
    uint64_t job = 0;  // the persistence job it waits for; 0: none of its own
  };
  std::deque<held_step> held;
  std::optional<quorum_state> state_to_write;  // for the next job
  bool log_to_sync = false;                    // for the next job
  uint64_t jobs_started = 0;
  uint64_t jobs_done = 0;
  bool job_in_flight = false;
  // The lowest offset the log was truncated to while the job in flight ran: its sync covers the log only
  // below it (what comes after was rewritten and goes with the next job).
  int64_t truncated_during_job = std::numeric_limits<int64_t>::max();

  // What listeners last saw.
  role last_role = role::unattached;
  int32_t last_epoch = -1;
  int32_t last_leader = -2;
  int64_t last_high_watermark = -1;

  [[noreturn]] void halt(const std::string& what) { halt_from(logger, what); }

  // Any thread: a failed write of the quorum state or the log may have lost what a vote or an acknowledged
  // fetch promised, so the process stops (Kafka halts when its metadata log dir fails).
  [[noreturn]] static void halt_from(const std::shared_ptr<spdlog::logger>& logger, const std::string& what) {
    logger->critical("halting: {}", what);
    spdlog::default_logger()->flush();
    logger->flush();
    ::_exit(1);
  }

  // Carries out the effects of the steps so far: persistence on the blocking thread, then (in step order)
  // messages and listeners.
  void step_done() {
    effects fx = node.take_effects();
    if (fx.voters_changed) {
      std::string ids;
      for (int32_t id : node.voter_ids()) ids += (ids.empty() ? "" : ",") + std::to_string(id);
      logger->info("raft: the voters are now [{}]{}", ids, node.is_voter() ? "" : " (this node observes)");
    }
    for (auto& answer : fx.voter_change_answers) {
      auto it = voter_changes.find(answer.request_id);
      if (it == voter_changes.end()) continue;
      auto respond = std::move(it->second);
      voter_changes.erase(it);
      respond(std::move(answer));
    }
    if (fx.snapshot_to_store) store_snapshot(std::move(*fx.snapshot_to_store));
    const bool needs_persistence = fx.quorum_state_to_persist || !fx.log_operations.empty();
    if (fx.quorum_state_to_persist) state_to_write = *fx.quorum_state_to_persist;
    if (!fx.log_operations.empty()) {
      // A write that failed took the log offline: nothing more may be announced.
      if (!log->failure().ok()) halt("cannot write the metadata log: " + log->failure().message);
      log_to_sync = true;
      for (const auto& op : fx.log_operations) {
        if (const auto* t = std::get_if<log_truncation>(&op)) {
          truncated_during_job = std::min(truncated_during_job, t->offset);
        }
      }
    }
    if (fx.snapshot_installed) {
      // install_snapshot replaced the whole log (durably): a job in flight covers nothing of what it held.
      truncated_during_job = std::min(truncated_during_job, fx.snapshot_installed->offset);
    }
    held_step step{std::move(fx.messages), fx.snapshot_installed, needs_persistence ? jobs_started + 1 : 0};
    if (held.empty() && step.job == 0) {
      release(std::move(step));
    } else if (step.job != 0 || !step.messages.empty() || step.snapshot_installed) {
      // (An empty step behind held ones needs nothing: listeners hear of it when those are released.)
      held.push_back(std::move(step));
    }
    start_job();
  }

  // A snapshot downloaded from the leader: its file is written and synced on the blocking thread (behind any
  // persistence job posted before), then the replica installs it on this thread.
  void store_snapshot(effects::snapshot_file file) {
    log->prepare_snapshot_install();
    asio::post(blocking, [weak = weak_from_this(), &io = io, dir = log->dir(), file = std::move(file)] {
      status written = partition_raft_log::write_snapshot_file_in(dir, file.id, file.payload);
      asio::post(io, [weak, id = file.id, written = std::move(written)] {
        auto self = weak.lock();
        if (!self) return;
        if (!written.ok()) {
          self->logger->error("snapshot {}-{} fetched from the leader not stored: {}", id.offset, id.epoch,
                              written.message);
        }
        self->node.tick(steady_now_ms());
        self->node.snapshot_stored(id, written.ok());
        self->step_done();
      });
    });
  }

  // Starts the next persistence job when none runs and one is due.
  void start_job() {
    if (job_in_flight || (!state_to_write && !log_to_sync)) return;
    std::optional<storage::partition_log::sync_work> sync;
    if (log_to_sync) {
      auto work = log->flush_work();
      if (!work.ok()) halt("cannot flush the metadata log: " + work.error().message);
      sync = std::move(*work);
    }
    const uint64_t job = ++jobs_started;
    job_in_flight = true;
    truncated_during_job = std::numeric_limits<int64_t>::max();
    auto state = std::exchange(state_to_write, std::nullopt);
    log_to_sync = false;
    // The state file is used by jobs only, one at a time; the destructor joins the thread before it goes.
    asio::post(blocking, [weak = weak_from_this(), &io = io, file = &state_file, state,
                          sync = std::move(sync), job, logger = logger]() mutable {
      if (state) {
        if (auto st = file->write(*state); !st.ok())
          halt_from(logger, "cannot write the quorum-state file: " + st.message);
      }
      if (sync) {
        for (const auto& f : sync->files) {
          if (auto st = f->sync(); !st.ok())
            halt_from(logger, "cannot flush the metadata log: " + st.message);
        }
      }
      const int64_t synced_end = sync ? sync->end_offset : -1;
      asio::post(io, [weak, job, synced_end] {
        if (auto self = weak.lock()) self->job_done(job, synced_end);
      });
    });
  }

  void job_done(uint64_t job, int64_t synced_end) {
    job_in_flight = false;
    jobs_done = job;
    if (synced_end >= 0) {
      const int64_t durable = std::min(synced_end, truncated_during_job);
      log->mark_flushed(durable);
      node.on_log_flushed(durable);
    }
    while (!held.empty() && held.front().job <= jobs_done) {
      held_step step = std::move(held.front());
      held.pop_front();
      release(std::move(step));
    }
    step_done();  // what on_log_flushed moved (the leader's high watermark, parked fetches); starts the next
                  // job
  }

  void release(held_step step) {
    // A Fetch to the leader goes after the listeners ran, through the gate (set_fetch_gate).
    std::vector<outbound_message> fetches;
    for (auto& m : step.messages) {
      if (std::holds_alternative<fetch_request>(m.message.body)) {
        fetches.push_back(std::move(m));
      } else {
        deliver(std::move(m));
      }
    }
    if (step.snapshot_installed) {
      // The log now starts with a snapshot from the leader: listeners reload their state from it.
      logger->info("raft node {}: installed snapshot {}-{} from the leader", options.config.node_id,
                   step.snapshot_installed->offset, step.snapshot_installed->epoch);
      installed_snapshot = *step.snapshot_installed;
      ++snapshots_installed;
      last_high_watermark = -1;  // listeners hear of it even if nothing else moved
    }
    notify_if_changed();
    for (auto& m : fetches) {
      if (fetch_gate && !fetch_gate()) {
        if (!gated) gated_since_ms = steady_now_ms();
        gated = std::move(m);
      } else {
        deliver(std::move(m));
      }
    }
  }

  // Sends the Fetch that waited, once the gate is open or it waited long enough (`force`).
  void open_fetch_gate(bool force = false) {
    if (!gated || (!force && fetch_gate && !fetch_gate())) return;
    auto waiting = std::move(*gated);
    gated.reset();
    deliver(std::move(waiting));
  }

  void notify_if_changed() {
    const bool changed = node.current_role() != last_role || node.epoch() != last_epoch ||
                         node.leader_id() != last_leader || node.high_watermark() != last_high_watermark;
    if (!changed) return;
    if (node.current_role() != last_role || node.epoch() != last_epoch || node.leader_id() != last_leader) {
      logger->info("raft node {}: {} in epoch {}, leader {}, high watermark {}", options.config.node_id,
                   role_name(node.current_role()), node.epoch(), node.leader_id(), node.high_watermark());
    }
    last_role = node.current_role();
    last_epoch = node.epoch();
    last_leader = node.leader_id();
    last_high_watermark = node.high_watermark();
    for (const auto& l : listeners) l();
  }

  void deliver(outbound_message m) {
    if (auto* fetched = std::get_if<fetch_response>(&m.message.body)) {
      // KIP-853: every Fetch answer names the leader's endpoint (KafkaRaftClient from Fetch v16), so an
      // observer that asked a bootstrap server can reach the leader.
      const int32_t leader = fetched->current_leader.leader_id;
      if (leader >= 0) {
        if (auto e = address_of(leader)) fetched->node_endpoints.push_back({leader, e->host, e->port});
      }
    }
    if (is_response(m.message.body)) {
      auto it = inbound.find({m.destination, m.message.correlation_id});
      if (it == inbound.end()) return;  // timed out already
      auto respond = std::move(it->second.respond);
      inbound.erase(it);
      respond(std::move(m.message.body));
      return;
    }
    if (!running) return;
    // Named arguments only: GCC 12 destroys a prvalue argument of a coroutine twice (GCC bug 100611).
    std::weak_ptr<impl> weak = weak_from_this();
    auto message = std::make_shared<const outbound_message>(std::move(m));
    asio::co_spawn(
        io, [weak, message] { return send(weak, message); }, asio::detached);
  }

  static asio::awaitable<void> send(std::weak_ptr<impl> weak,
                                    std::shared_ptr<const outbound_message> message) {
    const outbound_message& m = *message;
    auto self = weak.lock();
    if (!self) co_return;
    const auto endpoint = self->address_of(m.destination);
    if (!endpoint) co_return;
    const bool pre_vote = std::holds_alternative<vote_request>(m.message.body) &&
                          std::get<vote_request>(m.message.body).pre_vote;
    auto encoded = encode_raft_request(m.message, self->options.config.node_id, self->options.cluster_id);
    if (!encoded.ok()) {
      self->logger->warn("raft: cannot encode {}: {}", describe(m.message), encoded.error().message);
      co_return;
    }
    encoded_request request = std::move(*encoded);
    net::peer_address to{endpoint->host, endpoint->port};
    const int32_t timeout = self->options.config.request_timeout_ms + self->options.config.fetch_max_wait_ms;
    auto* client = &self->client;
    self.reset();  // the node may go away while the call waits
    auto answer =
        co_await client->call(to, request.api_key, request.api_version, request.request_header_version,
                              request.response_header_version, std::move(request.body), timeout);
    self = weak.lock();
    if (!self || !self->running) co_return;
    if (!answer.ok()) {
      self->logger->debug("raft: {} to node {} failed: {}", describe(m.message), m.destination,
                          answer.error().message);
      co_return;  // the replica retries on its own deadlines
    }
    const int64_t fetch_offset = std::holds_alternative<fetch_request>(m.message.body)
                                     ? std::get<fetch_request>(m.message.body).fetch_offset
                                     : -1;
    auto body = decode_raft_response(request.api_key, request.api_version, *answer, pre_vote, fetch_offset);
    if (!body.ok()) {
      self->logger->warn("raft: undecodable answer from node {}: {}", m.destination, body.error().message);
      co_return;
    }
    if (auto* fetched = std::get_if<fetch_response>(&*body)) {
      for (const auto& e : fetched->node_endpoints) {
        if (e.node_id >= 0 && !self->options.voter_endpoints.contains(e.node_id))
          self->learned_endpoints[e.node_id] = {e.host, e.port};
      }
    }
    self->node.tick(steady_now_ms());
    self->node.on_message(m.destination, raft_message{m.message.correlation_id, std::move(*body)});
    self->step_done();
  }

  // Where a message to `destination` goes: a voter (of the voter set in effect, or a static one), a node
  // learned from NodeEndpoints, or a bootstrap server.
  std::optional<voter_endpoint> address_of(int32_t destination) const {
    if (const auto* voters = node.voter_set()) {
      for (const auto& v : *voters) {
        if (v.id == destination) return v.endpoint;
      }
    }
    if (auto it = options.voter_endpoints.find(destination); it != options.voter_endpoints.end())
      return it->second;
    if (auto it = learned_endpoints.find(destination); it != learned_endpoints.end()) return it->second;
    for (int32_t i = 0; i < static_cast<int32_t>(options.bootstrap_servers.size()); ++i) {
      if (bootstrap_server_id(i) == destination) return options.bootstrap_servers[static_cast<size_t>(i)];
    }
    return std::nullopt;
  }

  void schedule_tick() {
    timer.expires_after(std::chrono::milliseconds(options.tick_interval_ms));
    timer.async_wait([weak = weak_from_this()](const std::error_code& ec) {
      auto self = weak.lock();
      if (ec || !self || !self->running) return;
      self->on_tick();
      self->schedule_tick();
    });
  }

  void on_tick() {
    const int64_t now = steady_now_ms();
    node.tick(now);
    step_done();
    if (gated && now - gated_since_ms >= max_fetch_hold_ms) open_fetch_gate(true);
    for (auto it = inbound.begin(); it != inbound.end();) {
      if (it->second.deadline_ms <= now) {
        auto respond = std::move(it->second.respond);
        auto answer = timed_out_answer(it->second.request);
        it = inbound.erase(it);
        respond(std::move(answer));
      } else {
        ++it;
      }
    }
  }
};

raft_node::raft_node(std::shared_ptr<impl> i) : _impl(std::move(i)) {}

raft_node::~raft_node() {
  if (_impl) {
    _impl->running = false;
    _impl->client.close_all();
    _impl->blocking.join();  // a snapshot being written finishes first
    (void)_impl->log->close();
  }
}

result<std::unique_ptr<raft_node>> raft_node::open(asio::io_context& io, raft_node_options options) {
  partition_raft_log_options log_options;
  log_options.segments = options.segments;
  log_options.worker = options.file_worker;
  auto log = partition_raft_log::open(options.metadata_log_dir, std::move(log_options));
  if (!log.ok()) return log.error();
  // KIP-853: a freshly formatted controller's log starts with the bootstrap checkpoint naming the initial
  // voters; a node without static voters reads them back from its latest snapshot.
  if (options.initial_voters && (*log)->end_offset() == 0 && !(*log)->latest_snapshot()) {
    auto checkpoint =
        bootstrap_checkpoint(*options.initial_voters, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                          std::chrono::system_clock::now().time_since_epoch())
                                                          .count());
    if (!checkpoint.ok()) return checkpoint.error();
    if (!(*log)->write_snapshot({0, 0}, *checkpoint)) {
      return status::error(error_code::kafka_storage_error, "cannot write the bootstrap checkpoint");
    }
    subsystem_logger("raft")->info("wrote the bootstrap checkpoint with {} initial voter(s)",
                                   options.initial_voters->size());
  } else if (options.initial_voters) {
    subsystem_logger("raft")->info("the metadata log is not new: the initial voters given are not used");
  }
  std::optional<std::vector<voter_info>> voter_set;
  if (auto latest = (*log)->latest_snapshot()) {
    auto payload = (*log)->read_snapshot(*latest);
    if (!payload) return status::error(error_code::kafka_storage_error, "cannot read the latest snapshot");
    auto found = voter_set_in_snapshot(*payload);
    if (!found.ok()) return found.error();
    voter_set = std::move(*found);
  }
  if (voter_set && !options.config.voters.empty()) {
    // A static quorum upgraded to kraft.version 1 (replica::upgrade_kraft_version) before this snapshot: the
    // voter set in the log rules from then on, as in Kafka (controller.quorum.voters is only where it
    // started). Its endpoints stay known for the voters it names.
    subsystem_logger("raft")->info(
        "the metadata log holds a voter set (kraft.version 1): controller.quorum.voters no longer names the "
        "voters");
    options.config.voters.clear();
    options.config.voter_set = *voter_set;
    for (const auto& v : *voter_set) options.config.voters.push_back(v.id);
  } else if (options.config.voters.empty()) {
    if (voter_set) {
      for (const auto& v : *voter_set) options.config.voters.push_back(v.id);
    }
    // The VotersRecords in the log after the snapshot change it (raft::replica tracks them); a node with no
    // snapshot yet (a controller to be added, a broker) learns the voters from the log alone.
    options.config.voter_set = voter_set.value_or(std::vector<voter_info>{});
  }
  options.config.directory_id = options.directory_id;
  // A voter formatted with a directory id of its own in --initial-controllers keeps that identity (Mala
  // records it in the voter set, not in meta.properties).
  if (voter_set) {
    for (const auto& v : *voter_set) {
      if (v.id == options.config.node_id && !v.directory_id.is_zero())
        options.config.directory_id = v.directory_id;
    }
  }
  options.config.bootstrap_servers = static_cast<int32_t>(options.bootstrap_servers.size());
  // A snapshot fetched from the leader is written and synced on the blocking thread, not on this one.
  options.config.glue_stores_snapshots = true;
  auto state_file = quorum_state_file::in_dir((*log)->dir(), options.config.voters);
  auto persisted = state_file.read();
  if (!persisted.ok()) return persisted.error();
  auto i = std::make_shared<impl>(io, std::move(options), std::move(*log), std::move(state_file), *persisted);
  // Snapshot files are deleted on the thread that writes them, in order with the writes.
  i->log->set_file_work_runner(
      [&blocking = i->blocking](std::function<void()> work) { asio::post(blocking, std::move(work)); });
  // A restart from a persisted state may have effects (a single voter elects itself at construction).
  i->step_done();
  return std::unique_ptr<raft_node>(new raft_node(std::move(i)));
}

void raft_node::start() {
  if (_impl->running) return;
  _impl->running = true;
  _impl->schedule_tick();
}

void raft_node::stop() {
  _impl->running = false;
  _impl->timer.cancel();
  _impl->client.close_all();
}

void raft_node::handle_request(int32_t from, raft_message_body request, response_callback respond) {
  impl& i = *_impl;
  const int64_t correlation = i.next_inbound_correlation++;
  const int64_t now = steady_now_ms();
  i.inbound.emplace(
      std::make_pair(from, correlation),
      impl::pending_inbound{from, request, std::move(respond), now + i.options.config.request_timeout_ms});
  i.node.tick(now);
  i.node.on_message(from, raft_message{correlation, std::move(request)});
  i.step_done();
}

result<append_info> raft_node::append(const std::vector<std::vector<uint8_t>>& records) {
  auto appended = _impl->node.append(records);
  _impl->step_done();
  return appended;
}

bool raft_node::create_snapshot(offset_and_epoch id, snapshot_builder build, std::function<void(bool)> done) {
  impl& i = *_impl;
  if (i.snapshot_in_flight || !i.node.may_create_snapshot(id)) return false;
  i.snapshot_in_flight = true;
  std::weak_ptr<impl> weak = _impl;
  asio::post(i.blocking, [weak, id, dir = i.log->dir(), build = std::move(build), done = std::move(done),
                          &io = i.io]() mutable {
    auto payload = build();
    status written =
        payload.ok() ? partition_raft_log::write_snapshot_file_in(dir, id, *payload) : payload.error();
    asio::post(io, [weak, id, written = std::move(written), done = std::move(done)] {
      auto self = weak.lock();
      if (!self) return;
      self->snapshot_in_flight = false;
      bool stored = false;
      if (!written.ok()) {
        self->logger->error("snapshot {}-{} not written: {}", id.offset, id.epoch, written.message);
      } else {
        stored = self->log->adopt_snapshot_file(id);
        if (stored) self->node.delete_before_snapshot();
        self->step_done();
      }
      if (done) done(stored);
    });
  });
  return true;
}

uint64_t raft_node::snapshots_installed() const {
  return _impl->snapshots_installed;
}

void raft_node::resign() {
  _impl->node.resign();
  _impl->step_done();
}

const replica& raft_node::state() const {
  return _impl->node;
}

partition_raft_log& raft_node::log() {
  return *_impl->log;
}

const std::string& raft_node::cluster_id() const {
  return _impl->options.cluster_id;
}

std::optional<voter_endpoint> raft_node::endpoint_of(int32_t node_id) const {
  if (node_id < 0) return std::nullopt;
  return _impl->address_of(node_id);
}

std::optional<std::vector<voter_info>> raft_node::voter_set() const {
  if (const auto* voters = _impl->node.voter_set()) return *voters;
  return std::nullopt;
}

int16_t raft_node::kraft_version() const {
  return _impl->node.kraft_version();
}

status raft_node::upgrade_kraft_version(int32_t epoch, int16_t version, bool validate_only) {
  impl& i = *_impl;
  i.node.tick(steady_now_ms());
  auto upgraded = i.node.upgrade_kraft_version(epoch, version, validate_only);
  i.step_done();
  return upgraded;
}

std::optional<std::vector<voter_info>> raft_node::voter_set_before(int64_t offset) const {
  return _impl->node.voter_set_before(offset);
}

const std::vector<int32_t>& raft_node::voters() const {
  return _impl->node.voter_ids();
}

void raft_node::add_voter(voter_info voter, bool ack_when_committed,
                          std::function<void(voter_change_answer)> done) {
  impl& i = *_impl;
  const int64_t id = i.next_voter_change++;
  i.voter_changes.emplace(id, std::move(done));
  i.node.tick(steady_now_ms());
  i.node.add_voter(id, std::move(voter), ack_when_committed);
  i.step_done();
}

void raft_node::update_voter(int32_t leader_epoch, voter_info voter, int16_t min_kraft_version,
                             int16_t max_kraft_version, std::function<void(voter_change_answer)> done) {
  impl& i = *_impl;
  const int64_t id = i.next_voter_change++;
  i.voter_changes.emplace(id, std::move(done));
  i.node.tick(steady_now_ms());
  i.node.update_voter(id, leader_epoch, std::move(voter), min_kraft_version, max_kraft_version);
  i.step_done();
}

void raft_node::remove_voter(int32_t voter_id, uuid directory_id,
                             std::function<void(voter_change_answer)> done) {
  impl& i = *_impl;
  const int64_t id = i.next_voter_change++;
  i.voter_changes.emplace(id, std::move(done));
  i.node.tick(steady_now_ms());
  i.node.remove_voter(id, voter_id, directory_id);
  i.step_done();
}

void raft_node::add_listener(std::function<void()> on_change) {
  _impl->listeners.push_back(std::move(on_change));
}

void raft_node::set_fetch_gate(std::function<bool()> open) {
  _impl->fetch_gate = std::move(open);
}

void raft_node::fetch_gate_opened() {
  _impl->open_fetch_gate();
}

}  // namespace mala::raft
