// The node's own SASL/OAUTHBEARER token, for its connections to another node's OAUTHBEARER listener
// (replica fetchers and transaction markers on the inter-broker listener; Raft, registration and forwarding
// on the controller listener), as Kafka's broker logs in for its inter-broker clients with the listener's
// login module and `sasl.login.callback.handler.class`:
//
// - Kafka's default, OAuthBearerUnsecuredLoginCallbackHandler: an unsecured JWS (header {"alg":"none"}, no
//   signature) made from the login module's options: unsecuredLoginStringClaim_<name>,
//   unsecuredLoginNumberClaim_<name>, unsecuredLoginListClaim_<name> (the first character is the
//   delimiter), unsecuredLoginPrincipalClaimName (default sub, which must be set),
//   unsecuredLoginScopeClaimName (default scope), unsecuredLoginLifetimeSeconds (default 3600) and
//   unsecuredLoginExtension_<key> (SASL extensions); iat is now, exp iat plus the lifetime.
// - OAuthBearerLoginCallbackHandler: the access token of `sasl.oauthbearer.token.endpoint.url`: a file://
//   URL names a file holding the JWT (Kafka's FileTokenRetriever), an http(s):// URL is the identity
//   provider's token endpoint, asked with the OAuth client credentials grant (the login module's clientId,
//   clientSecret and optional scope; Kafka's HttpAccessTokenRetriever), its `access_token` taken. The
//   token's exp (and iat, when present) are read from its claims, unverified, as Kafka's
//   LoginAccessTokenValidator does; the sub claim (sasl.oauthbearer.sub.claim.name) must be there.
//
// The token is obtained once when the node opens (a node that cannot log in does not start, as Kafka's
// broker) and again, like Kafka's ExpiringCredentialRefreshingLogin, once 80% of its lifetime has passed (at
// least a minute after the last refresh): unsecured tokens when asked for, file and endpoint tokens on this
// object's own thread (no file or network I/O on the caller's thread), failed refreshes retried with
// sasl.login.retry.backoff.ms doubling to sasl.login.retry.backoff.max.ms. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "mala/common/config.h"
#include "mala/common/result.h"

namespace mala::security {

struct oauthbearer_login_token {
  std::string value;                              // the compact JWS / JWT
  int64_t expires_at_ms = 0;                      // exp
  int64_t issued_at_ms = 0;                       // iat, or when it was obtained
  std::map<std::string, std::string> extensions;  // SASL extensions sent with it
};

class oauthbearer_login {
 public:
  virtual ~oauthbearer_login() = default;
  // The login of `listener` from its login module options; invalid_config (naming the key, without secrets)
  // when it cannot be built or the first token cannot be obtained.
  static result<std::shared_ptr<oauthbearer_login>> open(
      const node_config& config, const std::string& listener,
      const std::map<std::string, std::string>& jaas_options);
  // The token to present now; sasl_authentication_failed when the last one expired and no new one came.
  virtual result<oauthbearer_login_token> current() = 0;
};

// The unsecured JWS of OAuthBearerUnsecuredLoginCallbackHandler for these login options at now_ms
// (invalid_config naming the option when they cannot make one).
result<oauthbearer_login_token> unsecured_login_token(const std::map<std::string, std::string>& jaas_options,
                                                      int64_t now_ms);
// A retrieved access token checked as LoginAccessTokenValidator does (three parts, JSON claims, numeric exp,
// the sub claim present), with its times; invalid_request saying what is wrong (no token contents).
result<oauthbearer_login_token> login_token_from_jwt(const std::string& jwt, const std::string& sub_claim,
                                                     int64_t now_ms);

// The initial client response carrying the token (RFC 7628, as Kafka's OAuthBearerClientInitialResponse):
// "n,,%x01auth=Bearer <token>%x01[<key>=<value>%x01]*%x01".
std::string oauthbearer_initial_response(const oauthbearer_login_token& token);

}  // namespace mala::security
