#include "mala/broker/fetch_sessions.h"

#include <algorithm>
#include <climits>
#include <list>
#include <string_view>

#include "mala/common/current_shard.h"

namespace mala::broker {

namespace detail {

struct cached_partition {
  fetch_partition_key key;
  fetch_partition_params params;
  cached_partition_response_state response;
};

// One session (Kafka's FetchSession). Guarded by the owning cache's mutex.
struct fetch_session {
  using partition_list = std::list<cached_partition>;

  int32_t id = 0;
  bool privileged = false;
  bool uses_topic_ids = false;
  int64_t creation_ms = 0;
  int64_t last_used_ms = 0;
  int32_t epoch = 0;
  // The size under which the session is filed in the cache's evictable sets and partition count; -1 until the
  // cache first touches it. It trails partitions.size() between an update and the next touch, as in Kafka.
  int32_t cached_size = -1;
  // Session order matters: it is the order partitions are read in, and partitions that returned records move
  // to the back. The index finds a partition's node (list iterators survive splice and other erasures).
  partition_list partitions;
  std::unordered_map<fetch_partition_key, partition_list::iterator, fetch_partition_key_hash> index;

  void add_or_update(const fetch_partition& p) {
    auto it = index.find(p.key);
    if (it == index.end()) {
      partitions.push_back({p.key, p.params, {}});
      index.emplace(p.key, std::prev(partitions.end()));
    } else {
      it->second->params = p.params;
    }
  }

