#include "mala/security/oauthbearer.h"

#include <charconv>
#include <cmath>

#include "mala/common/json.h"

namespace mala::security {

namespace {

constexpr char separator = '\x01';
// Claims and headers of a token are small; a token past this is refused unread (the SASL receive bound,
// sasl.server.max.receive.size, limits the whole message before this).
constexpr size_t max_token_bytes = 64 * 1024;

bool is_key_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
bool is_value_char(char c) {
  return (c >= 0x21 && c <= 0x7E) || c == ' ' || c == '\t' || c == '\r' || c == '\n';
}
bool is_token_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '~' || c == '+' || c == '/' || c == '.';
}
bool is_word_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

// SASLNAME of RFC 5801: 0x01-0x7F but '=' and ',', or "=2C" / "=3D"; kept as written (Kafka does not decode
// it).
bool valid_saslname(std::string_view s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '=') {
      if (s.substr(i, 3) != "=2C" && s.substr(i, 3) != "=3D") return false;
      i += 2;
    } else if (c == ',' || c == 0 || c > 0x7F) {
      return false;
    }
  }
  return true;
}

status invalid(std::string message) {
  return status::error(error_code::invalid_request, std::move(message));
}

std::string trim(std::string_view s) {
  const size_t from = s.find_first_not_of(" \t\r\n");
  if (from == std::string_view::npos) return {};
  const size_t to = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(from, to - from + 1));
}

int decode_char(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-' || c == '+') return 62;
  if (c == '_' || c == '/') return 63;
  return -1;
}

oauthbearer_refusal refuse(std::string reason) {
  return oauthbearer_refusal{std::move(reason), std::nullopt};
}

}  // namespace

std::optional<json::value> decode_jws_object(std::string_view part) {
  auto bytes = base64url_decode(part);
  if (!bytes) return std::nullopt;
  json::limits bounds;
  bounds.max_bytes = max_token_bytes;
  bounds.max_depth = 16;
  bounds.max_elements = 4096;
  auto parsed =
      json::parse(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), bounds);
  if (!parsed.ok() || parsed->as_object() == nullptr) return std::nullopt;
  return std::move(*parsed);
}

std::optional<std::vector<uint8_t>> base64url_decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::nullopt;
  std::vector<uint8_t> out;
  out.reserve(text.size() * 3 / 4);
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    const int v = decode_char(c);
    if (v < 0) return std::nullopt;
    buffer = (buffer << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((buffer >> bits) & 0xFF));
    }
  }
  return out;
}

result<oauthbearer_client_message> parse_oauthbearer_client_message(std::span<const uint8_t> message) {
  const std::string_view text(reinterpret_cast<const char*>(message.data()), message.size());
  const std::string generic = "Invalid OAUTHBEARER client first message";
  if (!text.starts_with("n,")) return invalid(generic);
  oauthbearer_client_message out;
  size_t pos = 2;
  if (text.substr(pos, 2) == "a=") {
    const size_t comma = text.find(',', pos + 2);
    if (comma == std::string_view::npos) return invalid(generic);
    const auto authzid = text.substr(pos + 2, comma - pos - 2);
    if (!valid_saslname(authzid)) return invalid(generic);
    out.authorization_id = std::string(authzid);
    pos = comma;
  }
  if (text.substr(pos, 2) != std::string_view(",\x01", 2)) return invalid(generic);
  pos += 2;
  std::optional<std::string> auth;
  // (key=value%x01)* then a final %x01 that ends the message.
  while (true) {
    if (pos >= text.size()) return invalid(generic);
    if (text[pos] == separator) {
      if (pos + 1 != text.size()) return invalid(generic);
      break;
    }
    size_t key_end = pos;
    while (key_end < text.size() && is_key_char(text[key_end])) ++key_end;
    if (key_end == pos || key_end >= text.size() || text[key_end] != '=') return invalid(generic);
    const size_t value_end = text.find(separator, key_end + 1);
    if (value_end == std::string_view::npos || value_end == key_end + 1) return invalid(generic);
    const auto key = text.substr(pos, key_end - pos);
    const auto value = text.substr(key_end + 1, value_end - key_end - 1);
    for (char c : value) {
      if (!is_value_char(c)) return invalid(generic);
    }
    if (key == "auth") {
      auth = std::string(value);
    } else {
      out.extensions[std::string(key)] = std::string(value);
    }
    pos = value_end + 1;
  }
  if (!auth) return invalid(generic + ": 'auth' not specified");
  // "<scheme> <token>": scheme \w+, one or more spaces, token [-_~+/.a-zA-Z0-9]+ then '='*.
  size_t i = 0;
  while (i < auth->size() && is_word_char((*auth)[i])) ++i;
  const std::string scheme = auth->substr(0, i);
  const size_t spaces = i;
  while (i < auth->size() && (*auth)[i] == ' ') ++i;
  const size_t token_start = i;
  while (i < auth->size() && is_token_char((*auth)[i])) ++i;
  const size_t token_chars = i - token_start;
  while (i < auth->size() && (*auth)[i] == '=') ++i;
  if (scheme.empty() || spaces == token_start || token_chars == 0 || i != auth->size()) {
    return invalid(generic + ": invalid 'auth' format");
  }
  std::string lowered = scheme;
  for (auto& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lowered != "bearer") return invalid("Invalid scheme in OAUTHBEARER client first message");
  out.token = auth->substr(token_start);
  return out;
}

