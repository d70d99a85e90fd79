// Turns framed requests into responses: parses the request header, checks the API and version against the
// handler table, runs the handler and frames the response header. Unknown APIs, unsupported versions (except
// ApiVersions, answered per KIP-511) and undecodable requests close the connection, as Apache Kafka does.
#pragma once

#include <optional>

#include "mala/broker/handler_table.h"
#include "mala/net/request_dispatcher.h"

namespace mala::broker {

class sasl_authenticator;

class broker_dispatcher final : public net::request_dispatcher {
 public:
  explicit broker_dispatcher(const broker_services& services) : _services(services) {}
  asio::awaitable<net::dispatch_result> dispatch(net::connection_info& connection, std::span<uint8_t> request,
                                                 net::ordering_point& order) override;
  // True when the metadata holds a request_percentage quota and the connection is not on a controller
  // listener (exempt, as Kafka's cluster actions): only then is a request's thread time metered.
  bool wants_request_meter(const net::connection_info& connection) const override;

  // dispatch() of a copy of `request` run to completion on a private event loop, for unit tests of handlers
  // that do not wait.
  net::dispatch_result dispatch_now(net::connection_info& connection, std::span<const uint8_t> request);

 private:
  // Parses the header and finds the handler; a result means the request is answered (or the connection
  // closed) without running a handler.
  std::optional<net::dispatch_result> parse_header(const net::connection_info& connection,
                                                   std::span<const uint8_t> request, protocol::wire_reader& r,
                                                   protocol::request_header& header,
                                                   const handler_entry*& entry, bool& flexible) const;
  // A parsed request, authenticated (the connection's SASL exchange is done): the handler run and its answer
  // framed.
  asio::awaitable<net::dispatch_result> serve(net::connection_info& connection, std::span<uint8_t> request,
                                              protocol::wire_reader& r,
                                              const protocol::request_header& header,
                                              const handler_entry& entry, bool flexible,
                                              net::ordering_point& order);
  // A request another broker forwarded in an Envelope (request_context::dispatch_inner): `connection` carries
  // the client's principal; the forwarding broker's connection authenticated already, so no SASL step.
  asio::awaitable<net::dispatch_result> dispatch_forwarded(net::connection_info& connection,
                                                           std::span<uint8_t> request);
  net::dispatch_result frame_response(const handler_entry& entry, const protocol::request_header& header,
                                      bool flexible, handler_outcome outcome) const;
  // SASL listeners (sasl_authenticator.h): the connection's authenticator, made on its first request; null on
  // other listeners.
  sasl_authenticator* authenticator_of(net::connection_info& connection) const;
  // SaslHandshake and SaslAuthenticate while the connection authenticates, and the bare tokens after a
  // SaslHandshake v0.
  net::dispatch_result sasl_handshake(net::connection_info& connection, sasl_authenticator& auth,
                                      const handler_entry& entry, const protocol::request_header& header,
                                      bool flexible, protocol::wire_reader& body) const;
  net::dispatch_result sasl_authenticate(net::connection_info& connection, sasl_authenticator& auth,
                                         const handler_entry& entry, const protocol::request_header& header,
                                         bool flexible, protocol::wire_reader& body) const;
  net::dispatch_result sasl_raw_token(net::connection_info& connection, sasl_authenticator& auth,
                                      std::span<const uint8_t> token) const;
  int64_t now_ms() const;

  const broker_services& _services;
};

}  // namespace mala::broker
