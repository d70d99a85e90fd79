// Accepts Kafka protocol connections on the configured listeners and serves them on the shards: reads
// size-prefixed frames (bounded by socket.request.max.bytes), dispatches them to the broker pipelined (a
// request starts once the one before it released its ordering point, see net::ordering_point), writes the
// responses back in request order, and closes connections idle for longer than connections.max.idle.ms. A
// connection stops reading while queued.max.requests requests or queued.max.request.bytes of them are read
// and not yet answered. Malformed framing closes only the offending connection, with a log line, once the
// requests read before it are answered.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mala/common/listener.h"
#include "mala/common/result.h"
#include "mala/common/tls_settings.h"
#include "mala/net/request_dispatcher.h"
#include "mala/net/shard_pool.h"

namespace mala::net {

struct listen_endpoint {
  std::string listener_name;
  std::string host;  // empty: every interface, IPv4 and IPv6
  uint16_t port = 0;
  // How connections on this listener are secured and authenticated (listener.security.protocol.map).
  security_protocol protocol = security_protocol::plaintext;
  // SSL listeners: their settings (the server context is built when the listener is bound).
  std::optional<tls_settings> tls;
};

struct server_limits {
  int32_t socket_request_max_bytes = 100 * 1024 * 1024;
  int64_t connections_max_idle_ms = 600'000;
  // SO_SNDBUF of each accepted socket and SO_RCVBUF of the listening socket (inherited by accepted ones), as
  // Kafka's socket.send.buffer.bytes / socket.receive.buffer.bytes; -1 keeps the OS default (autotuning).
  int32_t send_buffer_bytes = -1;
  int32_t receive_buffer_bytes = -1;
  // Per connection: at most this many requests read and not yet answered (Kafka's queued.max.requests bounds
  // the broker's request queue); the reader waits for responses to drain before reading more.
  int32_t queued_max_requests = 500;
  // Per connection: at most this many bytes of requests read and not yet answered, except that a request
  // alone is always read (socket.request.max.bytes bounds it); -1: no bound but queued_max_requests.
  int64_t queued_max_request_bytes = 16 * 1024 * 1024;
  // An SSL listener's connection must finish its TLS handshake within this time, or is closed.
  int64_t tls_handshake_timeout_ms = 10'000;
  // Kafka's sasl.server.max.receive.size: on a SASL listener, the largest frame read before the broker says
  // the connection is authenticated (connection_info::max_receive_bytes); a larger one closes it unread.
  int32_t sasl_max_receive_bytes = 524288;
};

class kafka_server {
 public:
  kafka_server(shard_pool& shards, request_dispatcher& dispatcher, server_limits limits);
  ~kafka_server();

  // Binds every endpoint (on shard 0) and starts accepting on it: bind() then start(). Errors
  // (unknown_server_error) name the listener that cannot be bound.
  status listen(const std::vector<listen_endpoint>& endpoints);
  // Binds every endpoint without listening: connections are refused until start(), so that nothing mistakes
  // an open port for a node ready to serve (Kafka opens a broker's listeners only once it has caught up with
  // the metadata). With SO_REUSEADDR another socket may still bind the port meanwhile: a conflict shows at
  // start().
  status bind(const std::vector<listen_endpoint>& endpoints);
  // Listens and accepts on every endpoint bound and not yet started. Errors (unknown_server_error) name the
  // listener that cannot listen.
  status start();
  // Stops accepting and closes every connection; call on shard 0's thread or before the shards run.
  void stop();

  // Replaces an SSL listener's server context (a new key store or trust store: Kafka's dynamic update of
  // listener.name.<listener>.ssl.keystore.*) for the connections it accepts from now on; established ones
  // keep theirs. When the new one cannot be built the old one stays, and the error (invalid_config) names the
  // key.
  status reload_tls(const tls_settings& settings);

  // Port actually bound for a listener (useful when the configured port was 0).
  uint16_t bound_port(const std::string& listener_name) const;

 private:
  struct impl;
  std::unique_ptr<impl> _impl;
};

}  // namespace mala::net
