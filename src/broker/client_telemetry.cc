#include "mala/broker/client_telemetry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <string_view>

#include "mala/common/crc32c.h"
#include "mala/common/logging.h"
#include "mala/protocol/compression.h"
#include "mala/protocol/otlp_metrics.h"

namespace mala::broker {

namespace {

using protocol::compression_codec;

// What PushTelemetry may be compressed with, in Kafka's order of preference (ClientMetricsManager).
constexpr int8_t accepted_compression[] = {
    static_cast<int8_t>(compression_codec::zstd), static_cast<int8_t>(compression_codec::lz4),
    static_cast<int8_t>(compression_codec::gzip), static_cast<int8_t>(compression_codec::snappy)};
constexpr int64_t min_instance_lifetime_ms = 60 * 1000;

bool compression_known(int8_t id) {
  return id >= 0 && id <= static_cast<int8_t>(compression_codec::zstd);
}

std::string key_of(const uuid& id) {
  return std::string(id.bytes.begin(), id.bytes.end());
}

// Java's Uuid.hashCode: the two longs XORed, then their halves.
int32_t java_uuid_hash(const uuid& id) {
  uint64_t most = 0, least = 0;
  for (int i = 0; i < 8; ++i) most = (most << 8) | id.bytes[static_cast<size_t>(i)];
  for (int i = 8; i < 16; ++i) least = (least << 8) | id.bytes[static_cast<size_t>(i)];
  const uint64_t h = most ^ least;
  return static_cast<int32_t>(static_cast<uint32_t>(h >> 32) ^ static_cast<uint32_t>(h));
}

// ClientMetricsManager.computeSubscriptionId: CRC-32C of the metrics set as Java prints it ("[a, b]", here in
// sorted order) followed by the interval, XOR the instance id's hash.
int32_t subscription_id_of(const std::vector<std::string>& metrics, int32_t interval_ms, const uuid& id) {
  std::string text = "[";
  for (size_t i = 0; i < metrics.size(); ++i) text += (i ? ", " : "") + metrics[i];
  text += "]" + std::to_string(interval_ms);
  const uint32_t crc = crc32c({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  return static_cast<int32_t>(crc) ^ java_uuid_hash(id);
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == ':';
}

// Every character outside [a-zA-Z0-9_:] as '_', and '_' before a leading digit.
std::string prometheus_name(const std::string& name) {
  std::string out;
  out.reserve(name.size() + 1);
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) out += '_';
  for (char c : name) out += is_name_char(c) ? c : '_';
  return out;
}

std::string label_name(const std::string& key) {
  std::string out = prometheus_name(key);
  std::replace(out.begin(), out.end(), ':', '_');  // label names have no colons
  return out;
}

// The names the node's own series use (metrics_exporter.cc): a client may not push into them.
bool reserved_name(std::string_view name) {
  return name.starts_with("kafka_") || name.starts_with("mala_") || name.starts_with("process_");
}

// Bytes that are not UTF-8 (a client id may hold any) as U+FFFD: the text format is UTF-8.
std::string as_utf8(std::string_view text) {
  if (protocol::valid_utf8(text)) return std::string(text);
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    // Whole sequences that are valid are kept; any other byte is replaced.
    size_t n = 1;
    const auto b = static_cast<uint8_t>(text[i]);
    if (b >= 0xf0)
      n = 4;
    else if (b >= 0xe0)
      n = 3;
    else if (b >= 0xc0)
      n = 2;
    if (b >= 0x80 && i + n <= text.size() && protocol::valid_utf8(text.substr(i, n)) && n > 1) {
      out.append(text.substr(i, n));
      i += n - 1;
    } else if (b < 0x80) {
      out += static_cast<char>(b);
    } else {
      out += "\xEF\xBF\xBD";
    }
  }
  return out;
}

void append_escaped(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

constexpr size_t max_label_value_bytes = 512;
constexpr size_t max_labels_bytes = 4096;

// Labels as a="x",... in order; a name given twice keeps its first value, a reserved (__) name is left out, a
// value is cut at max_label_value_bytes (at a character boundary) and labels that would pass
// max_labels_bytes are left out.
class label_builder {
 public:
  void add(const std::string& key, std::string_view value) {
    std::string name = label_name(key);
    if (name.starts_with("__") || std::find(_names.begin(), _names.end(), name) != _names.end()) return;
    if (value.size() > max_label_value_bytes) {
      size_t cut = max_label_value_bytes;
      while (cut > 0 && (static_cast<uint8_t>(value[cut]) & 0xc0) == 0x80) --cut;
      value = value.substr(0, cut);
    }
    std::string label = (_text.empty() ? "" : ",") + name + "=\"";
    append_escaped(label, value);
    label += '"';
    if (_text.size() + label.size() > max_labels_bytes) return;
    _text += label;
    _names.push_back(std::move(name));
  }
  const std::string& text() const { return _text; }

 private:
  std::string _text;
  std::vector<std::string> _names;
};

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v);  // the shortest exact form
  return ec == std::errc{} ? std::string(buffer, end) : "NaN";
}

}  // namespace

