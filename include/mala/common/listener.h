// Parsers for Kafka's endpoint syntaxes used in node configuration: `listeners` / `advertised.listeners`
// (`NAME://host:port,...`), `listener.security.protocol.map` (`NAME:PROTOCOL,...`),
// `controller.quorum.voters`
// (`id@host:port,...`) and `controller.quorum.bootstrap.servers` (`host:port,...`).
//
// Pure functions on strings: no I/O, no shared state, safe to call from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mala/common/result.h"

namespace mala {

// Kafka's SecurityProtocol enum. Mala serves PLAINTEXT only for now; the others parse (so that the error can
// name them), and node_config refuses to start with a listener that uses one.
enum class security_protocol { plaintext, ssl, sasl_plaintext, sasl_ssl };

std::string_view to_string(security_protocol protocol);
// Case-insensitive, as Kafka's SecurityProtocol.forName.
std::optional<security_protocol> parse_security_protocol(std::string_view name);

// The parsers below return a result whose error is INVALID_CONFIG with what is wrong; the caller adds the
// configuration key.

// One element of `listeners` before its security protocol is known. Names are upper-cased, as Kafka's
// ListenerName.normalised does; an empty host means every interface. Port 0 asks for an ephemeral port.
struct listener_endpoint {
  std::string name;
  std::string host;
  uint16_t port = 0;
  friend bool operator==(const listener_endpoint&, const listener_endpoint&) = default;
};

// A listener with its security protocol resolved from listener.security.protocol.map.
struct listener_config {
  std::string name;
  std::string host;
  uint16_t port = 0;
  security_protocol protocol = security_protocol::plaintext;
  friend bool operator==(const listener_config&, const listener_config&) = default;
};

// `NAME://host:port` as Kafka writes it back (IPv6 hosts in brackets).
std::string format_listener(const listener_config& listener);

// Parses a comma-separated listener list. IPv6 hosts are written in brackets (`INTERNAL://[::1]:19092`).
// Rejects a missing name, host part or port, a port outside 0-65535 and a name used twice.
result<std::vector<listener_endpoint>> parse_listeners(std::string_view csv);

struct listener_protocol_mapping {
  std::string listener_name;  // upper-cased
  security_protocol protocol;
  friend bool operator==(const listener_protocol_mapping&, const listener_protocol_mapping&) = default;
};

// Parses `NAME:PROTOCOL,...`; a listener name mapped twice is an error.
result<std::vector<listener_protocol_mapping>> parse_security_protocol_map(std::string_view csv);

// One element of controller.quorum.voters.
struct quorum_voter {
  int32_t id = 0;
  std::string host;
  uint16_t port = 0;
  friend bool operator==(const quorum_voter&, const quorum_voter&) = default;
};

// Parses `1@host:port,2@[::1]:9093`. Ids must be non-negative and distinct; ports 1-65535.
result<std::vector<quorum_voter>> parse_quorum_voters(std::string_view csv);

struct host_port {
  std::string host;
  uint16_t port = 0;
  friend bool operator==(const host_port&, const host_port&) = default;
};

// Parses controller.quorum.bootstrap.servers: `host:port,[::1]:9093`; ports 1-65535.
result<std::vector<host_port>> parse_host_ports(std::string_view csv);

}  // namespace mala
