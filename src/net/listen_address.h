// Where a listener binds, from its configured host (net-internal: kafka_server and http_server).
#pragma once

#include <cstdint>
#include <string>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>

#include "mala/common/result.h"

namespace mala::net {

struct listen_address {
  asio::ip::tcp::endpoint endpoint;
  bool dual_stack = false;  // an IPv6 socket also accepting IPv4 (v6_only off)
};

// An empty host, "::" or "[::]": every interface, IPv4 and IPv6; "0.0.0.0": every IPv4 one; anything else is
// resolved (the first address). unknown_server_error with the resolver's reason when it cannot be.
result<listen_address> listen_address_for(asio::io_context& context, const std::string& host, uint16_t port);

// Opens `acceptor` on `address` with SO_REUSEADDR (and v6_only off for a dual-stack address); not bound yet.
std::error_code open_acceptor(asio::ip::tcp::acceptor& acceptor, const listen_address& address);

}  // namespace mala::net
