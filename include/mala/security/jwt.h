// Signed JWTs for SASL/OAUTHBEARER as Kafka's OAuthBearerValidatorCallbackHandler checks them (jose4j under
// ValidatorAccessTokenValidator): a JWS in compact serialization signed with RS256/384/512, PS256/384/512 or
// ES256/384/512 by a key of a JSON Web Key Set (RFC 7517), chosen as jose4j's VerificationJwkSelector does
// (the header's kid, the algorithm's key type and curve, use "sig" or none, the key's alg when it names one);
// `alg: none`, RSA keys under 2048 bits and unknown `crit` headers refused; then the claims: exp and iat
// required, exp and nbf within the clock skew, aud holding an expected audience (and refused when none is
// configured but the token names one, jose4j's default), iss equal to the expected issuer when one is set,
// the subject claim a non-blank string, the scope claim a string or a list without duplicates. Signatures are
// checked with OpenSSL libcrypto. Pure functions over immutable key sets: callable from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mala/common/result.h"
#include "mala/security/oauthbearer.h"

namespace mala::security {

struct json_web_key;  // an OpenSSL public key with its JWK attributes

// A parsed JSON Web Key Set; keys of unknown types or with bad parameters are skipped (as jose4j does).
class json_web_key_set {
 public:
  json_web_key_set();
  ~json_web_key_set();
  json_web_key_set(json_web_key_set&&) noexcept;
  json_web_key_set& operator=(json_web_key_set&&) noexcept;

  // invalid_request when `text` is not a JSON object with a "keys" array (bounded: 1 MiB, 1,000 keys).
  static result<json_web_key_set> parse(std::string_view text);
  size_t size() const { return _keys.size(); }
  const std::vector<std::unique_ptr<json_web_key>>& keys() const { return _keys; }

 private:
  std::vector<std::unique_ptr<json_web_key>> _keys;
};

struct signed_jwt_options {
  std::vector<std::string> expected_audiences;  // sasl.oauthbearer.expected.audience
  std::optional<std::string> expected_issuer;   // sasl.oauthbearer.expected.issuer
  int32_t clock_skew_seconds = 30;              // sasl.oauthbearer.clock.skew.seconds
  std::string scope_claim = "scope";            // sasl.oauthbearer.scope.claim.name
  std::string sub_claim = "sub";                // sasl.oauthbearer.sub.claim.name
};

// The outcome of validating a token. A refusal for want of a key says so (`unknown_key`), so that the caller
// can fetch the key set again before the next token (RefreshingHttpsJwks.maybeExpediteRefresh).
struct jwt_refusal {
  std::string reason;
  bool unknown_key = false;
  std::optional<std::string> kid;
};
std::variant<oauthbearer_token, jwt_refusal> validate_signed_jwt(std::string_view token,
                                                                 const json_web_key_set& keys,
                                                                 const signed_jwt_options& options,
                                                                 int64_t now_ms);

}  // namespace mala::security
