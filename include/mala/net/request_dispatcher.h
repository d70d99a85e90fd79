// The boundary between the network server and the broker: the server frames requests and hands each complete
// request (header + body, without the size prefix) to a dispatcher, then writes back what the dispatcher
// returns. A connection pipelines its requests (clients send up to max.in.flight.requests.per.connection):
// it reads ahead while earlier requests are in flight, but starts a request only once the one before it has
// passed its ordering point (below), and writes the responses in request order, as Kafka clients require.
//
// A response is either one buffer or a list of pieces: buffers and ranges of open files. On a plaintext
// connection the server sends file ranges with sendfile(2) (zero copy, as Kafka's FileRecords.writeTo does
// through FileChannel.transferTo); Fetch uses this for the records it reads from segment files. net knows
// nothing of storage: a file range is a descriptor, an offset, a length and an owner to keep alive.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include <asio/awaitable.hpp>

#include "mala/common/listener.h"
#include "mala/common/result.h"

namespace mala::net {

// What the broker knows about the connection a request arrived on. Owned by the connection, touched only on
// its shard.
struct connection_info {
  uint64_t id = 0;
  size_t shard = 0;
  std::string listener_name;
  security_protocol protocol = security_protocol::plaintext;  // of the listener
  std::string peer;                                           // "host:port"
  // The client's Kafka principal (KafkaPrincipal's type and name): User:ANONYMOUS on PLAINTEXT, as Kafka's
  // DefaultKafkaPrincipalBuilder, until TLS (the certificate's mapped name) or SASL authenticates it.
  std::string principal_type = "User";
  std::string principal_name = "ANONYMOUS";
  // From ApiVersions v3+ (KIP-511), for logs.
  std::string client_software_name;
  std::string client_software_version;
  // When positive, a frame announcing more bytes closes the connection before it is read (Kafka's
  // sasl.server.max.receive.size until SASL authentication completes: set by the server on SASL listeners,
  // cleared by the broker once the client is authenticated).
  int32_t max_receive_bytes = 0;
  // The broker's per-connection authentication state (broker/sasl_authenticator.h); opaque to net.
  std::shared_ptr<void> authentication;
  // KIP-219 (client quotas): until then the connection is muted: the server reads no further request from it
  // and starts none of those it already read, while responses still go out at once. The default (epoch) is
  // never throttled, which the server tells apart without reading the clock.
  std::chrono::steady_clock::time_point throttled_until{};
  void throttle_for(std::chrono::milliseconds duration) {
    const auto until = std::chrono::steady_clock::now() + duration;
    if (until > throttled_until) throttled_until = until;
  }
  bool throttled() const {
    return throttled_until != std::chrono::steady_clock::time_point{} &&
           throttled_until > std::chrono::steady_clock::now();
  }
  // The server can send file ranges of a response itself (sendfile on a plaintext socket). When false (unit
  // tests driving the dispatcher, TLS later), the dispatcher hands back responses materialised in memory.
  bool zero_copy = false;
};

// A byte range of an open file. `keep_alive` owns whatever keeps `fd` open (Fetch passes the segment file, so
// a segment deleted by retention meanwhile is still readable) until the response is sent or dropped.
struct file_range {
  int fd = -1;
  int64_t offset = 0;
  uint32_t size = 0;
  std::shared_ptr<const void> keep_alive;
};

// One part of a response: bytes in memory or a file range.
using response_piece = std::variant<std::vector<uint8_t>, file_range>;

struct dispatch_result {
  enum class action : uint8_t { respond, no_response, close };
  action what = action::respond;
  std::vector<uint8_t> response;  // response header + body, without the size prefix, when `pieces` is empty
  // Otherwise the response is these pieces in order (and `response` is empty).
  std::vector<response_piece> pieces;
  std::string close_reason;  // logged when what == close, or after the response when close_after_response
  // Send the response, then close the connection (Kafka's failed SASL handshake or authentication: the client
  // reads why before the connection goes).
  bool close_after_response = false;
  bool logged = false;  // the dispatcher logged the reason itself (rate-limited): the server logs it at debug
  // Set when sending the response counts toward the client's request quota (Kafka's network-thread time,
  // ClientRequestQuotaManager.recordNoThrottle): the server then sends it on a metered executor
  // (request_meter.h) and calls this on the connection's shard with the thread time the send took (a TLS
  // connection's encryption included; time waiting for the socket is not).
  std::function<void(int64_t send_ns)> record_send_time;

  static dispatch_result respond_with(std::vector<uint8_t> bytes) {
    return {action::respond, std::move(bytes), {}, {}};
  }
  static dispatch_result respond_with(std::vector<response_piece> pieces) {
    return {action::respond, {}, std::move(pieces), {}};
  }
  static dispatch_result close(std::string reason) { return {action::close, {}, {}, std::move(reason)}; }
  static dispatch_result nothing() { return {action::no_response, {}, {}, {}}; }

  // Bytes of the response without the size prefix.
  size_t response_size() const;
  // The copy path: reads the file ranges (pread) and joins every piece into `response`. Fails, leaving the
  // result unusable, when a range cannot be read whole (its file was truncated since the range was taken).
  // A no-op without pieces.
  status materialize();
};

// A request's ordering point on its connection. Kafka serves a connection's requests one at a time, so the
// effects of one happen before those of the next (two Produce requests to one partition append in request
// order). The connection starts a request's dispatch only once the request before it released its ordering
// point: when its dispatch completes, or earlier, once a handler has done everything whose order matters and
// only waits (Produce after its appends, before waiting for acks=all replication; Fetch after its first read,
// before parking on partition waiters). Releasing twice is harmless. The connection's shard only.
class ordering_point {
 public:
  ordering_point() = default;
  explicit ordering_point(std::function<void()> on_release) : _on_release(std::move(on_release)) {}
  // Moved only before the dispatch gets it.
  ordering_point(ordering_point&&) = default;
  ordering_point& operator=(ordering_point&&) = default;

  void release() {
    if (_released) return;
    _released = true;
    if (auto on_release = std::move(_on_release)) on_release();
  }
  bool released() const { return _released; }

 private:
  std::function<void()> _on_release;
  bool _released = false;
};

class request_dispatcher {
 public:
  virtual ~request_dispatcher() = default;
  // `request` is a buffer of its own, lent to the dispatcher until the returned awaitable completes: handlers
  // may rewrite parts of it in place (Produce stamps offsets into the record batches it appends, instead of
  // copying them). `order` is the request's ordering point, released by the caller when the dispatch
  // completes if the handler did not release it earlier.
  virtual asio::awaitable<dispatch_result> dispatch(connection_info& connection, std::span<uint8_t> request,
                                                    ordering_point& order) = 0;
  // Whether the connection's next request should run on a metered executor (net/request_meter.h), its thread
  // time charged to a request quota: asked before each request starts, so that metering costs nothing while
  // no quota needs it.
  virtual bool wants_request_meter(const connection_info& /*connection*/) const { return false; }
};

}  // namespace mala::net
