// The boundary between the network server and the broker: the server frames requests and hands each complete
// request (header + body, without the size prefix) to a dispatcher, then writes back what the dispatcher
// returns. A connection's requests are dispatched one at a time, in arrival order, so responses go out in
// request order as Kafka clients require.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>

namespace mala::net {

// What the broker knows about the connection a request arrived on. Owned by the connection, touched only on
// its shard.
struct connection_info {
  uint64_t id = 0;
  size_t shard = 0;
  std::string listener_name;
  std::string peer;  // "host:port"
  // From ApiVersions v3+ (KIP-511), for logs.
  std::string client_software_name;
  std::string client_software_version;
};

struct dispatch_result {
  enum class action : uint8_t { respond, no_response, close };
  action what = action::respond;
  std::vector<uint8_t> response;  // response header + body, without the size prefix
  std::string close_reason;       // logged when what == close

  static dispatch_result respond_with(std::vector<uint8_t> bytes) {
    return {action::respond, std::move(bytes), {}};
  }
  static dispatch_result close(std::string reason) { return {action::close, {}, std::move(reason)}; }
  static dispatch_result nothing() { return {action::no_response, {}, {}}; }
};

class request_dispatcher {
 public:
  virtual ~request_dispatcher() = default;
  virtual asio::awaitable<dispatch_result> dispatch(connection_info& connection,
                                                    std::span<const uint8_t> request) = 0;
};

}  // namespace mala::net