  void forget(const fetch_partition_key& key) {
    auto it = index.find(key);
    if (it == index.end()) return;
    partitions.erase(it->second);
    index.erase(it);
  }
};

}  // namespace detail

namespace {

fetch_context_kind kind_for_full(int32_t epoch) {
  // Kafka: "If the epoch is FINAL_EPOCH, don't try to create a new session."
  return epoch == final_fetch_epoch ? fetch_context_kind::sessionless : fetch_context_kind::full;
}

// Before v13 topics are named, never identified (their ids are zero on the wire); from v13 on by id, with the
// name filled in from the metadata when known.
void normalize_key(fetch_partition_key& key, bool uses_topic_ids, const topic_name_resolver& resolve_name) {
  if (!uses_topic_ids) {
    key.topic_id = uuid{};
    return;
  }
  if (key.topic.empty() && !key.topic_id.is_zero() && resolve_name) {
    if (auto name = resolve_name(key.topic_id)) key.topic = std::move(*name);
  }
}

// Kafka builds a LinkedHashMap from the request: a repeated partition keeps its first position and takes the
// last parameters.
std::vector<fetch_partition> dedupe(std::vector<fetch_partition> partitions) {
  std::vector<fetch_partition> out;
  out.reserve(partitions.size());
  std::unordered_map<fetch_partition_key, size_t, fetch_partition_key_hash> position;
  for (auto& p : partitions) {
    auto [it, inserted] = position.emplace(p.key, out.size());
    if (inserted) {
      out.push_back(std::move(p));
    } else {
      out[it->second].params = p.params;
    }
  }
  return out;
}

}  // namespace

int32_t next_fetch_epoch(int32_t prev) {
  if (prev < 0) return final_fetch_epoch;  // after FINAL_EPOCH comes FINAL_EPOCH
  if (prev == INT32_MAX) return 1;         // 0 would mean "new session"
  return prev + 1;
}

bool operator==(const fetch_partition_key& a, const fetch_partition_key& b) {
  if (a.partition != b.partition) return false;
  if (!a.topic_id.is_zero()) return a.topic_id == b.topic_id;
  return b.topic_id.is_zero() && a.topic == b.topic;
}

size_t fetch_partition_key_hash::operator()(const fetch_partition_key& key) const {
  size_t h;
  if (!key.topic_id.is_zero()) {
    h = std::hash<std::string_view>{}(std::string_view(
        reinterpret_cast<const char*>(key.topic_id.bytes.data()), key.topic_id.bytes.size()));
  } else {
    h = std::hash<std::string>{}(key.topic);
  }
  return h * 31 + std::hash<int32_t>{}(key.partition);
}

fetch_session_request make_fetch_session_request(const protocol::fetch_request& request, int16_t version) {
  fetch_session_request out;
  out.version = version;
  out.metadata = {request.session_id, request.session_epoch};
  // Kafka's FetchRequest.isFromFollower: the replica id moved into ReplicaState in v15 (KIP-903).
  const int32_t replica_id = version >= 15 ? request.replica_state.replica_id : request.replica_id;
  out.is_follower = replica_id >= 0;
  const bool ids = version >= fetch_topic_ids_min_version;
  for (const auto& topic : request.topics) {
    for (const auto& p : topic.partitions) {
      fetch_partition fp;
      fp.key = ids ? fetch_partition_key{topic.topic_id, {}, p.partition}
                   : fetch_partition_key{uuid{}, topic.topic, p.partition};
      fp.params = {p.fetch_offset, p.log_start_offset, p.partition_max_bytes, p.current_leader_epoch,
                   p.last_fetched_epoch};
      out.partitions.push_back(std::move(fp));
    }
  }
  for (const auto& topic : request.forgotten_topics_data) {
    for (int32_t partition : topic.partitions) {
      out.forgotten.push_back(ids ? fetch_partition_key{topic.topic_id, {}, partition}
                                  : fetch_partition_key{uuid{}, topic.topic, partition});
    }
  }
  return out;
}

int64_t fetch_partition_result::effective_records_size() const {
  if (records_size >= 0) return records_size;
  return data.records.null ? 0 : static_cast<int64_t>(data.records.bytes.size());
}

bool maybe_update_response_data(cached_partition_response_state& state, const fetch_partition_result& result,
                                bool update) {
  const auto& data = result.data;
  bool must_respond = false;
  // Partitions with new data are always sent.
  if (result.effective_records_size() > 0) must_respond = true;
  if (state.high_watermark != data.high_watermark) {
    must_respond = true;
    if (update) state.high_watermark = data.high_watermark;
  }
  if (state.local_log_start_offset != data.log_start_offset) {
    must_respond = true;
    if (update) state.local_log_start_offset = data.log_start_offset;
  }
  // A preferred read replica (KIP-392) must reach the consumer so that it switches replicas.
  if (data.preferred_read_replica != -1) must_respond = true;
  if (data.error_code != 0) {
    // Errors are always sent; forgetting the high watermark makes the partition be sent again once the error
    // clears, even if the high watermark is back to the remembered value.
    if (update) state.high_watermark = -1;
    must_respond = true;
  }
  // A diverging epoch (KIP-320) must reach the follower so that it truncates.
  if (data.diverging_epoch.epoch != -1 || data.diverging_epoch.end_offset != -1) must_respond = true;
  return must_respond;
}

// ---- fetch_context ----

fetch_response_header fetch_context::update_and_generate_response(
    std::vector<fetch_partition_result>& results, int64_t now_ms) {
  switch (_kind) {
    case fetch_context_kind::session_error:
      // The session is unknown or out of step, so which partitions the client meant is unknown too.
      results.clear();
      return {_error, invalid_fetch_session_id};
    case fetch_context_kind::sessionless:
      return {error_code::none, invalid_fetch_session_id};
    case fetch_context_kind::full: {
      std::lock_guard lock(_cache->_mutex);
      const int32_t id =
          _cache->maybe_create_session_locked(now_ms, _is_follower, _uses_topic_ids, results, _partitions);
      return {error_code::none, id};
    }
    case fetch_context_kind::incremental:
      break;
  }
  std::lock_guard lock(_cache->_mutex);
  auto& session = *_session;
  if (session.epoch != next_fetch_epoch(_request_epoch)) {
    // Another request of this session ran since new_context: Kafka suspects a duplicate request.
    results.clear();
    return {error_code::invalid_fetch_session_epoch, session.id};
  }
  size_t kept = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    auto& result = results[i];
    auto it = session.index.find(result.key);
    const bool must_respond = it != session.index.end() &&
                              maybe_update_response_data(it->second->response, result, /*update=*/true);
    if (!must_respond) continue;
    if (result.effective_records_size() > 0) {
      // Partitions that returned data go to the back, so that the next fetch serves the others first
      // (KAFKA-12330: only for records, not for metadata-only changes).
      session.partitions.splice(session.partitions.end(), session.partitions, it->second);
    }
    if (kept != i) results[kept] = std::move(result);
    ++kept;
  }
  results.erase(results.begin() + static_cast<std::ptrdiff_t>(kept), results.end());
  return {error_code::none, session.id};
}