client_telemetry::client_telemetry(client_telemetry_options options) : _options(options) {}

void client_telemetry::refresh_subscriptions(const metadata::metadata_image& image) {
  if (_configs_read && _configs_seen.shares_with(image.configs)) return;
  if (_configs_read && image.metadata_offset >= 0 && image.metadata_offset < _configs_offset) return;
  std::vector<controller::client_metrics_subscription> subscriptions;
  for (const auto& [resource, configs] : image.configs) {
    if (resource.type != metadata::config_resource_type::client_metrics) continue;
    auto parsed = controller::parse_client_metrics_configs(resource.name, configs);
    if (!parsed) {
      // The controller checked it; a log written by another version may still hold one this one refuses.
      subsystem_logger("broker")->warn("client metrics subscription {} ignored: {}", resource.name,
                                       parsed.error().message);
      continue;
    }
    subscriptions.push_back(std::move(*parsed));
  }
  const auto same = [](const controller::client_metrics_subscription& a,
                       const controller::client_metrics_subscription& b) {
    if (a.name != b.name || a.metrics != b.metrics || a.interval_ms != b.interval_ms ||
        a.match.size() != b.match.size())
      return false;
    return std::equal(a.match.begin(), a.match.end(), b.match.begin(), [](const auto& x, const auto& y) {
      return x.first == y.first && x.second.text == y.second.text;
    });
  };
  if (!_configs_read || subscriptions.size() != _subscriptions.size() ||
      !std::equal(subscriptions.begin(), subscriptions.end(), _subscriptions.begin(), same)) {
    _subscriptions = std::move(subscriptions);
    ++_subscription_version;
  }
  _configs_seen = image.configs;
  _configs_offset = image.metadata_offset;
  _configs_read = true;
}

void client_telemetry::evaluate(instance& in) const {
  int32_t interval = controller::client_metrics_default_interval_ms;
  std::set<std::string> metrics;
  bool all = false;
  for (const auto& s : _subscriptions) {
    if (!s.matches(in.attributes)) continue;
    for (const auto& m : s.metrics) {
      if (m == controller::client_metrics_all_metrics) all = true;
      metrics.insert(m);
    }
    interval = std::min(interval, s.interval_ms);
  }
  if (all) metrics = {std::string(controller::client_metrics_all_metrics)};
  in.metrics.assign(metrics.begin(), metrics.end());
  in.interval_ms = interval;
  in.subscription_id = subscription_id_of(in.metrics, interval, in.id);
  in.subscription_version = _subscription_version;
}

void client_telemetry::forget(std::unordered_map<std::string, instance>::iterator it) {
  _series -= it->second.series;
  _bytes -= it->second.bytes;
  _by_recency.erase(it->second.recency);
  _instances.erase(it);
}

client_telemetry::instance& client_telemetry::instance_for(const uuid& id, const telemetry_client& client,
                                                           int64_t now_ms) {
  const std::string key = key_of(id);
  auto it = _instances.find(key);
  if (it == _instances.end()) {
    if (_instances.size() >= _options.max_instances && !_by_recency.empty())
      forget(_instances.find(_by_recency.back()));
    instance fresh;
    fresh.id = id;
    fresh.attributes = {{"client_instance_id", id.to_string()},
                        {"client_id", as_utf8(client.client_id)},
                        {"client_software_name", client.software_name},
                        {"client_software_version", client.software_version},
                        {"client_source_address", client.source_address},
                        {"client_source_port", client.source_port}};
    evaluate(fresh);
    _by_recency.push_front(key);
    fresh.recency = _by_recency.begin();
    it = _instances.emplace(key, std::move(fresh)).first;
  } else {
    _by_recency.splice(_by_recency.begin(), _by_recency, it->second.recency);
    if (it->second.subscription_version != _subscription_version) {
      // A new subscription set: the instance starts over with what it now matches (Kafka makes a new
      // instance, its request times reset); its pushed series stay.
      instance& in = it->second;
      evaluate(in);
      in.last_get_ms.reset();
      in.last_push_ms.reset();
      in.terminating = false;
      in.last_error = error_code::none;
    }
  }
  it->second.last_seen_ms = now_ms;
  return it->second;
}

void client_telemetry::forget_expired(int64_t now_ms) {
  if (now_ms < _next_expiry_scan_ms) return;
  _next_expiry_scan_ms = now_ms + 1000;
  for (auto it = _instances.begin(); it != _instances.end();) {
    const int64_t lifetime = std::max<int64_t>(min_instance_lifetime_ms, 3 * int64_t{it->second.interval_ms});
    auto next = std::next(it);
    if (now_ms - it->second.last_seen_ms > lifetime) forget(it);
    it = next;
  }
}

