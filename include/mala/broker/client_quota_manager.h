// Client quota enforcement, as Kafka's ClientQuotaManager with its DefaultQuotaCallback (KIP-13, KIP-55,
// KIP-219): the byte rates of producers (producer_byte_rate) and consumers (consumer_byte_rate) per user,
// client id or both, and the request time (request_percentage).
//
// - Which quota applies (KIP-55), most specific first: user + client id, user + default client id, user,
//   default user + client id, default user + default client id, default user, client id, default client id.
//   Like Kafka, the rate is measured per "quota group": the tags (user tag, client-id tag) that the enabled
//   quota levels give a connection, so that e.g. a default client-id quota gives every client id its own
//   budget, while a user quota is shared by all of that user's client ids.
// - The rate (rate_stat) is Kafka's Rate over a SampledStat: `quota.window.num` samples of
//   `quota.window.size.seconds` each, the window counted as at least samples - 1 full windows; a request is
//   recorded first, then the rate compared with the bound; over it, the throttle time is
//   (rate - bound) / bound * window (QuotaUtils.throttleTime), not capped for byte rates, as Kafka's; for
//   request_percentage capped at quota.window.size.seconds (ClientRequestQuotaManager.maxThrottleTimeMs).
// - The user is the principal's name (Kafka's Session.sanitizedUser: ANONYMOUS on a PLAINTEXT listener);
//   entity names are compared as sent, which is what Kafka's comparison of sanitized names amounts to.
//
// Cost and sharing. With no quota in the image (metadata_image::client_quotas null) a request pays one
// pointer test. Otherwise each shard keeps the lookup tables derived from the image's quota map (rebuilt when
// the map's pointer changes) and its own map from quota group to the group's sensor; a group's sensor is
// shared by every shard a connection of that group lives on, and the global registry lock is taken only the
// first time a shard meets a group. A sensor has its own small mutex, held for a record and a measure: only
// connections of the same quota group, which share the budget anyway, ever contend on it; no lock is shared
// by all shards on any request path. Sensors idle for an hour are dropped (Kafka's
// InactiveSensorExpirationTimeSeconds).
//
// Threads: any; each shard thread uses its own slot, other threads share one behind a mutex.
#pragma once

#include <array>
#include <atomic>
#include <compare>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "mala/metadata/metadata_image.h"

namespace mala::broker {

// The quota types the manager enforces, each with its quota key.
// request: request_percentage, the request's thread time as a percentage of one thread (Kafka's
// ClientRequestQuotaManager), its throttle capped at one quota window.
enum class client_quota_type : uint8_t { produce = 0, fetch = 1, controller_mutation = 2, request = 3 };
inline constexpr size_t client_quota_type_count = 4;
const char* quota_key(client_quota_type type);

// quota.window.num and quota.window.size.seconds (Kafka's defaults).
struct quota_window {
  int32_t samples = 11;
  int32_t window_seconds = 1;
  int64_t window_ms() const { return int64_t{window_seconds} * 1000; }
};

// Kafka's Rate over a WindowedSum (SampledStat): samples of window_ms each, reused round robin (samples + 1
// slots: the one overlapping the window's start is kept), samples with no event for samples * window_ms
// reset.
class rate_stat {
 public:
  void record(const quota_window& w, double value, int64_t now_ms);
  // The rate per second at now_ms.
  double measure(const quota_window& w, int64_t now_ms);
  // Rate.windowSize: the time the rate divides by, at least samples - 1 full windows, at least 1 ms.
  int64_t window_size_ms(const quota_window& w, int64_t now_ms);
  int64_t last_event_ms() const;

 private:
  struct sample {
    double value = 0;
    int64_t event_count = 0;
    int64_t start_ms = 0;
    int64_t last_event_ms = 0;
    void reset(int64_t now) {
      value = 0;
      event_count = 0;
      start_ms = now;
      last_event_ms = now;
    }
  };
  sample& current(int64_t now_ms);
  void purge_obsolete(const quota_window& w, int64_t now_ms);
  std::vector<sample> _samples;
  size_t _current = 0;
};

// Kafka's TokenBucket (KIP-599): tokens refill at `bound` per second up to a burst of samples * window
// seconds * bound; a mutation takes as many tokens as partitions it creates or deletes, and may take the
// tokens below zero.
class token_bucket {
 public:
  double measure(double bound, double burst, int64_t now_ms);
  void record(double bound, double burst, double value, int64_t now_ms);

 private:
  void refill(double bound, double burst, int64_t now_ms);
  double _tokens = 0;
  int64_t _last_update_ms = 0;
};

// QuotaUtils.throttleTime: how long until the rate falls back to the bound if nothing more is recorded.
int64_t throttle_time_ms(double observed_rate, double bound, int64_t window_ms);

// A connection's quota group (Kafka's metric tags): an empty tag is no tag.
struct quota_tags {
  std::string user;
  std::string client_id;
  friend auto operator<=>(const quota_tags&, const quota_tags&) = default;
  friend bool operator==(const quota_tags&, const quota_tags&) = default;
};

struct quota_resolution {
  quota_tags tags;
  std::optional<double> bound;  // none: no quota applies
};

// One quota key's quotas in lookup form (DefaultQuotaCallback's overriddenQuotas and quotaTypesEnabled).
class quota_table {
 public:
  quota_table() = default;
  quota_table(const metadata::client_quota_map& quotas, const std::string& key);
  bool empty() const { return _enabled == 0; }
  // quotaMetricTags then quotaLimit for the connection's user and client id.
  quota_resolution resolve(const std::string& user, const std::string& client_id) const;