fetch_response_header fetch_context::throttled_response() const {
  if (_kind != fetch_context_kind::incremental) return {error_code::none, invalid_fetch_session_id};
  std::lock_guard lock(_cache->_mutex);
  if (_session->epoch != next_fetch_epoch(_request_epoch)) {
    return {error_code::invalid_fetch_session_epoch, _session->id};
  }
  return {error_code::none, _session->id};
}

// ---- fetch_session_cache ----

fetch_session_cache::fetch_session_cache(fetch_session_cache_config config)
    : _config(config),
      _random(config.session_id_seed != 0 ? config.session_id_seed : std::random_device{}()) {}

fetch_session_cache::~fetch_session_cache() = default;

fetch_context fetch_session_cache::new_context(fetch_session_request request, int64_t now_ms,
                                               const topic_name_resolver& resolve_name) {
  const bool uses_topic_ids = request.version >= fetch_topic_ids_min_version;
  for (auto& p : request.partitions) normalize_key(p.key, uses_topic_ids, resolve_name);
  for (auto& key : request.forgotten) normalize_key(key, uses_topic_ids, resolve_name);
  auto partitions = dedupe(std::move(request.partitions));
  const fetch_metadata metadata = request.metadata;

  fetch_context context;
  context._cache = this;
  context._is_follower = request.is_follower;
  context._uses_topic_ids = uses_topic_ids;

  std::lock_guard lock(_mutex);
  if (metadata.is_full()) {
    // Any session named in a full fetch is closed, whether or not a new one is wanted.
    if (metadata.session_id != invalid_fetch_session_id) {
      auto it = _sessions.find(metadata.session_id);
      if (it != _sessions.end()) remove_locked(it->second);
    }
    context._kind = kind_for_full(metadata.epoch);
    context._partitions = std::move(partitions);
    return context;
  }

  auto session_error = [&context](error_code error) {
    context._kind = fetch_context_kind::session_error;
    context._error = error;
    return std::move(context);
  };
  auto it = _sessions.find(metadata.session_id);
  if (it == _sessions.end()) return session_error(error_code::fetch_session_id_not_found);
  session_ptr session = it->second;
  if (session->epoch != metadata.epoch) return session_error(error_code::invalid_fetch_session_epoch);
  if (session->uses_topic_ids != uses_topic_ids)
    return session_error(error_code::fetch_session_topic_id_error);

  for (const auto& p : partitions) session->add_or_update(p);
  for (const auto& key : request.forgotten) session->forget(key);
  if (session->partitions.empty()) {
    // Nothing left to cache: close the session and answer what was asked, without a session.
    remove_locked(session);
    context._kind = fetch_context_kind::sessionless;
    context._partitions = std::move(partitions);
    return context;
  }
  touch_locked(session, now_ms);
  session->epoch = next_fetch_epoch(session->epoch);

  context._kind = fetch_context_kind::incremental;
  context._request_epoch = metadata.epoch;
  context._partitions.reserve(session->partitions.size());
  for (auto& cached : session->partitions) {
    // A topic id unknown when the partition joined the session may be known now.
    if (session->uses_topic_ids) normalize_key(cached.key, true, resolve_name);
    context._partitions.push_back({cached.key, cached.params});
  }
  context._session = std::move(session);
  return context;
}

