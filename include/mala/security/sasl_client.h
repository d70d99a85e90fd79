// The client side of a SASL exchange, for the node's own connections to another node's SASL listener
// (replica fetchers and transaction markers on the inter-broker listener, Raft, registration and forwarding
// on the controller listener): PLAIN (Kafka's PlainSaslClient use of the JDK's PLAIN client),
// SCRAM-SHA-256/512 (Kafka's ScramSaslClient: the server's nonce must extend the client's, at least 4096
// iterations, and the server's signature is checked before the exchange counts as complete) and OAUTHBEARER
// (Kafka's OAuthBearerSaslClient: the login's current token in the initial response; an error challenge is
// acknowledged with a lone %x01 and the exchange fails). No I/O: the
// caller carries the messages in SaslAuthenticate requests. The credentials are the `username` and `password`
// options of the listener's login module, as Kafka's broker reads them for its inter-broker clients.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <memory>

#include "mala/common/config.h"
#include "mala/common/result.h"
#include "mala/security/oauthbearer_login.h"
#include "mala/security/scram.h"

namespace mala::security {

struct sasl_client_credentials {
  std::string mechanism;  // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER
  std::string username;
  std::string password;
  std::shared_ptr<oauthbearer_login> oauthbearer;  // OAUTHBEARER: the node's login (oauthbearer_login.h)
};

class sasl_client {
 public:
  // invalid_config for a mechanism the client does not speak; for OAUTHBEARER the login's error when it has
  // no valid token. `client_nonce` is for tests; empty draws one.
  static result<sasl_client> start(sasl_client_credentials credentials, std::string client_nonce = {});

  const std::string& mechanism() const { return _credentials.mechanism; }
  // The first message the client sends.
  std::vector<uint8_t> first_message();
  // The server's answer to the last message: the next message to send, or nullopt when the exchange is
  // complete. sasl_authentication_failed when the server's message is malformed, refuses, or its signature
  // does not match (the message says why, without secrets).
  result<std::optional<std::vector<uint8_t>>> evaluate(std::span<const uint8_t> server_message);
  bool complete() const { return _state == state::complete; }

 private:
  enum class state : uint8_t { initial, server_first, server_final, complete, failed };
  explicit sasl_client(sasl_client_credentials credentials, scram_mechanism scram, std::string nonce);
  status fail(std::string reason);

  sasl_client_credentials _credentials;
  scram_mechanism _scram = scram_mechanism::unknown;  // unknown: PLAIN or OAUTHBEARER
  std::string _oauthbearer_response;                  // OAUTHBEARER: the initial response
  state _state = state::initial;
  std::string _client_nonce;
  std::string _client_first_bare;
  std::vector<uint8_t> _expected_server_signature;
};

// The credentials the node presents on `listener` with `mechanism` (Kafka's JaasContext.loadServerContext
// order: listener.name.<listener>.<mechanism>.sasl.jaas.config, then
// listener.name.<listener>.sasl.jaas.config, then sasl.jaas.config): the `username` and `password` options of
// the mechanism's login module; for OAUTHBEARER the login built from the OAuthBearerLoginModule's options
// (oauthbearer_login::open, which obtains the first token). invalid_config, naming the key, when there is no
// such configuration or it lacks what the mechanism needs.
result<sasl_client_credentials> node_sasl_credentials(const node_config& config, const std::string& listener,
                                                      const std::string& mechanism);

}  // namespace mala::security
