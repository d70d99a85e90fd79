// SASL/OAUTHBEARER (RFC 7628, KIP-255) as Kafka's OAuthBearerSaslServer serves it: the client's initial
// response ("n,[a=<authzid>],%x01auth=Bearer <token>%x01[<key>=<value>%x01]*%x01") parsed as
// OAuthBearerClientInitialResponse does, the token checked by a validator, and Kafka's error flow: a refused
// token is answered with a JSON challenge ({"status":"invalid_token"} or "insufficient_scope" with the scope)
// that the client acknowledges with a lone %x01, after which the exchange fails with that JSON as the
// message.
//
// The validator here is Kafka's default, OAuthBearerUnsecuredValidatorCallbackHandler, for development: an
// unsecured JWS (header {"alg":"none"}, no signature) whose principal claim (`sub`, or the JAAS option
// unsecuredValidatorPrincipalClaimName) is a non-blank string, with a numeric `exp` in the future, an
// optional numeric `iat` not in the future and before `exp` (unsecuredValidatorAllowableClockSkewMs on
// both), and every scope of unsecuredValidatorRequiredScope in its scope claim (`scope`, or
// unsecuredValidatorScopeClaimName; a string or a list of strings). The token's `exp` bounds the session
// (KIP-368). Pure functions and one per-connection state machine; no shared state.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mala/common/json.h"
#include "mala/common/result.h"

namespace mala::security {

inline constexpr std::string_view oauthbearer_login_module =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

struct oauthbearer_client_message {
  std::string authorization_id;  // empty when the client named none
  std::string token;
  std::map<std::string, std::string> extensions;
};
// invalid_request with Kafka's message when the bytes are not a valid initial response.
result<oauthbearer_client_message> parse_oauthbearer_client_message(std::span<const uint8_t> message);

// The JAAS options of the OAuthBearerLoginModule that the unsecured validator reads.
struct unsecured_validator_options {
  std::string principal_claim = "sub";
  std::string scope_claim = "scope";
  std::vector<std::string> required_scope;
  int32_t allowable_clock_skew_ms = 0;
};
// From the login module's options; invalid_config (naming the option) for a negative or non-numeric skew.
result<unsecured_validator_options> unsecured_validator_options_from(
    const std::map<std::string, std::string>& jaas_options);

struct oauthbearer_token {
  std::string principal;
  int64_t lifetime_ms = 0;  // the token's exp, in ms since the epoch
  std::optional<int64_t> start_ms;
  std::set<std::string> scope;
};
struct oauthbearer_refusal {
  std::string reason;                        // for the log: which check failed (no token contents)
  std::optional<std::string> missing_scope;  // set: insufficient_scope with the required scope
};
std::variant<oauthbearer_token, oauthbearer_refusal> validate_unsecured_jws(
    std::string_view token, const unsecured_validator_options& options, int64_t now_ms);

// Base64url (RFC 4648 section 5) without padding, as JWS uses it; the standard alphabet and '=' padding are
// accepted too (Kafka's unsecured JWS decoder reads the standard one). nullopt on anything else.
std::optional<std::vector<uint8_t>> base64url_decode(std::string_view text);

// The JSON object of one base64url part of a JWS (header or claims), parsed within a token's bounds
// (64 KiB, depth 16, 4,096 values); nullopt when it is not one.
std::optional<json::value> decode_jws_object(std::string_view part);

// A token validator: the unsecured one below, or signed JWTs against a key set (jwt.h, jwks_source.h).
using oauthbearer_validator = std::function<std::variant<oauthbearer_token, oauthbearer_refusal>(
    std::string_view token, int64_t now_ms)>;
oauthbearer_validator make_unsecured_validator(unsecured_validator_options options);

// The server side of one exchange.
class oauthbearer_server {
 public:
  explicit oauthbearer_server(oauthbearer_validator validator);

  struct step {
    std::vector<uint8_t> response;  // the JSON challenge after a refused token, else empty
    bool complete = false;
  };
  struct failure {
    std::string client_message;
    std::string log_reason;
  };
  std::variant<step, failure> evaluate(std::span<const uint8_t> client_message, int64_t now_ms);
  // Once complete: the token's principal and expiry.
  const oauthbearer_token& token() const { return _token; }

 private:
  oauthbearer_validator _validator;
  std::optional<std::string> _error_sent;  // the JSON challenge awaiting the client's %x01
  std::string _error_reason;
  oauthbearer_token _token;
  bool _done = false;
};

}  // namespace mala::security
