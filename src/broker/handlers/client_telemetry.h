// GetTelemetrySubscriptions (key 71, v0) and PushTelemetry (key 72, v0): KIP-714 client telemetry, served by
// the node's client_telemetry (broker/client_telemetry.h) with the client's id, software (ApiVersions v3+)
// and address as the attributes subscriptions match. Without it (no metrics.listeners, Kafka's "no
// ClientTelemetryReceiver") neither is advertised in ApiVersions and a request is UNSUPPORTED_VERSION, as
// Kafka answers it. No ACL guards them in Kafka either.
#pragma once

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/get_telemetry_subscriptions_request.h"
#include "mala/protocol/messages/get_telemetry_subscriptions_response.h"
#include "mala/protocol/messages/push_telemetry_request.h"
#include "mala/protocol/messages/push_telemetry_response.h"

namespace mala::broker::handlers {

struct get_telemetry_subscriptions_handler {
  using request = protocol::get_telemetry_subscriptions_request;
  using response = protocol::get_telemetry_subscriptions_response;
  static constexpr int16_t api_key = 71;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;
  static constexpr bool client_telemetry_only = true;

  static response handle(request_context& ctx, const request& req, int16_t version);
};

struct push_telemetry_handler {
  using request = protocol::push_telemetry_request;
  using response = protocol::push_telemetry_response;
  static constexpr int16_t api_key = 72;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;
  static constexpr bool client_telemetry_only = true;

  static response handle(request_context& ctx, const request& req, int16_t version);
};

}  // namespace mala::broker::handlers
