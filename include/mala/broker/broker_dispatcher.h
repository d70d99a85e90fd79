// Turns framed requests into responses: parses the request header, checks the API and version against the
// handler table, runs the handler and frames the response header. Unknown APIs, unsupported versions (except
// ApiVersions, answered per KIP-511) and undecodable requests close the connection, as Apache Kafka does.
#pragma once

#include "mala/broker/handler_table.h"
#include "mala/net/request_dispatcher.h"

namespace mala::broker {

class broker_dispatcher final : public net::request_dispatcher {
 public:
  explicit broker_dispatcher(const broker_services& services) : _services(services) {}
  asio::awaitable<net::dispatch_result> dispatch(net::connection_info& connection,
                                                 std::span<const uint8_t> request) override;

  // The synchronous core of dispatch(), separate so it can be unit-tested without an event loop.
  net::dispatch_result dispatch_now(net::connection_info& connection, std::span<const uint8_t> request);

 private:
  const broker_services& _services;
};

}  // namespace mala::broker
