#include "mala/replication/follower_fetcher.h"

#include <algorithm>
#include <chrono>
#include <optional>
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

}  // namespace

struct follower_fetcher::loop_state {
  explicit loop_state(asio::io_context& io) : timer(io) {}
  asio::steady_timer timer;
  // Partitions answered with a retriable error: not fetched again before this time.
  std::map<topic_partition, steady_clock::time_point> delayed;
  // FENCED_LEADER_EPOCH: our leader epoch is older than the leader's; skipped until the metadata gives this
  // replica another epoch (Kafka's onPartitionFenced removes it until the next leader change).
  std::map<topic_partition, int32_t> fenced;
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
    proto::fetch_request req;
    req.replica_id = _options.node_id;  // v14 and older
    req.replica_state.replica_id = _options.node_id;
    if (auto self = image->brokers.find(_options.node_id); self != image->brokers.end()) {
      req.replica_state.replica_epoch = self->second.epoch;
    }
    req.max_wait_ms = _options.max_wait_ms;
    req.min_bytes = _options.min_bytes;
    req.max_bytes = _options.max_bytes;
    req.session_id = 0;
    req.session_epoch = -1;  // FINAL_EPOCH: a sessionless full fetch
    // Parallel to req.topics: what each partition of it was asked from.
    std::vector<std::vector<sent_partition>> sent;
    bool any_follower = false;
    for (const auto& tp : _replicas.partitions()) {
      auto* p = follower_replica(tp);
      if (!p || p->leader_id() != leader || fetcher_id_of(tp) != fetcher) continue;
      any_follower = true;
      if (!p->load_status().ok() || p->log().is_offline()) continue;
      if (auto f = loop->fenced.find(tp); f != loop->fenced.end()) {
        if (f->second == p->leader_epoch()) continue;
        loop->fenced.erase(f);
      }
      if (auto d = loop->delayed.find(tp); d != loop->delayed.end()) {
        if (now < d->second) continue;
        loop->delayed.erase(d);
      }
      uuid topic_id = p->topic_id();
      if (topic_id == uuid{}) {
        const auto* t = image->find_topic(tp.topic);
        if (!t) continue;
        topic_id = t->id;
      }
      proto::fetch_request::fetch_partition fp;
      fp.partition = tp.partition;
      fp.current_leader_epoch = p->leader_epoch();
      fp.fetch_offset = p->log_end_offset();
      fp.last_fetched_epoch = p->log().epochs().latest_epoch().value_or(-1);
      fp.log_start_offset = p->log_start_offset();
      fp.partition_max_bytes = _options.partition_max_bytes;
      auto topic =
          std::find_if(req.topics.begin(), req.topics.end(),
                       [&](const proto::fetch_request::fetch_topic& t) { return t.topic_id == topic_id; });
      if (topic == req.topics.end()) {
        proto::fetch_request::fetch_topic t;
        t.topic = tp.topic;
        t.topic_id = topic_id;
        req.topics.push_back(std::move(t));
        sent.emplace_back();
        topic = req.topics.end() - 1;
      }
      topic->partitions.push_back(fp);
      sent[static_cast<size_t>(topic - req.topics.begin())].push_back(
          {tp, fp.fetch_offset, fp.current_leader_epoch});
    }
    if (!any_follower) break;
    if (req.topics.empty()) {
      co_await sleep_for(loop->timer, _options.poll_interval_ms);
      if (state->stopped) co_return;
      continue;
    }
    auto to = endpoint_of(*image, leader, _options.listener_name);
    if (!to) {
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
    if (answer.ok()) {
      proto::wire_reader r(*answer);
      proto::fetch_response decoded;
      if (decoded.decode(r, fetch_version) == proto::decode_status::ok && decoded.error_code == 0) {
        resp = std::move(decoded);
      }
    }
    if (!resp) {
      if (!loop->failing) {
        log->warn("replica fetch from leader {} ({}:{}) failed: {}; retrying every {} ms", leader,
                  address.host, address.port,
                  answer.ok() ? std::string("bad response") : answer.error().message, _options.backoff_ms);
      }
      loop->failing = true;
      co_await sleep_for(loop->timer, _options.backoff_ms);
      if (state->stopped) co_return;
      continue;
    }
    if (loop->failing) log->info("replica fetch from leader {} recovered", leader);
    loop->failing = false;

    // Out-of-range partitions need a ListOffsets round trip each; they are handled after the rest.
    std::vector<sent_partition> out_of_range;
    for (const auto& topic : resp->responses) {
      auto asked = std::find_if(
          req.topics.begin(), req.topics.end(),
          [&](const proto::fetch_request::fetch_topic& t) { return t.topic_id == topic.topic_id; });
      if (asked == req.topics.end()) continue;
      const auto& s = sent[static_cast<size_t>(asked - req.topics.begin())];
      for (const auto& part : topic.partitions) {
        auto match = std::find_if(s.begin(), s.end(), [&](const sent_partition& x) {
          return x.tp.partition == part.partition_index;
        });
        if (match == s.end()) continue;
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