result<unsecured_validator_options> unsecured_validator_options_from(
    const std::map<std::string, std::string>& jaas_options) {
  unsecured_validator_options out;
  auto option = [&](const char* name) -> std::string {
    auto it = jaas_options.find(name);
    return it == jaas_options.end() ? std::string() : trim(it->second);
  };
  if (auto v = option("unsecuredValidatorPrincipalClaimName"); !v.empty()) out.principal_claim = v;
  if (auto v = option("unsecuredValidatorScopeClaimName"); !v.empty()) out.scope_claim = v;
  // OAuthBearerScopeUtils.parseScope: space-delimited.
  const auto scope = option("unsecuredValidatorRequiredScope");
  size_t from = 0;
  while (from < scope.size()) {
    size_t space = scope.find(' ', from);
    if (space == std::string::npos) space = scope.size();
    if (space > from) out.required_scope.push_back(scope.substr(from, space - from));
    from = space + 1;
  }
  if (auto v = option("unsecuredValidatorAllowableClockSkewMs"); !v.empty()) {
    int32_t skew = 0;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), skew);
    if (ec != std::errc() || ptr != v.data() + v.size() || skew < 0) {
      return status::error(error_code::invalid_config,
                           "unsecuredValidatorAllowableClockSkewMs must be a non-negative int: " + v);
    }
    out.allowable_clock_skew_ms = skew;
  }
  return out;
}

