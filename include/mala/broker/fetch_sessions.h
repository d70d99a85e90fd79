// Broker-side fetch sessions (KIP-227, "incremental fetch requests"), the behaviour of Kafka's FetchManager,
// FetchSessionCache and FetchContext, without I/O.
//
// A client opens a session with a full fetch (epoch 0); the broker caches the session's partitions and their
// last-sent state and answers with a session id. The client then sends incremental fetches (epoch 1, 2, ...)
// listing only partitions whose fetch parameters changed (and forgotten ones); the broker answers with only
// the partitions that have something new (records, high watermark, log start offset, an error, ...). Epoch -1
// (or a request older than v7, which has no session fields) is a sessionless full fetch. The cache has
// `max.incremental.fetch.session.cache.slots` entries; when it is full a new session may evict an older one
// by Kafka's rules (see fetch_session_cache::new_context).
//
// Use by the Fetch handler, per request:
//   1. ctx = cache.new_context(make_fetch_session_request(req, version), now_ms, resolve_name)
//   2. read ctx.partitions() (all of them: for an incremental fetch these are the session's partitions, not
//   only
//      those in the request); a partition whose key has an empty topic name (a v13+ topic id this broker does
//      not know) is answered with UNKNOWN_TOPIC_ID, as Kafka's KafkaApis does
//   3. header = ctx.update_and_generate_response(results, now_ms) drops from `results` what an incremental
//      response need not carry, updates the session, and gives the top-level error code and session id
//   4. build_fetch_response(header, std::move(results), throttle_ms), encoded with the request's version
//
// Threads: a fetch_session_cache is guarded by its own mutex (the critical sections are short: O(partitions
// in the request)). The node holds one per shard in a sharded_fetch_session_cache, as Kafka shards its cache
// by session id (KAFKA-9401): a new session is made in the cache of the shard its connection lives on, so
// that lock is only contended when a client's connections span shards. A fetch_context may be used on any
// thread; it refers to its cache, which must outlive it. Between new_context and update_and_generate_response
// another request of the same session may run: like Kafka, the context then answers
// INVALID_FETCH_SESSION_EPOCH ("possible duplicate request").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mala/common/error_code.h"
#include "mala/common/uuid.h"
#include "mala/protocol/messages/fetch_request.h"
#include "mala/protocol/messages/fetch_response.h"

namespace mala::broker {

// Kafka's FetchMetadata constants.
inline constexpr int32_t invalid_fetch_session_id = 0;  // "no session"
inline constexpr int32_t initial_fetch_epoch = 0;       // full fetch; create a session if possible
inline constexpr int32_t final_fetch_epoch = -1;        // full fetch; close the session, create none
// First Fetch version naming topics by id (KIP-516). A session remembers which kind it was created with.
inline constexpr int16_t fetch_topic_ids_min_version = 13;
// max.incremental.fetch.session.cache.slots default.
inline constexpr int32_t default_fetch_session_cache_slots = 1000;
// Kafka's fixed minimum age (not a config) before a session may be evicted for being idle or small.
inline constexpr int64_t default_fetch_session_eviction_ms = 120'000;

// The epoch after `prev`: -1 stays -1, and INT32_MAX wraps to 1 (0 means "new session").
int32_t next_fetch_epoch(int32_t prev);

struct fetch_metadata {
  int32_t session_id = invalid_fetch_session_id;
  int32_t epoch = final_fetch_epoch;  // Kafka's LEGACY metadata: what a v4-v6 request implies

  bool is_full() const { return epoch == initial_fetch_epoch || epoch == final_fetch_epoch; }
};

// A partition as a fetch names it: by topic id from v13 on (the name, resolved from the metadata, is empty
// when the id is unknown), by name before (the id is zero). Equality follows Kafka's CachedPartition: by id
// and partition when the id is non-zero, else by name and partition - so an unresolved and a resolved key of
// one topic id are the same partition.
struct fetch_partition_key {
  uuid topic_id;
  std::string topic;
  int32_t partition = 0;

  friend bool operator==(const fetch_partition_key& a, const fetch_partition_key& b);
};

struct fetch_partition_key_hash {
  size_t operator()(const fetch_partition_key& key) const;
};

// What the fetcher asks of one partition (Kafka's FetchRequest.PartitionData).
struct fetch_partition_params {
  int64_t fetch_offset = 0;
  int64_t log_start_offset = -1;  // the fetcher's own log start offset (followers); -1 from consumers
  int32_t max_bytes = 0;
  int32_t current_leader_epoch = -1;
  int32_t last_fetched_epoch = -1;