 private:
  enum slot_kind : int8_t { absent = 0, default_entity = 1, named = 2 };
  struct entity_key {
    int8_t user_kind = absent;
    std::string user;
    int8_t client_kind = absent;
    std::string client_id;
    friend auto operator<=>(const entity_key&, const entity_key&) = default;
    friend bool operator==(const entity_key&, const entity_key&) = default;
  };
  const double* find(int8_t user_kind, const std::string& user, int8_t client_kind,
                     const std::string& client_id) const;
  bool has(int8_t user_kind, const std::string& user, int8_t client_kind,
           const std::string& client_id) const {
    return find(user_kind, user, client_kind, client_id) != nullptr;
  }
  std::optional<double> limit(const quota_tags& tags) const;

  static constexpr int client_id_enabled = 1;
  static constexpr int user_enabled = 2;
  static constexpr int user_client_id_enabled = 4;
  int _enabled = 0;
  std::vector<std::pair<entity_key, double>> _quotas;  // sorted by key
};

struct quota_sensor_registry;

class client_quota_manager;

// KIP-599's quota of one CreateTopics / CreatePartitions / DeleteTopics request (Kafka's
// ControllerMutationQuota): strict (the request versions that know THROTTLING_QUOTA_EXCEEDED) refuses a
// mutation once the tokens are below zero, permissive (older versions) takes every mutation and only
// throttles. Without a controller_mutation_rate quota it takes everything and never throttles.
class controller_mutation_quota {
 public:
  // Takes `permits` (partitions) at now_ms; false when strict and the quota is exhausted (nothing taken: the
  // topic is answered THROTTLING_QUOTA_EXCEEDED).
  bool record(double permits, int64_t now_ms);
  bool record(double permits);
  // The throttle time left: the last violation's, less the time since (Kafka's
  // AbstractControllerMutationQuota).
  int32_t throttle_time_ms(int64_t now_ms) const;
  int32_t throttle_time_ms() const;
  bool bounded() const { return _sensor != nullptr; }

 private:
  friend class client_quota_manager;
  std::shared_ptr<void> _sensor;
  double _bound = 0;
  double _burst = 0;
  bool _strict = true;
  int64_t _last_throttle_ms = 0;
  int64_t _last_recorded_ms = 0;
};

class client_quota_manager {
 public:
  // `controller_window`: controller.quota.window.num / controller.quota.window.size.seconds (KIP-599's
  // burst).
  explicit client_quota_manager(quota_window window = {}, size_t shard_count = 1,
                                quota_window controller_window = {});
  ~client_quota_manager();
  client_quota_manager(const client_quota_manager&) = delete;
  client_quota_manager& operator=(const client_quota_manager&) = delete;

  // What one recording did: the throttle time (0: within the quota or no quota) and what undo() needs.
  struct charge {
    int32_t throttle_ms = 0;
    std::shared_ptr<void> sensor;  // null: nothing recorded
    double value = 0;
    int64_t at_ms = 0;
  };

  // Records `value` (bytes) for the connection's quota group of `type` under `quotas` and returns the
  // throttle time. Nothing is recorded when no quota of that type applies.
  charge record(const metadata::client_quotas_image& quotas, client_quota_type type, const std::string& user,
                const std::string& client_id, double value, int64_t now_ms);
  charge record(const metadata::client_quotas_image& quotas, client_quota_type type, const std::string& user,
                const std::string& client_id, double value);
  // Takes a recording back (Kafka's unrecordQuotaSensor: a throttled fetch sends no data).
  void undo(const charge& c);
  // Kafka's getMaxValueInQuotaWindow: the most that may be recorded at once without a certain throttle,
  // bound * (samples - 1) * window seconds; nullopt without a quota.
  std::optional<double> max_value_in_window(const metadata::client_quotas_image& quotas,
                                            client_quota_type type, const std::string& user,
                                            const std::string& client_id);

  // The KIP-599 quota of one request of the connection (controller_mutation_rate).
  controller_mutation_quota mutation_quota(const metadata::client_quotas_image& quotas,
                                           const std::string& user, const std::string& client_id,
                                           bool strict);

  const quota_window& window() const { return _window; }
  // Sensors in the registry (tests).
  size_t sensor_count() const;
  // The steady clock in ms, the time base of record().
  static int64_t steady_now_ms();

 private:
  friend struct quota_sensor_registry;
  friend class controller_mutation_quota;
  struct sensor;
  struct shard_slot;
  shard_slot& slot();
  std::shared_ptr<sensor> sensor_for(shard_slot& s, client_quota_type type, const quota_tags& tags,
                                     int64_t now_ms);
  const quota_table& table_for(shard_slot& s, const metadata::client_quotas_image& quotas,
                               client_quota_type type);

  quota_window _window;
  quota_window _controller_window;
  std::vector<std::unique_ptr<shard_slot>> _slots;  // one per shard, then one for every other thread
  // Every quota group's sensor, by type and tags; a shard's slot caches what it used. Sensors idle for an
  // hour leave it at the next purge (at most one a minute), which bumps the generation so that slots drop
  // their caches.
  mutable std::mutex _registry_mutex;
  std::unique_ptr<quota_sensor_registry> _registry;
  int64_t _last_purge_ms = 0;
  std::atomic<uint64_t> _generation{0};
};

}  // namespace mala::broker