std::variant<oauthbearer_token, oauthbearer_refusal> validate_unsecured_jws(
    std::string_view token, const unsecured_validator_options& options, int64_t now_ms) {
  if (token.size() > max_token_bytes)
    return refuse("token larger than " + std::to_string(max_token_bytes) + " bytes");
  if (token.find("..") != std::string_view::npos)
    return refuse("Malformed compact serialization contains '..'");
  const size_t first_dot = token.find('.');
  const size_t second_dot = first_dot == std::string_view::npos ? first_dot : token.find('.', first_dot + 1);
  if (second_dot == std::string_view::npos || token.find('.', second_dot + 1) != std::string_view::npos) {
    return refuse("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values");
  }
  auto header = decode_jws_object(token.substr(0, first_dot));
  auto claims = decode_jws_object(token.substr(first_dot + 1, second_dot - first_dot - 1));
  if (!header || !claims) return refuse("malformed Base64 URL encoded value or JSON");
  const auto* alg = header->find("alg");
  if (alg == nullptr || alg->as_string() == nullptr || *alg->as_string() != "none") {
    return refuse("Unsecured JWS must have 'none' for an algorithm");
  }
  if (second_dot + 1 != token.size()) return refuse("Unsecured JWS must not contain a digital signature");

  oauthbearer_token out;
  if (const auto* scope = claims->find(options.scope_claim); scope != nullptr && !scope->is_null()) {
    if (const auto* s = scope->as_string()) {
      if (auto t = trim(*s); !t.empty()) out.scope.insert(t);
    } else if (const auto* list = scope->as_array()) {
      for (const auto& item : *list) {
        std::string text;
        if (const auto* s = item.as_string()) text = trim(*s);
        if (const auto* n = item.as_number()) text = n->text;
        if (!text.empty()) out.scope.insert(text);
      }
    } else {
      return refuse("The '" + options.scope_claim + "' claim was not of type List");
    }
  }
  const auto* exp = claims->find("exp");
  if (exp == nullptr || exp->is_null()) return refuse("No expiration time in JWT");
  if (exp->as_number() == nullptr) return refuse("The 'exp' claim was not of type Number");
  const double exp_seconds = exp->as_number()->as_double;
  if (!std::isfinite(exp_seconds) || std::fabs(exp_seconds) > 9.2e15)
    return refuse("The 'exp' claim is out of range");
  out.lifetime_ms = std::llround(exp_seconds * 1000);
  const auto* principal = claims->find(options.principal_claim);
  if (principal != nullptr && !principal->is_null() && principal->as_string() == nullptr) {
    return refuse("The '" + options.principal_claim + "' claim was not of type String");
  }
  if (principal == nullptr || principal->as_string() == nullptr || trim(*principal->as_string()).empty()) {
    return refuse("No principal name in JWT claim: " + options.principal_claim);
  }
  out.principal = *principal->as_string();
  const auto* iat = claims->find("iat");
  std::optional<double> iat_seconds;
  if (iat != nullptr && !iat->is_null()) {
    if (iat->as_number() == nullptr) return refuse("The 'iat' claim was not of type Number");
    iat_seconds = iat->as_number()->as_double;
    if (!std::isfinite(*iat_seconds) || std::fabs(*iat_seconds) > 9.2e15)
      return refuse("The 'iat' claim is out of range");
    out.start_ms = std::llround(*iat_seconds * 1000);
  }
  const int64_t skew = options.allowable_clock_skew_ms;
  if (iat_seconds && 1000 * *iat_seconds > static_cast<double>(now_ms + skew)) {
    return refuse("The Issued At value was after the indicated time plus allowable clock skew");
  }
  if (static_cast<double>(now_ms - skew) >= 1000 * exp_seconds) {
    return refuse("The indicated time minus allowable clock skew was on or after the Expiration Time value");
  }
  if (iat_seconds && exp_seconds <= *iat_seconds) {
    return refuse("The Expiration Time time was not after the Issued At time");
  }
  for (const auto& required : options.required_scope) {
    if (!out.scope.contains(required)) {
      std::string wanted = "[";
      for (size_t i = 0; i < options.required_scope.size(); ++i) {
        wanted += (i ? ", " : "") + options.required_scope[i];
      }
      wanted += "]";
      return oauthbearer_refusal{"The provided scope was missing a required scope (" + required + ")",
                                 wanted};
    }
  }
  return out;
}

oauthbearer_validator make_unsecured_validator(unsecured_validator_options options) {
  return [options = std::move(options)](std::string_view token, int64_t now_ms) {
    return validate_unsecured_jws(token, options, now_ms);
  };
}

oauthbearer_server::oauthbearer_server(oauthbearer_validator validator) : _validator(std::move(validator)) {}

std::variant<oauthbearer_server::step, oauthbearer_server::failure> oauthbearer_server::evaluate(
    std::span<const uint8_t> client_message, int64_t now_ms) {
  if (_done) return failure{"Authentication failed", "an OAUTHBEARER message after the exchange ended"};
  if (client_message.size() == 1 && client_message[0] == separator && _error_sent) {
    // The client acknowledged the challenge: the exchange fails with it as the message.
    _done = true;
    return failure{*_error_sent, _error_reason};
  }
  _error_sent.reset();
  auto parsed = parse_oauthbearer_client_message(client_message);
  if (!parsed.ok()) {
    _done = true;
    return failure{parsed.error().message, parsed.error().message};
  }
  auto validated = _validator(parsed->token, now_ms);
  if (auto* refusal = std::get_if<oauthbearer_refusal>(&validated)) {
    std::string challenge = refusal->missing_scope ? R"({"status":"insufficient_scope", "scope":")" +
                                                         *refusal->missing_scope + "\"}"
                                                   : R"({"status":"invalid_token"})";
    _error_reason = "token refused: " + refusal->reason;
    _error_sent = challenge;
    return step{std::vector<uint8_t>(challenge.begin(), challenge.end()), false};
  }
  auto& token = std::get<oauthbearer_token>(validated);
  if (!parsed->authorization_id.empty() && parsed->authorization_id != token.principal) {
    _done = true;
    std::string message = "Authentication failed: Client requested an authorization id (" +
                          parsed->authorization_id + ") that is different from the token's principal name (" +
                          token.principal + ")";
    return failure{message, message};
  }
  _token = std::move(token);
  _done = true;
  return step{{}, true};
}

}  // namespace mala::security