  friend bool operator==(const fetch_partition_params&, const fetch_partition_params&) = default;
};

struct fetch_partition {
  fetch_partition_key key;
  fetch_partition_params params;
};

// The session-relevant content of a Fetch request.
struct fetch_session_request {
  int16_t version = fetch_topic_ids_min_version;
  fetch_metadata metadata;
  bool is_follower = false;  // replica id >= 0: follower sessions are privileged in the cache
  std::vector<fetch_partition> partitions;
  std::vector<fetch_partition_key> forgotten;  // ForgottenTopicsData (v7+)
};

// Extracts the session-relevant content of a decoded request (v4-v6 carry no session fields, so their
// defaults give Kafka's LEGACY metadata: session 0, epoch -1). Topic names of v13+ requests are left empty;
// new_context resolves them.
fetch_session_request make_fetch_session_request(const protocol::fetch_request& request, int16_t version);

// Resolves a topic id to its name (the metadata image); nullopt when unknown.
using topic_name_resolver = std::function<std::optional<std::string>(const uuid&)>;

// One partition's read result, as the handler built it for the response.
struct fetch_partition_result {
  fetch_partition_key key;
  protocol::fetch_response::partition_data data;
  // Bytes of records sent for this partition when they do not travel in data.records (zero-copy sendfile);
  // -1: the size of data.records.
  int64_t records_size = -1;

  int64_t effective_records_size() const;
};

// What the session remembers of the last response sent for a partition.
struct cached_partition_response_state {
  int64_t high_watermark = -1;
  int64_t local_log_start_offset = -1;  // this broker's log start offset (not the fetcher's)
};

// Kafka's CachedPartition.maybeUpdateResponseData: whether an incremental response must carry this partition
// (records, a changed high watermark or log start offset, a preferred read replica, an error, a diverging
// epoch), and, when `update` is set, remember what is being sent. An error resets the remembered high
// watermark to -1 so that the partition is sent again once the error clears. The last stable offset is not
// compared (Kafka does not: it moves only with the high watermark).
bool maybe_update_response_data(cached_partition_response_state& state, const fetch_partition_result& result,
                                bool update);

// The top level of a Fetch response.
struct fetch_response_header {
  error_code error = error_code::none;
  int32_t session_id = invalid_fetch_session_id;
};

enum class fetch_context_kind : uint8_t {
  session_error,  // unknown session, wrong epoch, topic-id mismatch: answer error(), no partitions
  sessionless,    // full fetch without a session (epoch -1, or an incremental fetch that emptied its session)
  full,           // full fetch (epoch 0) that creates a session when the cache has room
  incremental,    // incremental fetch in an existing session
};

namespace detail {
struct fetch_session;
}
class fetch_session_cache;

class fetch_context {
 public:
  fetch_context_kind kind() const { return _kind; }
  // The session error (kind session_error), else none.
  error_code error() const { return _error; }
  // The partitions to read, in order. For an incremental fetch, every partition of the session with its
  // cached parameters (partitions that returned records last move to the back, so others get the response's
  // byte budget first, KAFKA-12330). Empty for a session error.
  const std::vector<fetch_partition>& partitions() const { return _partitions; }

  // Updates the session with what is about to be sent and returns the top-level error and session id:
  //  - session_error: clears `results`; {error, 0}
  //  - sessionless: {none, 0}
  //  - full: tries to create a session from `results` (their high watermarks and log start offsets) and the
  //    request's parameters; {none, new id or 0}. No session for a fetch of zero partitions.
  //  - incremental: removes from `results` the partitions maybe_update_response_data says need not be sent;
  //    {none, session id}. If the session's epoch moved since new_context (a concurrent or duplicate
  //    request): clears `results`; {INVALID_FETCH_SESSION_EPOCH, session id}.
  fetch_response_header update_and_generate_response(std::vector<fetch_partition_result>& results,
                                                     int64_t now_ms);

  // The header of an empty, throttled response (quota exceeded): no session is created and an incremental
  // session is left as is.
  fetch_response_header throttled_response() const;

 private:
  friend class fetch_session_cache;
  fetch_context() = default;

  fetch_context_kind _kind = fetch_context_kind::sessionless;
  error_code _error = error_code::none;
  std::vector<fetch_partition> _partitions;
  fetch_session_cache* _cache = nullptr;
  bool _is_follower = false;
  bool _uses_topic_ids = false;
  int32_t _request_epoch = 0;
  std::shared_ptr<detail::fetch_session> _session;  // incremental: kept alive even if evicted meanwhile
};

struct fetch_session_cache_config {
  int32_t max_slots = default_fetch_session_cache_slots;  // max.incremental.fetch.session.cache.slots
  int64_t eviction_ms = default_fetch_session_eviction_ms;
  uint64_t session_id_seed = 0;  // 0: from std::random_device; tests fix it
  // The session ids this cache hands out are those with id % id_modulus == id_remainder (a shard's share).
  int32_t id_modulus = 1;
  int32_t id_remainder = 0;
};

// A copy of one cached session, for tests, metrics and debugging.
struct fetch_session_snapshot {
  struct partition {
    fetch_partition_key key;
    fetch_partition_params params;
    cached_partition_response_state response;
  };
  int32_t id = 0;
  int32_t epoch = 0;  // the epoch the next incremental request must carry
  bool privileged = false;
  bool uses_topic_ids = false;
  int64_t creation_ms = 0;
  int64_t last_used_ms = 0;
  std::vector<partition> partitions;  // in session order
};

class fetch_session_cache {
 public:
  explicit fetch_session_cache(fetch_session_cache_config config = {});
  ~fetch_session_cache();
  fetch_session_cache(const fetch_session_cache&) = delete;
  fetch_session_cache& operator=(const fetch_session_cache&) = delete;

