#include "listen_address.h"

#include <asio/ip/v6_only.hpp>

namespace mala::net {

using asio::ip::tcp;

result<listen_address> listen_address_for(asio::io_context& context, const std::string& host, uint16_t port) {
  if (host.empty() || host == "::" || host == "[::]")
    return listen_address{tcp::endpoint(tcp::v6(), port), true};
  if (host == "0.0.0.0") return listen_address{tcp::endpoint(tcp::v4(), port), false};
  std::error_code ec;
  tcp::resolver resolver(context);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) {
    return status::error(error_code::unknown_server_error,
                         "cannot resolve host '" + host + "': " + (ec ? ec.message() : "no address"));
  }
  return listen_address{results.begin()->endpoint(), false};
}

std::error_code open_acceptor(tcp::acceptor& acceptor, const listen_address& address) {
  std::error_code ec;
  acceptor.open(address.endpoint.protocol(), ec);
  if (!ec && address.dual_stack) acceptor.set_option(asio::ip::v6_only(false), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  return ec;
}

}  // namespace mala::net
