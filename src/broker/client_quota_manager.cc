#include "mala/broker/client_quota_manager.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <utility>

#include "mala/common/current_shard.h"

namespace mala::broker {

namespace {

// Kafka's ClientQuotaManager.InactiveSensorExpirationTimeSeconds.
constexpr int64_t inactive_sensor_expiration_ms = 3600 * 1000;
constexpr int64_t purge_interval_ms = 60 * 1000;

}  // namespace

const char* quota_key(client_quota_type type) {
  switch (type) {
    case client_quota_type::produce:
      return "producer_byte_rate";
    case client_quota_type::fetch:
      return "consumer_byte_rate";
    case client_quota_type::controller_mutation:
      return "controller_mutation_rate";
    case client_quota_type::request:
      return "request_percentage";
  }
  return "";
}

// ---- rate_stat: Kafka's SampledStat + WindowedSum + Rate ----

rate_stat::sample& rate_stat::current(int64_t now_ms) {
  if (_samples.empty()) {
    _samples.emplace_back();
    _samples.back().reset(now_ms);
  }
  return _samples[_current];
}

void rate_stat::record(const quota_window& w, double value, int64_t now_ms) {
  sample* s = &current(now_ms);
  // Sample.isComplete (no event window: MetricConfig's eventWindow is Long.MAX_VALUE).
  if (now_ms - s->start_ms >= w.window_ms()) {
    // One slot more than the samples: the one overlapping the window's start is kept.
    const size_t max_samples = static_cast<size_t>(w.samples) + 1;
    _current = (_current + 1) % max_samples;
    if (_current >= _samples.size()) {
      _samples.emplace_back();
      _current = _samples.size() - 1;
    }
    s = &_samples[_current];
    s->reset(now_ms);
  }
  s->value += value;
  s->event_count += 1;
  s->last_event_ms = now_ms;
}

void rate_stat::purge_obsolete(const quota_window& w, int64_t now_ms) {
  const int64_t expire_age = int64_t{w.samples} * w.window_ms();
  for (auto& s : _samples) {
    if (now_ms - s.last_event_ms >= expire_age) s.reset(now_ms);
  }
}

int64_t rate_stat::window_size_ms(const quota_window& w, int64_t now_ms) {
  purge_obsolete(w, now_ms);
  current(now_ms);  // SampledStat.oldest creates a sample when there is none
  int64_t oldest = _samples.front().start_ms;
  for (const auto& s : _samples) oldest = std::min(oldest, s.start_ms);
  int64_t elapsed = now_ms - oldest;
  const int64_t full_windows = elapsed / w.window_ms();
  const int64_t min_full_windows = w.samples - 1;
  // Too little history would make the rate huge: count at least samples - 1 full windows.
  if (full_windows < min_full_windows) elapsed += (min_full_windows - full_windows) * w.window_ms();
  return std::max<int64_t>(elapsed, 1);
}

double rate_stat::measure(const quota_window& w, int64_t now_ms) {
  purge_obsolete(w, now_ms);
  double total = 0;
  for (const auto& s : _samples) total += s.value;
  return total / (static_cast<double>(window_size_ms(w, now_ms)) / 1000.0);
}

int64_t rate_stat::last_event_ms() const {
  int64_t last = 0;
  for (const auto& s : _samples) last = std::max(last, s.last_event_ms);
  return last;
}

void token_bucket::refill(double bound, double burst, int64_t now_ms) {
  _tokens = std::min(burst, _tokens + bound * static_cast<double>(now_ms - _last_update_ms) / 1000.0);
  _last_update_ms = now_ms;
}

double token_bucket::measure(double bound, double burst, int64_t now_ms) {
  refill(bound, burst, now_ms);
  return _tokens;
}

void token_bucket::record(double bound, double burst, double value, int64_t now_ms) {
  refill(bound, burst, now_ms);
  _tokens = std::min(burst, _tokens - value);
}

int64_t throttle_time_ms(double observed_rate, double bound, int64_t window_ms) {
  // O * W / (W + X) = T  =>  X = (O - T) / T * W
  const double difference = observed_rate - bound;
  return std::llround(difference / bound * static_cast<double>(window_ms));
}

// ---- quota_table: DefaultQuotaCallback ----

quota_table::quota_table(const metadata::client_quota_map& quotas, const std::string& key) {
  for (const auto& [entity, values] : quotas) {
    auto value = values.find(key);
    if (value == values.end()) continue;
    entity_key k;
    bool other = false;
    for (const auto& [type, name] : entity) {
      if (type == "user") {
        k.user_kind = name ? named : default_entity;
        k.user = name.value_or("");
      } else if (type == "client-id") {
        k.client_kind = name ? named : default_entity;
        k.client_id = name.value_or("");
      } else {
        other = true;  // ip: connection quotas, not client quotas
      }
    }
    if (other || (k.user_kind == absent && k.client_kind == absent)) continue;
    _quotas.emplace_back(std::move(k), value->second);
    // ClientQuotaManager.updateQuota's quotaTypesEnabled.
    if (_quotas.back().first.user_kind != absent) {
      _enabled |= _quotas.back().first.client_kind != absent ? user_client_id_enabled : user_enabled;
    } else {
      _enabled |= client_id_enabled;
    }
  }
  std::sort(_quotas.begin(), _quotas.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
}

const double* quota_table::find(int8_t user_kind, const std::string& user, int8_t client_kind,
                                const std::string& client_id) const {
  entity_key k{user_kind, user_kind == named ? user : std::string(), client_kind,
               client_kind == named ? client_id : std::string()};
  auto it = std::lower_bound(_quotas.begin(), _quotas.end(), k,
                             [](const auto& entry, const entity_key& key) { return entry.first < key; });
  if (it == _quotas.end() || !(it->first == k)) return nullptr;
  return &it->second;
}

std::optional<double> quota_table::limit(const quota_tags& tags) const {
  const double* q = nullptr;
  const std::string& user = tags.user;
  const std::string& client = tags.client_id;
  if (!user.empty() && !client.empty()) {
    q = find(named, user, named, client);
    if (!q) q = find(named, user, default_entity, "");
    if (!q) q = find(default_entity, "", named, client);
    if (!q) q = find(default_entity, "", default_entity, "");
  } else if (!user.empty()) {
    q = find(named, user, absent, "");
    if (!q) q = find(default_entity, "", absent, "");
  } else if (!client.empty()) {
    q = find(absent, "", named, client);
    if (!q) q = find(absent, "", default_entity, "");
  }
  if (!q) return std::nullopt;
  return *q;
}

quota_resolution quota_table::resolve(const std::string& user, const std::string& client_id) const {
  quota_resolution out;
  switch (_enabled) {
    case 0:
    case client_id_enabled:
      out.tags = {"", client_id};
      break;
    case user_enabled:
      out.tags = {user, ""};
      break;
    case user_client_id_enabled:
      out.tags = {user, client_id};
      break;
    default:
      // Several levels: the most specific configured one names the group (KIP-55's order).
      if (has(named, user, named, client_id) || has(named, user, default_entity, "")) {
        out.tags = {user, client_id};
      } else if (has(named, user, absent, "")) {
        out.tags = {user, ""};
      } else if (has(default_entity, "", named, client_id) || has(default_entity, "", default_entity, "")) {
        out.tags = {user, client_id};
      } else if (has(default_entity, "", absent, "")) {
        out.tags = {user, ""};
      } else {
        out.tags = {"", client_id};
      }
  }
  out.bound = limit(out.tags);
  return out;
}

// ---- client_quota_manager ----

struct client_quota_manager::sensor {
  std::mutex mutex;
  rate_stat rate;
  token_bucket tokens;  // controller_mutation's sensors
  int64_t created_ms = 0;
};

struct quota_sensor_registry {
  struct key {
    client_quota_type type;
    quota_tags tags;
    friend auto operator<=>(const key&, const key&) = default;
    friend bool operator==(const key&, const key&) = default;
  };
  std::map<key, std::shared_ptr<client_quota_manager::sensor>> sensors;
};

struct client_quota_manager::shard_slot {
  std::mutex mutex;  // only the slot of threads that are no shard is shared
  std::shared_ptr<const metadata::client_quota_map> source;
  std::array<quota_table, client_quota_type_count> tables;
  std::map<quota_sensor_registry::key, std::shared_ptr<sensor>> sensors;
  uint64_t generation = 0;
};

client_quota_manager::client_quota_manager(quota_window window, size_t shard_count,
                                           quota_window controller_window)
    : _window(window),
      _controller_window(controller_window),
      _registry(std::make_unique<quota_sensor_registry>()) {
  for (auto* w : {&_window, &_controller_window}) {
    if (w->samples < 1) w->samples = 1;
    if (w->window_seconds < 1) w->window_seconds = 1;
  }
  for (size_t i = 0; i <= shard_count; ++i) _slots.push_back(std::make_unique<shard_slot>());
}

client_quota_manager::~client_quota_manager() = default;

int64_t client_quota_manager::steady_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

client_quota_manager::shard_slot& client_quota_manager::slot() {
  const int shard = current_shard();
  if (shard >= 0 && static_cast<size_t>(shard) + 1 < _slots.size())
    return *_slots[static_cast<size_t>(shard)];
  return *_slots.back();
}

const quota_table& client_quota_manager::table_for(shard_slot& s, const metadata::client_quotas_image& quotas,
                                                   client_quota_type type) {
  if (s.source != quotas.entities) {
    s.source = quotas.entities;
    for (size_t t = 0; t < client_quota_type_count; ++t) {
      s.tables[t] = quota_table(*quotas.entities, quota_key(static_cast<client_quota_type>(t)));
    }
  }
  return s.tables[static_cast<size_t>(type)];
}

std::shared_ptr<client_quota_manager::sensor> client_quota_manager::sensor_for(shard_slot& s,
                                                                               client_quota_type type,
                                                                               const quota_tags& tags,
                                                                               int64_t now_ms) {
  const uint64_t generation = _generation.load(std::memory_order_acquire);
  if (s.generation != generation) {
    s.sensors.clear();
    s.generation = generation;
  }
  quota_sensor_registry::key key{type, tags};
  if (auto it = s.sensors.find(key); it != s.sensors.end()) return it->second;
  std::lock_guard lock(_registry_mutex);
  if (now_ms - _last_purge_ms >= purge_interval_ms) {
    _last_purge_ms = now_ms;
    bool purged = false;
    for (auto it = _registry->sensors.begin(); it != _registry->sensors.end();) {
      int64_t last = 0;
      {
        std::lock_guard sensor_lock(it->second->mutex);
        last = std::max(it->second->rate.last_event_ms(), it->second->created_ms);
      }
      if (now_ms - last >= inactive_sensor_expiration_ms) {
        it = _registry->sensors.erase(it);
        purged = true;
      } else {
        ++it;
      }
    }
    if (purged) {
      _generation.fetch_add(1, std::memory_order_acq_rel);
      s.sensors.clear();
      s.generation = _generation.load(std::memory_order_acquire);
    }
  }
  auto& found = _registry->sensors[key];
  if (!found) {
    found = std::make_shared<sensor>();
    found->created_ms = now_ms;
  }
  s.sensors[key] = found;
  return found;
}

client_quota_manager::charge client_quota_manager::record(const metadata::client_quotas_image& quotas,
                                                          client_quota_type type, const std::string& user,
                                                          const std::string& client_id, double value) {
  return record(quotas, type, user, client_id, value, steady_now_ms());
}

client_quota_manager::charge client_quota_manager::record(const metadata::client_quotas_image& quotas,
                                                          client_quota_type type, const std::string& user,
                                                          const std::string& client_id, double value,
                                                          int64_t now_ms) {
  charge out;
  if (quotas.empty()) return out;
  shard_slot& s = slot();
  std::unique_lock slot_lock(s.mutex, std::defer_lock);
  if (&s == _slots.back().get()) slot_lock.lock();
  const quota_table& table = table_for(s, quotas, type);
  if (table.empty()) return out;
  const quota_resolution r = table.resolve(user, client_id);
  if (!r.bound) return out;
  auto target = sensor_for(s, type, r.tags, now_ms);
  std::lock_guard lock(target->mutex);
  target->rate.record(_window, value, now_ms);
  const double rate = target->rate.measure(_window, now_ms);
  if (rate > *r.bound) {
    int64_t throttle = throttle_time_ms(rate, *r.bound, target->rate.window_size_ms(_window, now_ms));
    // ClientRequestQuotaManager.throttleTime: at most one window.
    if (type == client_quota_type::request) throttle = std::min(throttle, _window.window_ms());
    out.throttle_ms = static_cast<int32_t>(std::clamp<int64_t>(throttle, 0, INT32_MAX));
  }
  out.sensor = target;
  out.value = value;
  out.at_ms = now_ms;
  return out;
}

void client_quota_manager::undo(const charge& c) {
  if (!c.sensor) return;
  auto* target = static_cast<sensor*>(c.sensor.get());
  std::lock_guard lock(target->mutex);
  // Rate keeps the sum of each sample: a negative value brings the total back.
  target->rate.record(_window, -c.value, c.at_ms);
}

std::optional<double> client_quota_manager::max_value_in_window(const metadata::client_quotas_image& quotas,
                                                                client_quota_type type,
                                                                const std::string& user,
                                                                const std::string& client_id) {
  if (quotas.empty()) return std::nullopt;
  shard_slot& s = slot();
  std::unique_lock slot_lock(s.mutex, std::defer_lock);
  if (&s == _slots.back().get()) slot_lock.lock();
  const quota_table& table = table_for(s, quotas, type);
  if (table.empty()) return std::nullopt;
  const auto r = table.resolve(user, client_id);
  if (!r.bound) return std::nullopt;
  return *r.bound * (_window.samples - 1) * _window.window_seconds;
}

controller_mutation_quota client_quota_manager::mutation_quota(const metadata::client_quotas_image& quotas,
                                                               const std::string& user,
                                                               const std::string& client_id, bool strict) {
  controller_mutation_quota out;
  out._strict = strict;
  if (quotas.empty()) return out;
  shard_slot& s = slot();
  std::unique_lock slot_lock(s.mutex, std::defer_lock);
  if (&s == _slots.back().get()) slot_lock.lock();
  const quota_table& table = table_for(s, quotas, client_quota_type::controller_mutation);
  if (table.empty()) return out;
  const auto r = table.resolve(user, client_id);
  if (!r.bound) return out;
  out._sensor = sensor_for(s, client_quota_type::controller_mutation, r.tags, steady_now_ms());
  out._bound = *r.bound;
  out._burst = static_cast<double>(_controller_window.samples) * _controller_window.window_seconds * *r.bound;
  return out;
}

bool controller_mutation_quota::record(double permits) {
  return record(permits, client_quota_manager::steady_now_ms());
}

bool controller_mutation_quota::record(double permits, int64_t now_ms) {
  if (!_sensor) return true;
  auto* target = static_cast<client_quota_manager::sensor*>(_sensor.get());
  std::lock_guard lock(target->mutex);
  // The time to bring the tokens back to zero: -tokens / bound seconds.
  auto violated = [&](double tokens) {
    _last_throttle_ms = std::llround(-tokens / _bound * 1000.0);
    _last_recorded_ms = now_ms;
  };
  if (_strict) {
    // StrictControllerMutationQuota: check first, then take the permits unchecked.
    const double tokens = target->tokens.measure(_bound, _burst, now_ms);
    if (tokens < 0) {
      violated(tokens);
      return false;
    }
    target->tokens.record(_bound, _burst, permits, now_ms);
    return true;
  }
  // PermissiveControllerMutationQuota: take them, then throttle when the tokens went below zero.
  target->tokens.record(_bound, _burst, permits, now_ms);
  const double tokens = target->tokens.measure(_bound, _burst, now_ms);
  if (tokens < 0) violated(tokens);
  return true;
}

int32_t controller_mutation_quota::throttle_time_ms() const {
  return throttle_time_ms(client_quota_manager::steady_now_ms());
}

int32_t controller_mutation_quota::throttle_time_ms(int64_t now_ms) const {
  const int64_t left = _last_throttle_ms - (now_ms - _last_recorded_ms);
  return static_cast<int32_t>(std::clamp<int64_t>(left, 0, INT32_MAX));
}

size_t client_quota_manager::sensor_count() const {
  std::lock_guard lock(_registry_mutex);
  return _registry->sensors.size();
}

}  // namespace mala::broker