  // Kafka's FetchManager.newContext:
  //  - full (epoch 0 or -1): a session named by a non-zero session id is closed first; epoch -1 gives a
  //    sessionless context, epoch 0 a full one (its session is created in update_and_generate_response).
  //  - incremental (any other epoch): FETCH_SESSION_ID_NOT_FOUND for an unknown id;
  //  INVALID_FETCH_SESSION_EPOCH
  //    unless the epoch is the session's expected one; FETCH_SESSION_TOPIC_ID_ERROR when a session created
  //    with topic ids is used by a request before v13 or the other way round. Otherwise the request's
  //    partitions are added to or updated in the session, forgotten ones removed, and the epoch advances; a
  //    session left empty is closed and the fetch is sessionless.
  // Duplicate partitions in a request collapse to the last parameters, at the first one's position. v13+ keys
  // with an empty name are resolved with `resolve_name`, and so are names of cached partitions still unknown
  // (called with the cache's lock held: it must not call back into the cache).
  //
  // Creating a session when the cache is full may evict one (Kafka's FetchSessionCache.tryEvict): first the
  // least recently used session if unused for more than eviction_ms; else the least valuable "evictable"
  // session if the new one is worth more, ordered by (privileged, number of partitions, id). A session
  // becomes evictable once older than eviction_ms; a consumer's (unprivileged) session is evictable by a
  // follower's (privileged) one at any age. So a follower replaces a consumer, and a session replaces an
  // older one with fewer partitions.
  fetch_context new_context(fetch_session_request request, int64_t now_ms,
                            const topic_name_resolver& resolve_name = {});

  // NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached, evictions so far.
  size_t size() const;
  int64_t total_partitions() const;
  uint64_t evictions() const;
  std::optional<fetch_session_snapshot> find(int32_t session_id) const;

 private:
  friend class fetch_context;
  using session_ptr = std::shared_ptr<detail::fetch_session>;
  using last_used_key = std::pair<int64_t, int32_t>;         // (last used ms, id)
  using evictable_key = std::tuple<bool, int32_t, int32_t>;  // (privileged, size, id)

  int32_t maybe_create_session_locked(int64_t now_ms, bool privileged, bool uses_topic_ids,
                                      const std::vector<fetch_partition_result>& results,
                                      const std::vector<fetch_partition>& request_partitions);
  bool try_evict_locked(bool privileged, const evictable_key& key, int64_t now_ms);
  void remove_locked(const session_ptr& session);
  void touch_locked(const session_ptr& session, int64_t now_ms);
  int32_t new_session_id_locked();

  const fetch_session_cache_config _config;
  mutable std::mutex _mutex;
  std::unordered_map<int32_t, session_ptr> _sessions;
  std::set<last_used_key> _last_used;
  std::set<evictable_key> _evictable_by_all;         // evictable by any new session
  std::set<evictable_key> _evictable_by_privileged;  // evictable by a follower's session
  int64_t _total_partitions = 0;
  uint64_t _evictions = 0;
  std::mt19937 _random;
};

// The Fetch response from a header and the partitions to send, grouping consecutive partitions of one topic
// (Kafka keeps the partitions' order and starts a new topic entry whenever the topic changes).
protocol::fetch_response build_fetch_response(const fetch_response_header& header,
                                              std::vector<fetch_partition_result> results,
                                              int32_t throttle_time_ms = 0);

// One fetch_session_cache per shard (Kafka's FetchSessionCacheShard): each has its own lock, max_slots
// divided among them (at least one each), and the session ids of cache k are those with id % shards == k.
// A request naming a session goes to that session's cache; a request without one goes to the cache of the
// shard it runs on (common/current_shard.h; the first cache on any other thread).
class sharded_fetch_session_cache {
 public:
  sharded_fetch_session_cache(fetch_session_cache_config config, size_t shard_count);
  // The cache a request is served by.
  fetch_session_cache& cache_for(const fetch_metadata& metadata);
  size_t size() const;
  int64_t total_partitions() const;

 private:
  std::vector<std::unique_ptr<fetch_session_cache>> _caches;
};

}  // namespace mala::broker
