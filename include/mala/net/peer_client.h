// An outbound Kafka-protocol client for node-to-node RPCs: Raft Vote / BeginQuorumEpoch / EndQuorumEpoch /
// Fetch between controllers, BrokerRegistration / BrokerHeartbeat, admin requests forwarded to the active
// controller. It frames one request (size prefix, request header v1 or v2, body), waits for the response and
// hands back the response body; encoding and decoding bodies is the caller's business (the generated
// structs).
//
// Kafka servers (and Mala's kafka_server) serve the requests of one connection one at a time, and a Raft
// Fetch long-polls for up to its MaxWaitMs, so a call never waits behind another call on the same connection:
// each address has a small pool of idle connections; a call takes one (or opens a new one), returns it after
// a whole exchange and drops it after any error, so a late response can never be mistaken for another call's.
//
// On a SASL listener every new connection authenticates before its first request (SaslHandshake v1, then
// SaslAuthenticate v2 rounds, after the TLS handshake on SASL_SSL), and is not reused once 85% of the session
// the server granted (KIP-368 session_lifetime_ms) has passed, so a call never meets an expired session.
//
// Errors: network_exception when the address cannot be resolved, the connection fails or closes, the TLS
// handshake fails (untrusted server, server name mismatch, no client certificate); sasl_authentication_failed
// when the server refuses the mechanism or the credentials, or does not prove the password (SCRAM); the
// response
// is malformed (size out of bounds, wrong correlation id); request_timed_out when no whole response arrived
// within timeout_ms (the connection is dropped, as Kafka's NetworkClient disconnects on request timeout).
//
// Threads: one io_context (shard 0). Every member, and every call, runs on that context's thread; the object
// must outlive the calls in flight (close_all() first, then let them finish, then destroy). Pass a named
// peer_address rather than a braced temporary: GCC 12/13 mishandle aggregate temporaries in a co_await
// argument list (seen here as a heap corruption).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/buffer.hpp>
#include <asio/io_context.hpp>

#include "mala/common/result.h"
#include "mala/net/peer_client_options.h"

namespace mala::net {

struct peer_address {
  std::string host;  // a name (resolved each time a connection is opened) or a literal IPv4/IPv6 address
  int32_t port = 0;

  friend bool operator==(const peer_address&, const peer_address&) = default;
};

class peer_client {
 public:
  peer_client(asio::io_context& io, std::string client_id, peer_client_options options = {});
  ~peer_client();
  peer_client(const peer_client&) = delete;
  peer_client& operator=(const peer_client&) = delete;

  // Sends one request and returns the response body (the bytes after the response header).
  // request_header_version: 1, or 2 for flexible request versions; response_header_version: 0, or 1 for
  // flexible response versions (ApiVersions always answers with 0, KIP-511).
  asio::awaitable<result<std::vector<uint8_t>>> call(peer_address to, int16_t api_key, int16_t api_version,
                                                     int16_t request_header_version,
                                                     int16_t response_header_version,
                                                     std::vector<uint8_t> body, int32_t timeout_ms);

  // Closes the idle connections and those of calls in flight (which then fail with network_exception).
  void close_all();

  // Idle connections pooled for an address (for tests and metrics).
  size_t idle_connections(const peer_address& to) const;

 private:
  struct connection;
  using connection_ptr = std::shared_ptr<connection>;

  static asio::awaitable<void> read_exactly(connection& conn, asio::mutable_buffer buffer,
                                            std::error_code& ec);
  // One request and its response on `conn`: the response body, or nullopt with the failed step in `step`
  // (and the I/O error in `ec`).
  asio::awaitable<std::optional<std::vector<uint8_t>>> exchange(connection& conn, int16_t api_key,
                                                                int16_t api_version,
                                                                int16_t request_header_version,
                                                                int16_t response_header_version,
                                                                const std::vector<uint8_t>& body,
                                                                std::string& step, std::error_code& ec);
  // The SASL exchange of a new connection: nullopt once authenticated, else why not (`ec` set when the
  // connection failed rather than the authentication).
  asio::awaitable<std::optional<status>> authenticate(connection& conn, const std::string& to,
                                                      std::error_code& ec);
  // An idle connection to `key` that is still usable, or null.
  connection_ptr take_idle(const std::string& key);
  void return_idle(const std::string& key, connection_ptr conn);

  asio::io_context& _io;
  std::string _client_id;
  peer_client_options _options;
  int32_t _next_correlation_id = 1;
  std::chrono::steady_clock::time_point _last_refusal_warning{};  // SASL refusals are logged once per 10 s
  uint64_t _generation = 0;  // bumped by close_all(): connections of an older generation are not pooled
  std::map<std::string, std::vector<connection_ptr>> _idle;  // by "host:port"
  std::set<connection_ptr> _busy;                            // connections of calls in flight
};

}  // namespace mala::net
