#include "mala/replication/follower_fetcher.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include "mala/common/error_code.h"
#include "mala/common/java_hash.h"
#include "mala/common/logging.h"
#include "mala/net/coroutine_frame_warning.h"
#include "mala/protocol/messages/fetch_request.h"
#include "mala/protocol/messages/fetch_response.h"
#include "mala/protocol/messages/list_offsets_request.h"
#include "mala/protocol/messages/list_offsets_response.h"
#include "mala/protocol/request_header.h"
#include "mala/protocol/wire.h"

namespace mala::replication {

namespace {

namespace proto = mala::protocol;
using steady_clock = std::chrono::steady_clock;

// The newest Fetch Kafka 4.x speaks: topic ids (v13+), ReplicaState (v15+, KIP-903), divergence (v12+).
constexpr int16_t fetch_version = proto::fetch_request::max_version;
// ListOffsets v9 (flexible; v10 only adds TimeoutMs).
constexpr int16_t list_offsets_version = 9;
// How long a truncated partition waits for the file worker's cut before its fetch goes on without it.
constexpr auto truncation_cut_wait = std::chrono::milliseconds(50);

std::string describe(const topic_partition& tp) {
  return tp.topic + "-" + std::to_string(tp.partition);
}

// The whole v2 batches at the front of `records` (base offset 8 bytes, batch length 4 bytes, then the rest):
// a leader may end a response with part of a batch (Kafka's FileRecords slices by bytes), which a follower
// leaves for the next fetch.
std::span<const uint8_t> whole_batches(std::span<const uint8_t> records) {
  size_t pos = 0;
  while (records.size() - pos >= 12) {
    const uint8_t* p = records.data() + pos + 8;
    const int32_t length = static_cast<int32_t>((uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) |
                                                (uint32_t(p[2]) << 8) | uint32_t(p[3]));
    if (length <= 0 || records.size() - pos - 12 < static_cast<size_t>(length)) break;
    pos += 12 + static_cast<size_t>(length);
  }
  return records.first(pos);
}

asio::awaitable<void> sleep_for(asio::steady_timer& timer, int64_t ms) {
  timer.expires_after(std::chrono::milliseconds(std::max<int64_t>(ms, 0)));
  std::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

std::optional<net::peer_address> endpoint_of(const metadata::metadata_image& image, int32_t node,
                                             const std::string& listener_name) {
  auto it = image.brokers.find(node);
  if (it == image.brokers.end() || it->second.endpoints.empty()) return std::nullopt;
  const auto* e = listener_name.empty() ? nullptr : it->second.endpoint_for(listener_name);
  if (!e) e = &it->second.endpoints.front();
  return net::peer_address{e->host, e->port};
}

// What one request asked for a partition, checked again when its answer comes (Kafka's PartitionFetchState):
// an answer is applied only if the replica is still a follower of the same leader in the same epoch, with
// its log end where the request started.
struct sent_partition {
  topic_partition tp;
  int64_t fetch_offset = 0;
  int32_t leader_epoch = 0;
};

// What the leader's fetch session holds for a partition (Kafka's FetchRequest.PartitionData): a partition is
// sent in an incremental request only when one of these changed since the session last got it.
struct session_partition {
  int64_t fetch_offset = 0;
  int32_t leader_epoch = 0;
  int32_t last_fetched_epoch = -1;
  int64_t log_start_offset = 0;
  friend bool operator==(const session_partition&, const session_partition&) = default;
};

// KIP-227: the epoch after `epoch` (1 after the largest, 0 being the request that creates a session).
int32_t next_session_epoch(int32_t epoch) {
  return epoch == std::numeric_limits<int32_t>::max() ? 1 : epoch + 1;
}

}  // namespace

namespace {

// The follower throttle's clock (its windows need a steady one).
int64_t throttle_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct follower_fetcher::loop_state {
  explicit loop_state(asio::io_context& io) : timer(io) {}
  asio::steady_timer timer;
  // The replicas this loop fetches for (placed on this shard, of this fetcher id, following the leader when
  // listed), kept between requests: rebuilt when the replica manager adds or removes a partition (the
  // pointers stay valid until then) or the metadata image changes (leaderships change only with it).
  std::vector<std::pair<topic_partition, partition*>> members;
  uint64_t members_generation = 0;
  metadata::metadata_image_ptr members_image;
  // The fetch session with the leader (Kafka's FetchSessionHandler): id 0 means none, so the next request is
  // a full one that asks for a session (epoch 0); after that each request names only the partitions whose
  // fetch state changed, and the ones to forget, and the leader answers only the partitions with news.
  // Any failed request or session error starts over with a full request.
  int32_t session_id = 0;
  int32_t session_epoch = 0;
  struct in_session_entry {
    uuid topic_id;
    session_partition sent;
    uint64_t round = 0;  // the last request that wanted it
  };
  std::unordered_map<topic_partition, in_session_entry, replica_manager::topic_partition_hash> in_session;
  uint64_t round = 0;
  void reset_session() {
    session_id = 0;
    session_epoch = 0;
    in_session.clear();
  }
  // Partitions answered with a retriable error: not fetched again before this time.
  std::map<topic_partition, steady_clock::time_point> delayed;
  // Partitions whose truncation the file worker is cutting: left out until it is done, or until this time
  // (the worker may be busy with longer jobs; the append then makes the cut itself).
  std::map<topic_partition, steady_clock::time_point> cutting;
  // FENCED_LEADER_EPOCH: our leader epoch is older than the leader's; skipped until the metadata gives this
  // replica another epoch (Kafka's onPartitionFenced removes it until the next leader change).
  std::map<topic_partition, int32_t> fenced;
  // Follower-throttled replicas caught up with the leader's high watermark at their last answer (Kafka's
  // PartitionFetchState.isReplicaInSync: lag 0); the others are left out of a request while the follower
  // replication rate is over follower.replication.throttled.rate.
  std::unordered_map<topic_partition, bool, replica_manager::topic_partition_hash> throttled_in_sync;
  bool failing = false;  // the last request failed (log the first failure and the recovery only)
};

follower_fetcher::follower_fetcher(asio::io_context& io, replica_manager& replicas,
                                   const metadata::metadata_cache& metadata, follower_fetcher_options options)
    : _io(io),
      _replicas(replicas),
      _metadata(metadata),
      _options(std::move(options)),
      _client(io, "mala-replica-fetcher-" + std::to_string(_options.node_id), _options.client),
      _state(std::make_shared<shared_state>()) {}

follower_fetcher::~follower_fetcher() {
  _state->stopped = true;
}

void follower_fetcher::start() {
  asio::co_spawn(_io, poll(_state), asio::detached);
}

void follower_fetcher::stop() {
  _state->stopped = true;
  for (auto& [key, loop] : _loops) loop->timer.cancel();
  _loops.clear();
  _client.close_all();
}

asio::awaitable<void> follower_fetcher::poll(std::shared_ptr<shared_state> state) {
  asio::steady_timer timer(_io);
  while (!state->stopped) {
    auto image = _metadata.current();
    if (image != _scanned_image || ++_polls_since_scan >= _options.rescan_polls) {
      _scanned_image = std::move(image);
      _polls_since_scan = 0;
      start_missing_loops();
    }
    co_await sleep_for(timer, _options.poll_interval_ms);
  }
}

partition* follower_fetcher::follower_replica(const topic_partition& tp) const {
  if (_options.placement.shard_of(tp) != _options.shard) return nullptr;
  auto* p = _replicas.get(tp);
  if (!p || p->is_leader()) return nullptr;
  return p;
}

void follower_fetcher::start_missing_loops() {
  for (const auto& tp : _replicas.partitions()) {
    auto* p = follower_replica(tp);
    if (!p || p->leader_id() < 0 || p->leader_id() == _options.node_id) continue;
    const int32_t leader = p->leader_id();
    const int32_t fetcher = fetcher_id_of(tp);
    if (_loops.contains({leader, fetcher})) continue;
    auto loop = std::make_shared<loop_state>(_io);
    _loops[{leader, fetcher}] = loop;
    subsystem_logger("replication")->info("replica fetcher {} for leader {} started", fetcher, leader);
    asio::co_spawn(_io, fetch_from(leader, fetcher, _state, loop), asio::detached);
  }
}

// Kafka's fetchEarliestOffsetFromLeader / fetchLatestOffsetFromLeader: ListOffsets as a replica (ReplicaId =
// node.id, so the latest offset is the leader's log end, not its high watermark).
asio::awaitable<std::optional<int64_t>> follower_fetcher::list_offset(net::peer_address to,
                                                                      topic_partition tp,
                                                                      int32_t leader_epoch,
                                                                      int64_t timestamp) {
  const int32_t timeout_ms = _options.max_wait_ms + _options.request_timeout_ms;
  proto::list_offsets_request req;
  req.replica_id = _options.node_id;
  proto::list_offsets_request::list_offsets_topic topic;
  topic.name = tp.topic;
  proto::list_offsets_request::list_offsets_partition part;
  part.partition_index = tp.partition;
  part.current_leader_epoch = leader_epoch;
  part.timestamp = timestamp;
  topic.partitions.push_back(part);
  req.topics.push_back(std::move(topic));
  std::vector<uint8_t> body;
  proto::wire_writer w(body);
  req.encode(w, list_offsets_version);
  auto answer = co_await _client.call(to, proto::list_offsets_request::api_key, list_offsets_version,
                                      proto::request_header_version(true), 1, std::move(body), timeout_ms);
  if (!answer.ok()) co_return std::nullopt;
  proto::wire_reader r(*answer);
  proto::list_offsets_response resp;
  if (resp.decode(r, list_offsets_version) != proto::decode_status::ok) co_return std::nullopt;
  for (const auto& t : resp.topics) {
    for (const auto& p : t.partitions) {
      if (t.name == tp.topic && p.partition_index == tp.partition && p.error_code == 0 && p.offset >= 0) {
        co_return p.offset;
      }
    }
  }
  co_return std::nullopt;
}

int32_t follower_fetcher::fetcher_id_of(const topic_partition& tp) const {
  const int32_t n = std::max(1, _options.fetchers_per_leader);
  if (n == 1) return 0;
  const auto h = static_cast<int32_t>(31u * static_cast<uint32_t>(java_string_hash(tp.topic)) +
                                      static_cast<uint32_t>(tp.partition));
  return kafka_abs(h) % n;
}

asio::awaitable<void> follower_fetcher::fetch_from(int32_t leader, int32_t fetcher,
                                                   std::shared_ptr<shared_state> state,
                                                   std::shared_ptr<loop_state> loop) {
  auto log = subsystem_logger("replication");
  const int32_t timeout_ms = _options.max_wait_ms + _options.request_timeout_ms;
  while (!state->stopped) {
    const auto image = _metadata.current();
    const auto now = steady_clock::now();
    if (loop->members_image != image || loop->members_generation != _replicas.generation() ||
        loop->members.empty()) {
      loop->members.clear();
      for (const auto& tp : _replicas.partitions()) {
        if (fetcher_id_of(tp) != fetcher) continue;
        if (auto* p = follower_replica(tp)) loop->members.emplace_back(tp, p);
      }
      loop->members_image = image;
      loop->members_generation = _replicas.generation();
      // A replica that left the loop starts over as not caught up when it returns (Kafka's fetcher adds it
      // back with a new fetch state, its lag unknown).
      std::erase_if(loop->throttled_in_sync, [&](const auto& entry) {
        return std::none_of(loop->members.begin(), loop->members.end(),
                            [&](const auto& m) { return m.first == entry.first; });
      });
    }
    proto::fetch_request req;
    req.replica_id = _options.node_id;  // v14 and older
    req.replica_state.replica_id = _options.node_id;
    if (auto self = image->brokers.find(_options.node_id); self != image->brokers.end()) {
      req.replica_state.replica_epoch = self->second.epoch;
    }
    req.max_wait_ms = _options.max_wait_ms;
    req.min_bytes = _options.min_bytes;
    req.max_bytes = _options.max_bytes;
    const bool full = loop->session_id == 0;
    if (full) loop->in_session.clear();
    req.session_id = loop->session_id;
    req.session_epoch = loop->session_epoch;
    // The topics of this request's partitions, by id: the answer names them so.
    std::vector<std::pair<uuid, std::string>> topic_names;
    auto topic_entry = [&topic_names](const uuid& id, const std::string& name) {
      for (size_t i = 0; i < topic_names.size(); ++i) {
        if (topic_names[i].first == id) return i;
      }
      topic_names.emplace_back(id, name);
      return topic_names.size() - 1;
    };
    const uint64_t round = ++loop->round;
    bool any_follower = false;
    bool any_wanted = false;
    for (const auto& [tp, p] : loop->members) {
      // Valid: the list is rebuilt whenever the replica manager added or removed a partition.
      if (p->is_leader() || p->leader_id() != leader) continue;
      any_follower = true;
      if (!p->load_status().ok() || p->log().is_offline()) continue;
      if (!loop->fenced.empty()) {
        if (auto f = loop->fenced.find(tp); f != loop->fenced.end()) {
          if (f->second == p->leader_epoch()) continue;
          loop->fenced.erase(f);
        }
      }
      if (!loop->delayed.empty()) {
        if (auto d = loop->delayed.find(tp); d != loop->delayed.end()) {
          if (now < d->second) continue;
          loop->delayed.erase(d);
        }
      }
      // The file worker is cutting the log's files after a truncation: the next append would make the cut
      // on this shard. Left out for a short while for the worker to do it.
      if (p->log().truncation_pending()) {
        const auto waits_until = loop->cutting.try_emplace(tp, now + truncation_cut_wait).first->second;
        if (now < waits_until) continue;
      }
      if (!loop->cutting.empty()) loop->cutting.erase(tp);
      uuid topic_id = p->topic_id();
      if (topic_id == uuid{}) {
        const auto* t = image->find_topic(tp.topic);
        if (!t) continue;
        topic_id = t->id;
      }
      if (_options.follower_throttle && p->follower_throttled()) {
        auto in_sync = loop->throttled_in_sync.find(tp);
        const bool synced = in_sync != loop->throttled_in_sync.end() && in_sync->second;
        if (!synced && _options.follower_throttle->exceeded(throttle_clock_ms())) continue;
      }
      any_wanted = true;
      const session_partition wanted{p->log_end_offset(), p->leader_epoch(),
                                     p->log().epochs().latest_epoch().value_or(-1), p->log_start_offset()};
      auto [entry, added] = loop->in_session.try_emplace(tp);
      const bool changed = added || entry->second.sent != wanted || entry->second.topic_id != topic_id;
      entry->second = {topic_id, wanted, round};
      if (!full && !changed) continue;
      proto::fetch_request::fetch_partition fp;
      fp.partition = tp.partition;
      fp.current_leader_epoch = wanted.leader_epoch;
      fp.fetch_offset = wanted.fetch_offset;
      fp.last_fetched_epoch = wanted.last_fetched_epoch;
      fp.log_start_offset = wanted.log_start_offset;
      fp.partition_max_bytes = _options.partition_max_bytes;
      const size_t t = topic_entry(topic_id, tp.topic);
      if (t == req.topics.size()) {
        proto::fetch_request::fetch_topic topic;
        topic.topic = tp.topic;
        topic.topic_id = topic_id;
        req.topics.push_back(std::move(topic));
      }
      req.topics[t].partitions.push_back(fp);
    }
    if (!any_follower) break;
    if (!any_wanted) {
      co_await sleep_for(loop->timer, _options.poll_interval_ms);
      if (state->stopped) co_return;
      continue;
    }
    // The session's partitions this request no longer wants (moved, delayed after an error, fenced).
    for (auto it = loop->in_session.begin(); it != loop->in_session.end();) {
      if (it->second.round == round) {
        ++it;
        continue;
      }
      auto forgotten = std::find_if(req.forgotten_topics_data.begin(), req.forgotten_topics_data.end(),
                                    [&](const auto& f) { return f.topic_id == it->second.topic_id; });
      if (forgotten == req.forgotten_topics_data.end()) {
        proto::fetch_request::forgotten_topic f;
        f.topic = it->first.topic;
        f.topic_id = it->second.topic_id;
        req.forgotten_topics_data.push_back(std::move(f));
        forgotten = req.forgotten_topics_data.end() - 1;
      }
      forgotten->partitions.push_back(it->first.partition);
      it = loop->in_session.erase(it);
    }
    auto to = endpoint_of(*image, leader, _options.listener_name);
    if (!to) {
      loop->reset_session();
      co_await sleep_for(loop->timer, _options.backoff_ms);
      if (state->stopped) co_return;
      continue;
    }

    std::vector<uint8_t> body;
    proto::wire_writer w(body);
    req.encode(w, fetch_version);
    const net::peer_address address = *to;
    auto answer = co_await _client.call(address, proto::fetch_request::api_key, fetch_version,
                                        proto::request_header_version(true), 1, std::move(body), timeout_ms);
    if (state->stopped) co_return;
    std::optional<proto::fetch_response> resp;
    error_code top_error = error_code::none;
    if (answer.ok()) {
      proto::wire_reader r(*answer);
      proto::fetch_response decoded;
      if (decoded.decode(r, fetch_version) == proto::decode_status::ok) {
        top_error = static_cast<error_code>(decoded.error_code);
        if (top_error == error_code::none) resp = std::move(decoded);
      }
    }
    if (top_error == error_code::fetch_session_id_not_found ||
        top_error == error_code::invalid_fetch_session_epoch) {
      // The leader evicted or restarted the session, or an answer was lost: start a new one at once.
      log->debug("replica fetch from leader {}: session {} epoch {}: {}; starting a new session", leader,
                 loop->session_id, loop->session_epoch, error_name(top_error));
      loop->reset_session();
      continue;
    }
    if (!resp) {
      if (!loop->failing) {
        log->warn("replica fetch from leader {} ({}:{}) failed: {}; retrying every {} ms", leader,
                  address.host, address.port,
                  !answer.ok()                    ? answer.error().message
                  : top_error != error_code::none ? std::string(error_name(top_error))
                                                  : std::string("bad response"),
                  _options.backoff_ms);
      }
      loop->failing = true;
      loop->reset_session();
      co_await sleep_for(loop->timer, _options.backoff_ms);
      if (state->stopped) co_return;
      continue;
    }
    if (loop->failing) log->info("replica fetch from leader {} recovered", leader);
    loop->failing = false;
    if (full) {
      // Session id 0 in the answer: the leader keeps no session (its cache is full); ask again next time.
      loop->session_id = resp->session_id;
      loop->session_epoch = resp->session_id == 0 ? 0 : 1;
      if (resp->session_id == 0) loop->in_session.clear();
    } else if (resp->session_id == 0) {
      loop->reset_session();  // the leader closed it (a request that forgot every partition)
    } else {
      loop->session_epoch = next_session_epoch(loop->session_epoch);
    }

    // Out-of-range partitions need a ListOffsets round trip each; they are handled after the rest.
    std::vector<sent_partition> out_of_range;
    for (const auto& topic : resp->responses) {
      auto named = std::find_if(topic_names.begin(), topic_names.end(),
                                [&](const auto& t) { return t.first == topic.topic_id; });
      std::string name;
      if (named != topic_names.end()) {
        name = named->second;
      } else if (const auto* t = image->find_topic(topic.topic_id)) {
        name = t->name;  // a session partition this request did not list
      } else {
        continue;
      }
      for (const auto& part : topic.partitions) {
        // What the session holds for it is what the leader answered from.
        auto held = loop->in_session.find(topic_partition{name, part.partition_index});
        if (held == loop->in_session.end() || held->second.round != round) continue;
        const sent_partition asked{held->first, held->second.sent.fetch_offset,
                                   held->second.sent.leader_epoch};
        const sent_partition* match = &asked;
        auto* p = follower_replica(match->tp);
        if (!p || p->leader_id() != leader || p->leader_epoch() != match->leader_epoch ||
            p->log_end_offset() != match->fetch_offset) {
          continue;  // the replica changed while the fetch was in flight
        }
        const auto error = static_cast<error_code>(part.error_code);
        if (error == error_code::none) {
          if (part.diverging_epoch.epoch >= 0 || part.diverging_epoch.end_offset >= 0) {
            // KIP-595: our log diverged from the leader's at the end of that epoch.
            const int64_t offset = std::min(part.diverging_epoch.end_offset, p->log_end_offset());
            log->info("{}: diverging from leader {} at epoch {} end offset {}: truncating to {}",
                      describe(match->tp), leader, part.diverging_epoch.epoch,
                      part.diverging_epoch.end_offset, offset);
            if (auto st = p->truncate_to(offset); !st.ok()) {
              log->error("{}: truncation to {} failed: {}", describe(match->tp), offset, st.message);
              loop->delayed[match->tp] = steady_clock::now() + std::chrono::milliseconds(_options.backoff_ms);
            }
            continue;
          }
          if (!part.records.null && !part.records.bytes.empty()) {
            auto batches = whole_batches(part.records.bytes);
            if (!batches.empty()) {
              auto appended = p->append_as_follower(batches);
              if (!appended) {
                log->error("{}: follower append at offset {} failed: {}", describe(match->tp),
                           match->fetch_offset, appended.error().message);
                loop->delayed[match->tp] =
                    steady_clock::now() + std::chrono::milliseconds(_options.backoff_ms);
                continue;
              }
            }
          }
          p->update_high_watermark_from_leader(part.high_watermark);
          if (_options.follower_throttle && p->follower_throttled()) {
            // ReplicaFetcherThread.processPartitionData: a throttled replica's records count, in sync or not.
            if (!part.records.null)
              _options.follower_throttle->record(static_cast<int64_t>(part.records.bytes.size()),
                                                 throttle_clock_ms());
            loop->throttled_in_sync[match->tp] = part.high_watermark <= p->log_end_offset();
          }
          // Records the leader deleted (DeleteRecords, retention) go here too; our next fetch reports the new
          // start, which is what the leader's DeleteRecords waits for (its low watermark).
          if (part.log_start_offset >= 0) {
            if (auto st = p->update_log_start_offset_from_leader(part.log_start_offset); !st.ok()) {
              log->error("{}: cannot take the leader's log start offset {}: {}", describe(match->tp),
                         part.log_start_offset, st.message);
            }
          }
          continue;
        }
        switch (error) {
          case error_code::offset_out_of_range:
            out_of_range.push_back(*match);
            break;
          case error_code::fenced_leader_epoch:
            log->info("{}: leader {} has a newer epoch than {}: waiting for the metadata",
                      describe(match->tp), leader, match->leader_epoch);
            loop->fenced[match->tp] = match->leader_epoch;
            break;
          default:
            // NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH (the leader has not applied the metadata yet),
            // UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR, ...: retried after the backoff.
            log->debug("{}: fetch from leader {} answered {}", describe(match->tp), leader,
                       error_name(error));
            loop->delayed[match->tp] = steady_clock::now() + std::chrono::milliseconds(_options.backoff_ms);
            break;
        }
      }
    }

    // Kafka's handleOutOfRangeError / fetchOffsetAndTruncate: a leader whose log ends below ours means an
    // unclean election: truncate to its end. Otherwise we are below its log start: start over there.
    for (const auto& oor : out_of_range) {
      auto leader_end = co_await list_offset(address, oor.tp, oor.leader_epoch, latest_timestamp);
      if (state->stopped) co_return;
      std::optional<int64_t> leader_start;
      if (leader_end) {
        leader_start = co_await list_offset(address, oor.tp, oor.leader_epoch, earliest_timestamp);
        if (state->stopped) co_return;
      }
      auto* p = follower_replica(oor.tp);
      if (!p || p->leader_id() != leader || p->leader_epoch() != oor.leader_epoch) continue;
      status st = status::success();
      if (!leader_end || !leader_start) {
        loop->delayed[oor.tp] = steady_clock::now() + std::chrono::milliseconds(_options.backoff_ms);
        continue;
      }
      const int64_t local_end = p->log_end_offset();
      if (*leader_end < local_end) {
        log->warn("{}: leader {} ends at {}, below our log end {}: truncating", describe(oor.tp), leader,
                  *leader_end, local_end);
        st = p->truncate_to(*leader_end);
      } else if (*leader_start > local_end) {
        log->info("{}: leader {} starts at {}, beyond our log end {}: starting there", describe(oor.tp),
                  leader, *leader_start, local_end);
        st = p->truncate_fully_and_start_at(*leader_start);
      }
      if (!st.ok()) {
        log->error("{}: out-of-range recovery failed: {}", describe(oor.tp), st.message);
        loop->delayed[oor.tp] = steady_clock::now() + std::chrono::milliseconds(_options.backoff_ms);
      }
    }
  }
  if (state->stopped) co_return;
  if (auto it = _loops.find({leader, fetcher}); it != _loops.end() && it->second == loop) _loops.erase(it);
  log->info("replica fetcher {} for leader {} stopped: no partition follows it", fetcher, leader);
}

}  // namespace mala::replication