int32_t fetch_session_cache::maybe_create_session_locked(
    int64_t now_ms, bool privileged, bool uses_topic_ids, const std::vector<fetch_partition_result>& results,
    const std::vector<fetch_partition>& request_partitions) {
  // A session of no partitions would only take a slot; the client stays sessionless and asks again.
  if (results.empty()) return invalid_fetch_session_id;
  const auto size = static_cast<int32_t>(results.size());
  const bool room = static_cast<int64_t>(_sessions.size()) < _config.max_slots ||
                    try_evict_locked(privileged, evictable_key{privileged, size, 0}, now_ms);
  if (!room) return invalid_fetch_session_id;

  std::unordered_map<fetch_partition_key, const fetch_partition_params*, fetch_partition_key_hash> params;
  for (const auto& p : request_partitions) params.emplace(p.key, &p.params);

  auto session = std::make_shared<detail::fetch_session>();
  session->id = new_session_id_locked();
  session->privileged = privileged;
  session->uses_topic_ids = uses_topic_ids;
  session->creation_ms = now_ms;
  session->last_used_ms = now_ms;
  session->epoch = next_fetch_epoch(initial_fetch_epoch);
  for (const auto& result : results) {
    if (session->index.contains(result.key)) continue;
    auto p = params.find(result.key);
    session->partitions.push_back(
        {result.key, p != params.end() ? *p->second : fetch_partition_params{},
         cached_partition_response_state{result.data.high_watermark, result.data.log_start_offset}});
    session->index.emplace(result.key, std::prev(session->partitions.end()));
  }
  _sessions.emplace(session->id, session);
  touch_locked(session, now_ms);
  return session->id;
}

bool fetch_session_cache::try_evict_locked(bool privileged, const evictable_key& key, int64_t now_ms) {
  if (_last_used.empty()) return false;
  auto evict = [this](int32_t id) {
    auto it = _sessions.find(id);
    if (it == _sessions.end()) return false;
    remove_locked(it->second);
    ++_evictions;
    return true;
  };
  // A session unused for longer than eviction_ms is stale: anyone may take its slot.
  const auto [last_used_ms, stale_id] = *_last_used.begin();
  if (now_ms - last_used_ms > _config.eviction_ms) return evict(stale_id);
  // Otherwise the least valuable evictable session goes if the new one is worth at least as much (ties are
  // broken by id, and the new one's id counts as 0, so an equal size does not evict).
  const auto& candidates = privileged ? _evictable_by_privileged : _evictable_by_all;
  if (candidates.empty()) return false;
  const evictable_key least = *candidates.begin();
  if (key < least) return false;
  return evict(std::get<2>(least));
}

void fetch_session_cache::remove_locked(const session_ptr& session_ref) {
  // A copy: the caller may pass the very pointer held by _sessions, which the erase below destroys.
  const session_ptr session = session_ref;
  _last_used.erase({session->last_used_ms, session->id});
  const evictable_key key{session->privileged, session->cached_size, session->id};
  _evictable_by_all.erase(key);
  _evictable_by_privileged.erase(key);
  auto it = _sessions.find(session->id);
  if (it != _sessions.end() && it->second == session) {
    _sessions.erase(it);
    _total_partitions -= session->cached_size;
  }
}

void fetch_session_cache::touch_locked(const session_ptr& session, int64_t now_ms) {
  _last_used.erase({session->last_used_ms, session->id});
  session->last_used_ms = now_ms;
  _last_used.insert({now_ms, session->id});

  if (session->cached_size != -1) {
    const evictable_key old_key{session->privileged, session->cached_size, session->id};
    _evictable_by_all.erase(old_key);
    _evictable_by_privileged.erase(old_key);
    _total_partitions -= session->cached_size;
  }
  session->cached_size = static_cast<int32_t>(session->partitions.size());
  const evictable_key key{session->privileged, session->cached_size, session->id};
  // A young session is protected from size-based eviction, except that a consumer's session always yields to
  // a follower's: replication matters more than one consumer's efficiency.
  const bool old_enough = now_ms - session->creation_ms > _config.eviction_ms;
  if (!session->privileged || old_enough) _evictable_by_privileged.insert(key);
  if (old_enough) _evictable_by_all.insert(key);
  _total_partitions += session->cached_size;
}

