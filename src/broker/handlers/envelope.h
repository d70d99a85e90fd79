// Envelope (key 58, v0, KIP-590): a broker forwards a client's request to the active controller inside an
// Envelope, with the client's principal (Kafka's DefaultKafkaPrincipalBuilder serialization:
// DefaultPrincipalData v0) and address. Served on controller listeners, as Kafka's
// ControllerApis.handleEnvelopeRequest: CLUSTER_ACTION on the cluster for the forwarding broker
// (CLUSTER_AUTHORIZATION_FAILED), PRINCIPAL_DESERIALIZATION_FAILURE for a principal that cannot be read,
// INVALID_REQUEST for an inner API that is not one a broker forwards (Kafka's forwardable admin APIs, never
// an Envelope), UNSUPPORTED_VERSION for an inner request Mala cannot read; otherwise the inner request runs
// as if its client had sent it on this listener (authorized as that principal) and its answer, header
// included, is the envelope's ResponseData. In a cluster of Kafka and Mala nodes this is how a Kafka broker's
// CreateTopics, configs, ACLs or DescribeQuorum reach a Mala controller.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/envelope_request.h"
#include "mala/protocol/messages/envelope_response.h"

namespace mala::broker::handlers {

struct envelope_handler {
  using request = protocol::envelope_request;
  using response = protocol::envelope_response;
  static constexpr int16_t api_key = 58;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;
  static constexpr bool controller_only = true;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

// The principal of an Envelope's RequestPrincipal (DefaultPrincipalData v0: type, name, token authenticated,
// tagged fields, after an int16 version); nullopt for bytes that are not one.
struct forwarded_principal {
  std::string type;
  std::string name;
};
std::optional<forwarded_principal> decode_forwarded_principal(std::span<const uint8_t> bytes);

// Whether an inner answer (`response`: response header and body, of request `api_key` at `api_version`)
// holds NOT_CONTROLLER in any of its error codes: Kafka's RequestChannel.buildResponseSend then answers the
// Envelope itself NOT_CONTROLLER. False for bytes that do not decode.
bool response_holds_not_controller(int16_t api_key, int16_t api_version, std::span<const uint8_t> response);

}  // namespace mala::broker::handlers
