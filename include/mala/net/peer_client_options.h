// How a peer_client connects (peer_client.h): TLS and SASL of the listener it goes through, and its bounds.
// Kept apart from peer_client.h, with no asio, so that the options of the subsystems that own a client
// (raft_node, follower_fetcher) can hold them without pulling in the coroutine machinery.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "mala/security/sasl_client.h"

namespace mala::net {

struct tls_client_context;

struct peer_client_options {
  // Set when the listener this client connects through is SSL: every connection does a TLS handshake
  // (verifying the server, presenting the node's certificate when it has one) before its first request.
  std::shared_ptr<tls_client_context> tls;
  // Set when the listener is SASL_PLAINTEXT or SASL_SSL: the mechanism and credentials every connection
  // authenticates with; `listener_name` names the listener in log lines.
  std::optional<security::sasl_client_credentials> sasl;
  std::string listener_name;
  // The largest response accepted; the size prefix is checked before anything is allocated.
  int32_t max_response_bytes = 100 * 1024 * 1024;
  // Idle connections kept per address; more are closed when returned.
  size_t max_idle_per_address = 4;
  // An idle connection older than this is closed rather than reused: below Kafka's default
  // connections.max.idle.ms (10 minutes), so the server is not likely to have closed it under us.
  int64_t max_idle_ms = 5 * 60 * 1000;
};

}  // namespace mala::net
