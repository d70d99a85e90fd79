// SaslHandshake (key 17, v0-1) and SaslAuthenticate (key 36, v0-2) outside authentication. While a connection
// on a SASL listener authenticates, the dispatcher serves both through the connection's sasl_authenticator
// (broker/sasl_authenticator.h) and never reaches these handlers; they answer the requests Kafka's KafkaApis
// answers: on PLAINTEXT (and SSL) listeners and on connections already authenticated, ILLEGAL_SASL_STATE
// (SaslAuthenticate with "SaslAuthenticate request received after successful authentication").
#pragma once

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/sasl_authenticate_request.h"
#include "mala/protocol/messages/sasl_authenticate_response.h"
#include "mala/protocol/messages/sasl_handshake_request.h"
#include "mala/protocol/messages/sasl_handshake_response.h"

namespace mala::broker::handlers {

struct sasl_handshake_handler {
  using request = protocol::sasl_handshake_request;
  using response = protocol::sasl_handshake_response;
  static constexpr int16_t api_key = 17;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 1;

  static response handle(request_context& ctx, const request& req, int16_t version);
};

struct sasl_authenticate_handler {
  using request = protocol::sasl_authenticate_request;
  using response = protocol::sasl_authenticate_response;
  static constexpr int16_t api_key = 36;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 2;

  static response handle(request_context& ctx, const request& req, int16_t version);
};

}  // namespace mala::broker::handlers