int32_t fetch_session_cache::new_session_id_locked() {
  // Random ids, so that a client cannot guess another's session; 0 means "no session".
  // Within this cache's share: id % id_modulus == id_remainder (a remainder of 0 never gives id 0).
  const int32_t modulus = std::max(1, _config.id_modulus);
  std::uniform_int_distribution<int32_t> ids(0, (INT32_MAX - 1) / modulus - 1);
  int32_t id;
  do {
    id = ids(_random) * modulus + _config.id_remainder;
  } while (id == invalid_fetch_session_id || _sessions.contains(id));
  return id;
}

size_t fetch_session_cache::size() const {
  std::lock_guard lock(_mutex);
  return _sessions.size();
}

int64_t fetch_session_cache::total_partitions() const {
  std::lock_guard lock(_mutex);
  return _total_partitions;
}

uint64_t fetch_session_cache::evictions() const {
  std::lock_guard lock(_mutex);
  return _evictions;
}

std::optional<fetch_session_snapshot> fetch_session_cache::find(int32_t session_id) const {
  std::lock_guard lock(_mutex);
  auto it = _sessions.find(session_id);
  if (it == _sessions.end()) return std::nullopt;
  const auto& s = *it->second;
  fetch_session_snapshot out;
  out.id = s.id;
  out.epoch = s.epoch;
  out.privileged = s.privileged;
  out.uses_topic_ids = s.uses_topic_ids;
  out.creation_ms = s.creation_ms;
  out.last_used_ms = s.last_used_ms;
  for (const auto& p : s.partitions) out.partitions.push_back({p.key, p.params, p.response});
  return out;
}

// ---- response ----

protocol::fetch_response build_fetch_response(const fetch_response_header& header,
                                              std::vector<fetch_partition_result> results,
                                              int32_t throttle_time_ms) {
  protocol::fetch_response response;
  response.throttle_time_ms = throttle_time_ms;
  response.error_code = static_cast<int16_t>(header.error);
  response.session_id = header.session_id;
  for (auto& result : results) {
    result.data.partition_index = result.key.partition;
    if (response.responses.empty() || response.responses.back().topic != result.key.topic ||
        !(response.responses.back().topic_id == result.key.topic_id)) {
      protocol::fetch_response::fetchable_topic_response topic;
      topic.topic = result.key.topic;
      topic.topic_id = result.key.topic_id;
      response.responses.push_back(std::move(topic));
    }
    response.responses.back().partitions.push_back(std::move(result.data));
  }
  return response;
}

// ---- sharded_fetch_session_cache ----

sharded_fetch_session_cache::sharded_fetch_session_cache(fetch_session_cache_config config,
                                                         size_t shard_count) {
  const size_t count = std::max<size_t>(1, shard_count);
  for (size_t k = 0; k < count; ++k) {
    fetch_session_cache_config c = config;
    // Kafka divides the slots evenly too; a configured 0 (sessions off) stays 0.
    c.max_slots = config.max_slots <= 0
                      ? config.max_slots
                      : std::max<int32_t>(1, config.max_slots / static_cast<int32_t>(count));
    c.id_modulus = static_cast<int32_t>(count);
    c.id_remainder = static_cast<int32_t>(k);
    if (config.session_id_seed != 0) c.session_id_seed = config.session_id_seed + k;
    _caches.push_back(std::make_unique<fetch_session_cache>(c));
  }
}

fetch_session_cache& sharded_fetch_session_cache::cache_for(const fetch_metadata& metadata) {
  if (metadata.session_id > 0) {  // 0: no session (invalid_fetch_session_id); ids are positive
    return *_caches[static_cast<size_t>(metadata.session_id) % _caches.size()];
  }
  const int shard = current_shard();
  return *_caches[shard < 0 ? 0 : static_cast<size_t>(shard) % _caches.size()];
}

size_t sharded_fetch_session_cache::size() const {
  size_t n = 0;
  for (const auto& c : _caches) n += c->size();
  return n;
}

int64_t sharded_fetch_session_cache::total_partitions() const {
  int64_t n = 0;
  for (const auto& c : _caches) n += c->total_partitions();
  return n;
}

}  // namespace mala::broker
