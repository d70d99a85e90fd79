// The SASL state of one connection on a SASL listener (Kafka's SaslServerAuthenticator): until the client is
// authenticated only ApiVersions (once, first), SaslHandshake, then SaslAuthenticate are served, in that
// order; anything else closes the connection (Kafka's IllegalSaslStateException). An unknown mechanism is
// answered UNSUPPORTED_SASL_MECHANISM with the enabled list, a failed exchange SASL_AUTHENTICATION_FAILED,
// and both close the connection once the answer is sent. SaslHandshake v0 (no SaslAuthenticate framing) makes
// the following frames raw SASL tokens, answered raw. KIP-368: with connections.max.reauth.ms a session
// expires; the client re-authenticates with a new SaslHandshake on the same connection (same mechanism, same
// principal), and a request after the expiry closes the connection. An OAUTHBEARER session also ends at its
// token's expiry (Kafka's ReauthInfo: the earlier of the two).
//
// Owned by the connection (net::connection_info::authentication) and used on its shard only, one request at
// a time (the connection serves its requests in order). No I/O: the dispatcher frames what it answers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "mala/common/error_code.h"
#include "mala/net/request_dispatcher.h"
#include "mala/protocol/messages/sasl_authenticate_response.h"
#include "mala/protocol/messages/sasl_handshake_response.h"
#include "mala/security/oauthbearer.h"
#include "mala/security/sasl_settings.h"
#include "mala/security/scram.h"

namespace mala::broker {

// A user's SCRAM credential for a mechanism, from the metadata image; nullopt when there is none.
using scram_credential_lookup = std::function<std::optional<security::scram_credential>(
    security::scram_mechanism, const std::string& user)>;

class sasl_authenticator {
 public:
  sasl_authenticator(const security::listener_sasl_settings& settings, scram_credential_lookup scram_lookup,
                     int64_t connections_max_reauth_ms);

  // What a request of `api_key` does in the current state.
  enum class verdict : uint8_t {
    serve,           // authenticated (and not expired): the normal path
    api_versions,    // ApiVersions before the handshake: served normally, then only SaslHandshake
    handshake,       // SaslHandshake: handshake()
    authenticate,    // SaslAuthenticate: authenticate()
    reauthenticate,  // SaslHandshake on an authenticated connection with re-authentication on: handshake()
    refuse,          // close the connection; refusal_reason() says why
  };
  verdict classify(int16_t api_key, int64_t now_ms) const;
  std::string refusal_reason(int16_t api_key, int64_t now_ms) const;
  // After SaslHandshake v0 the client sends bare tokens instead of SaslAuthenticate requests.
  bool expects_raw_token() const { return _phase == phase::authenticate && !_kafka_headers; }
  bool authenticated() const { return _phase == phase::complete; }
  void api_versions_served();

  struct handshake_answer {
    protocol::sasl_handshake_response response;
    bool close = false;  // send the response, then close
    std::string log;     // why, when closing
  };
  handshake_answer handshake(const std::string& mechanism, int16_t version);

  struct authenticate_answer {
    protocol::sasl_authenticate_response response;
    bool close = false;
    std::string log;
  };
  // One token of the exchange (SaslAuthenticate's auth_bytes or a raw v0 token). On success the connection's
  // principal becomes User:<name> and its receive bound is lifted.
  authenticate_answer authenticate(net::connection_info& connection, std::span<const uint8_t> token,
                                   int16_t version, int64_t now_ms);

  const std::string& user() const { return _user; }
  const std::string& mechanism() const { return _mechanism; }
  // KIP-368: the wall-clock time the session ends, or 0 when it does not.
  int64_t session_expiry_ms() const { return _session_expiry_ms; }

 private:
  enum class phase : uint8_t { handshake_or_versions, handshake, authenticate, complete, failed };
  authenticate_answer fail(std::string client_message, std::string log);

  const security::listener_sasl_settings& _settings;
  scram_credential_lookup _scram_lookup;
  int64_t _max_reauth_ms = 0;
  phase _phase = phase::handshake_or_versions;
  bool _kafka_headers = true;
  bool _reauthenticating = false;
  std::string _mechanism;
  std::string _user;
  std::optional<security::scram_server> _scram;
  std::optional<security::oauthbearer_server> _oauthbearer;
  int64_t _session_expiry_ms = 0;
};

}  // namespace mala::broker