protocol::get_telemetry_subscriptions_response client_telemetry::get_subscriptions(
    const metadata::metadata_image& image, const uuid& requested_instance_id, const telemetry_client& client,
    int64_t now_ms) {
  std::lock_guard lock(_mutex);
  forget_expired(now_ms);
  refresh_subscriptions(image);
  uuid id = requested_instance_id;
  if (id.is_zero()) {
    do {
      id = uuid::random();
    } while (_instances.contains(key_of(id)));
  }
  instance& in = instance_for(id, client, now_ms);
  protocol::get_telemetry_subscriptions_response resp;
  // maybeUpdateGetRequestTimestamp, with Kafka 4.4's exemption after the two push errors that send the
  // client back for a new subscription.
  std::optional<int64_t> last = in.last_get_ms;
  if (in.last_push_ms && (!last || *in.last_push_ms > *last)) last = in.last_push_ms;
  const bool exempt = in.last_error == error_code::unknown_subscription_id ||
                      in.last_error == error_code::unsupported_compression_type;
  if (last && now_ms - *last < in.interval_ms && !exempt) {
    resp.error_code = to_wire(error_code::throttling_quota_exceeded);
    return resp;
  }
  in.last_get_ms = now_ms;
  in.last_error = error_code::none;
  resp.client_instance_id = id;
  resp.subscription_id = in.subscription_id;
  resp.accepted_compression_types.assign(std::begin(accepted_compression), std::end(accepted_compression));
  resp.push_interval_ms = in.interval_ms;
  resp.telemetry_max_bytes = _options.telemetry_max_bytes;
  // Cumulative sums: a Prometheus counter is cumulative, so no sum needs adding up across pushes. Kafka
  // asks for deltas because its receivers are plugins; the field is the broker's to choose.
  resp.delta_temporality = false;
  resp.requested_metrics = in.metrics;
  return resp;
}

protocol::push_telemetry_response client_telemetry::push(const metadata::metadata_image& image,
                                                         const protocol::push_telemetry_request& request,
                                                         const telemetry_client& client, int64_t now_ms) {
  protocol::push_telemetry_response resp;
  const uuid& id = request.client_instance_id;
  // Uuid.RESERVED: zero and METADATA_TOPIC_ID (1).
  uuid one;
  one.bytes[15] = 1;
  if (id.is_zero() || id == one) {
    resp.error_code = to_wire(error_code::invalid_request);
    return resp;
  }
  std::unique_lock lock(_mutex);
  forget_expired(now_ms);
  refresh_subscriptions(image);
  instance& in = instance_for(id, client, now_ms);
  const auto refuse = [&](error_code e) {
    in.last_error = e;
    in.terminating = in.terminating || request.terminating;
    resp.error_code = to_wire(e);
    return resp;
  };
  if (in.terminating) return refuse(error_code::invalid_request);
  // maybeUpdatePushRequestTimestamp: the first push after a GetTelemetrySubscriptions is always taken.
  const bool after_get = in.last_get_ms && (!in.last_push_ms || *in.last_get_ms > *in.last_push_ms);
  const bool on_time = after_get || !in.last_push_ms || now_ms - *in.last_push_ms >= in.interval_ms;
  if (on_time) in.last_push_ms = now_ms;
  if (!on_time && !request.terminating) return refuse(error_code::throttling_quota_exceeded);
  if (request.subscription_id != in.subscription_id) return refuse(error_code::unknown_subscription_id);
  if (!compression_known(request.compression_type)) return refuse(error_code::unsupported_compression_type);
  if (request.metrics.size() > static_cast<size_t>(_options.telemetry_max_bytes))
    return refuse(error_code::telemetry_too_large);
  in.terminating = request.terminating;
  in.last_error = error_code::none;
  if (request.metrics.empty()) return resp;
  lock.unlock();
  auto data = decode(request);
  lock.lock();
  // The instance may have gone meanwhile (expired, or evicted for a newer one): the push is answered anyway.
  const auto it = _instances.find(key_of(id));
  if (!data) {
    subsystem_logger("broker")->info("telemetry push of client {} ({}) refused: {}", id.to_string(),
                                     as_utf8(client.client_id), data.error().message);
    if (it != _instances.end()) it->second.last_error = error_code::invalid_record;
    resp.error_code = to_wire(error_code::invalid_record);
    return resp;
  }
  if (it != _instances.end()) store(it->second, *data);
  return resp;
}

