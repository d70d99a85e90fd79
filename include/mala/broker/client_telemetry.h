// Client telemetry (KIP-714), as Kafka's ClientMetricsManager serves it: GetTelemetrySubscriptions tells a
// client which of its metrics to push and how often, from the CLIENT_METRICS subscriptions in the metadata
// image (controller/client_metrics_config.h) that match the client; PushTelemetry takes the pushed
// OpenTelemetry metrics. Kafka hands them to a ClientTelemetryReceiver plugin; Mala keeps the latest value of
// every pushed series and serves them on the metrics endpoint (append_prometheus), so the node exists only
// where metrics.listeners is set, as Kafka advertises the two APIs only with a receiver configured.
//
// Kafka's rules, per client instance (an id the broker assigns on the first GetTelemetrySubscriptions):
// - subscription id: CRC-32C of the requested metrics and the interval, XOR the instance id's hash, so every
//   Mala broker computes the same one (Kafka prints the metrics in HashSet order, Mala sorted: a client
//   moving between a Kafka and a Mala broker is told UNKNOWN_SUBSCRIPTION_ID once and asks again); a push
//   with another id is UNKNOWN_SUBSCRIPTION_ID, and a subscription change gives every instance a new id at
//   its next request;
// - a GetTelemetrySubscriptions sooner than the push interval after the instance's previous request, or a
//   push sooner than the interval after its previous push, is THROTTLING_QUOTA_EXCEEDED; except the first
//   push after a GetTelemetrySubscriptions (clients jitter), a terminating push, and a
//   GetTelemetrySubscriptions right after an UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE push
//   (Kafka 4.4's rule; earlier versions meant it but throttled those too);
// - a push after a terminating one is INVALID_REQUEST; compressed with an unknown codec,
//   UNSUPPORTED_COMPRESSION_TYPE; over telemetry.max.bytes, TELEMETRY_TOO_LARGE; not decodable,
//   INVALID_RECORD;
// - an instance is forgotten max(60 s, 3 push intervals) after its last request, with its series; at most
//   16,384 instances are kept (the least recently seen goes first).
//
// Exposition (the OpenTelemetry Collector's Prometheus conventions): the metric name with every character
// outside [a-zA-Z0-9_:] as '_', a monotonic sum as a counter (`_total` appended when missing), anything else
// a gauge; labels client_instance_id, client_id, client_software_name, client_software_version, then the
// resource's and the point's attributes. Delta sums are added up into the counter. Only what the instance's
// subscription asked for is kept, and never a name the node's own series use (kafka_*, mala_*, process_*),
// so a client cannot disturb the broker's metrics; for a name, the first kind seen wins. Bounded in bytes as
// well as in series: label values are cut at 512 bytes, a series' labels at 4 KiB, an instance's series at
// 1 MiB and all at 64 MiB; what does not fit is dropped.
//
// Threads: every method may be called from any shard; one mutex guards the state (telemetry is not on the
// data path: a client sends a request every push interval). A push's payload is decompressed and decoded
// outside it.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "mala/common/uuid.h"
#include "mala/controller/client_metrics_config.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/get_telemetry_subscriptions_response.h"
#include "mala/protocol/messages/push_telemetry_request.h"
#include "mala/protocol/messages/push_telemetry_response.h"
#include "mala/protocol/otlp_metrics.h"

namespace mala::broker {

struct client_telemetry_options {
  int32_t telemetry_max_bytes = 1024 * 1024;  // telemetry.max.bytes: a push's compressed metrics
  size_t max_instances = 16384;
  // What one push may decompress to, and what the series of one instance and of all may number.
  size_t max_decompressed_bytes = 16 * 1024 * 1024;
  size_t max_series_per_instance = 5000;
  size_t max_series = 200000;
  size_t max_bytes_per_instance = 1024 * 1024;  // of stored names and labels
  size_t max_bytes = 64 * 1024 * 1024;
};

// Who sent a telemetry request: the attributes a subscription's `match` tests.
struct telemetry_client {
  std::string client_id;
  std::string software_name;
  std::string software_version;
  std::string source_address;
  std::string source_port;
};

class client_telemetry {
 public:
  explicit client_telemetry(client_telemetry_options options = {});

  protocol::get_telemetry_subscriptions_response get_subscriptions(const metadata::metadata_image& image,
                                                                   const uuid& requested_instance_id,
                                                                   const telemetry_client& client,
                                                                   int64_t now_ms);
  protocol::push_telemetry_response push(const metadata::metadata_image& image,
                                         const protocol::push_telemetry_request& request,
                                         const telemetry_client& client, int64_t now_ms);

  // The pushed series in Prometheus text format (# HELP / # TYPE once per name), appended to `out`.
  void append_prometheus(std::string& out, int64_t now_ms);

  size_t instance_count() const;
  size_t series_count() const;

 private:
  struct family {
    bool counter = false;
    std::string help;
    std::map<std::string, double> by_labels;  // labels as a="x",... -> value
  };
  struct instance {
    uuid id;
    std::map<std::string, std::string> attributes;  // the match attributes
    uint64_t subscription_version = 0;
    int32_t subscription_id = 0;
    std::vector<std::string> metrics;
    int32_t interval_ms = controller::client_metrics_default_interval_ms;
    std::optional<int64_t> last_get_ms;
    std::optional<int64_t> last_push_ms;
    int64_t last_seen_ms = 0;
    bool terminating = false;
    error_code last_error = error_code::none;
    std::map<std::string, family> families;  // by exposed name
    size_t series = 0;
    size_t bytes = 0;
    std::list<std::string>::iterator recency;  // its place in _by_recency
  };

  // Re-reads the subscriptions when the image's configs changed (an image older than the last one read is
  // ignored: handlers on other shards may still hold it).
  void refresh_subscriptions(const metadata::metadata_image& image);
  // The instance, created (or re-evaluated after a subscription change) with the client's attributes.
  instance& instance_for(const uuid& id, const telemetry_client& client, int64_t now_ms);
  void evaluate(instance& in) const;
  void forget(std::unordered_map<std::string, instance>::iterator it);
  void forget_expired(int64_t now_ms);
  // The push's metrics, decompressed and decoded (without the lock: it may take milliseconds).
  result<protocol::otlp_metrics_data> decode(const protocol::push_telemetry_request& request) const;
  void store(instance& in, const protocol::otlp_metrics_data& data);

  client_telemetry_options _options;
  mutable std::mutex _mutex;
  persistent_map<metadata::config_resource, metadata::config_map> _configs_seen;  // what was read last
  bool _configs_read = false;
  int64_t _configs_offset = -1;  // the metadata offset of the image read last
  std::vector<controller::client_metrics_subscription> _subscriptions;
  uint64_t _subscription_version = 0;
  std::unordered_map<std::string, instance> _instances;  // by uuid bytes
  std::list<std::string> _by_recency;                    // instance keys, most recently seen first
  size_t _series = 0;
  size_t _bytes = 0;
  int64_t _next_expiry_scan_ms = 0;
};

}  // namespace mala::broker