result<protocol::otlp_metrics_data> client_telemetry::decode(
    const protocol::push_telemetry_request& request) const {
  const auto codec = static_cast<compression_codec>(request.compression_type);
  std::vector<uint8_t> plain;
  std::span<const uint8_t> bytes = request.metrics;
  if (codec != compression_codec::none) {
    auto decompressed = protocol::decompress(codec, request.metrics, _options.max_decompressed_bytes);
    if (!decompressed) return decompressed.error();
    plain = std::move(*decompressed);
    bytes = plain;
  }
  return protocol::decode_otlp_metrics(bytes);
}

void client_telemetry::store(instance& in, const protocol::otlp_metrics_data& data) {
  // What the subscription asked for: a name starting with one of its prefixes ("*": any).
  const bool all = in.metrics.size() == 1 && in.metrics.front() == controller::client_metrics_all_metrics;
  std::vector<bool> wanted(data.metrics.size());
  std::vector<std::string> names(data.metrics.size());
  for (size_t m = 0; m < data.metrics.size(); ++m) {
    const auto& metric = data.metrics[m];
    bool asked = all;
    for (const auto& prefix : in.metrics) asked = asked || metric.name.starts_with(prefix);
    const bool counter = metric.kind == protocol::otlp_metric_kind::sum && metric.monotonic;
    names[m] = prometheus_name(metric.name);
    if (counter && !names[m].ends_with("_total")) names[m] += "_total";
    wanted[m] = asked && !reserved_name(names[m]);
  }
  // The labels every point of a resource starts with, built once per resource.
  std::vector<label_builder> resource_labels(data.resources.size());
  for (size_t r = 0; r < data.resources.size(); ++r) {
    auto& b = resource_labels[r];
    for (const char* key :
         {"client_instance_id", "client_id", "client_software_name", "client_software_version"})
      b.add(key, in.attributes.at(key));
    for (const auto& attr : data.resources[r]) b.add(attr.key, attr.value);
  }
  for (const auto& p : data.points) {
    if (p.metric >= data.metrics.size() || p.resource >= data.resources.size() || !wanted[p.metric]) continue;
    const auto& metric = data.metrics[p.metric];
    const bool counter = metric.kind == protocol::otlp_metric_kind::sum && metric.monotonic;
    const std::string& name = names[p.metric];
    label_builder labels = resource_labels[p.resource];
    for (const auto& attr : p.attributes) labels.add(attr.key, attr.value);
    auto f = in.families.find(name);
    if (f != in.families.end() && f->second.counter != counter) continue;  // the first kind seen wins
    double* value = nullptr;
    if (f != in.families.end()) {
      if (auto s = f->second.by_labels.find(labels.text()); s != f->second.by_labels.end())
        value = &s->second;
    }
    if (!value) {
      const size_t cost =
          labels.text().size() + (f == in.families.end() ? name.size() + metric.description.size() : 0);
      if (in.series >= _options.max_series_per_instance || _series >= _options.max_series ||
          in.bytes + cost > _options.max_bytes_per_instance || _bytes + cost > _options.max_bytes)
        continue;
      if (f == in.families.end()) {
        f = in.families.emplace(name, family{counter, as_utf8(metric.description), {}}).first;
      }
      value = &f->second.by_labels.emplace(labels.text(), 0.0).first->second;
      ++in.series;
      ++_series;
      in.bytes += cost;
      _bytes += cost;
    }
    if (metric.kind == protocol::otlp_metric_kind::sum &&
        metric.temporality == protocol::otlp_temporality::delta)
      *value += p.value;
    else
      *value = p.value;
  }
}

void client_telemetry::append_prometheus(std::string& out, int64_t now_ms) {
  std::lock_guard lock(_mutex);
  forget_expired(now_ms);
  // One family per name across instances: its # HELP and # TYPE lines once, then the series of every instance
  // whose kind for it agrees with the first one's.
  std::map<std::string, std::vector<const family*>> by_name;
  for (const auto& [key, in] : _instances) {
    for (const auto& [name, f] : in.families) by_name[name].push_back(&f);
  }
  for (const auto& [name, families] : by_name) {
    const family& first = *families.front();
    if (!first.help.empty()) {
      out += "# HELP " + name + " ";
      for (char c : first.help) {
        if (c == '\\')
          out += "\\\\";
        else
          out += c == '\n' ? ' ' : c;
      }
      out += '\n';
    }
    out += "# TYPE " + name + (first.counter ? " counter\n" : " gauge\n");
    for (const family* f : families) {
      if (f->counter != first.counter) continue;
      for (const auto& [labels, value] : f->by_labels)
        out += name + "{" + labels + "} " + format_value(value) + "\n";
    }
  }
}

size_t client_telemetry::instance_count() const {
  std::lock_guard lock(_mutex);
  return _instances.size();
}

size_t client_telemetry::series_count() const {
  std::lock_guard lock(_mutex);
  return _series;
}

}  // namespace mala::broker
