#include "mala/security/sasl_client.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "mala/security/jaas_config.h"
#include "mala/security/oauthbearer.h"

namespace mala::security {

namespace {

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::vector<uint8_t> to_bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

// Kafka's ScramFormatter.saslName: ',' -> "=2C", '=' -> "=3D".
std::string saslname_of(std::string_view user) {
  std::string out;
  for (char c : user) {
    if (c == ',') {
      out += "=2C";
    } else if (c == '=') {
      out += "=3D";
    } else {
      out += c;
    }
  }
  return out;
}

// "r=<nonce>,s=<salt>,i=<iterations>[,<extensions>]" (Kafka's ScramMessages.ServerFirstMessage; the
// reserved "m=" attribute is refused there too).
struct server_first {
  std::string nonce;
  std::vector<uint8_t> salt;
  int32_t iterations = 0;
};

std::optional<server_first> parse_server_first(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t from = 0;
  while (from <= text.size()) {
    size_t comma = text.find(',', from);
    if (comma == std::string_view::npos) comma = text.size();
    parts.push_back(text.substr(from, comma - from));
    from = comma + 1;
  }
  if (parts.size() < 3 || !parts[0].starts_with("r=") || !parts[1].starts_with("s=") ||
      !parts[2].starts_with("i=")) {
    return std::nullopt;
  }
  server_first out;
  out.nonce = std::string(parts[0].substr(2));
  auto salt = base64_decode(parts[1].substr(2));
  if (!salt || salt->empty() || out.nonce.empty()) return std::nullopt;
  out.salt = std::move(*salt);
  const auto digits = parts[2].substr(2);
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  for (char c : digits) out.iterations = out.iterations * 10 + (c - '0');
  return out;
}

std::vector<uint8_t> xor_bytes(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  std::vector<uint8_t> out(a.size());
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) out[i] = static_cast<uint8_t>(a[i] ^ b[i]);
  return out;
}

}  // namespace

sasl_client::sasl_client(sasl_client_credentials credentials, scram_mechanism scram, std::string nonce)
    : _credentials(std::move(credentials)), _scram(scram), _client_nonce(std::move(nonce)) {}

result<sasl_client> sasl_client::start(sasl_client_credentials credentials, std::string client_nonce) {
  if (credentials.mechanism == "PLAIN")
    return sasl_client(std::move(credentials), scram_mechanism::unknown, {});
  if (credentials.mechanism == "OAUTHBEARER") {
    if (!credentials.oauthbearer)
      return status::error(error_code::invalid_config, "OAUTHBEARER between nodes needs the node's login");
    auto token = credentials.oauthbearer->current();
    if (!token.ok()) return token.error();
    sasl_client client(std::move(credentials), scram_mechanism::unknown, {});
    client._oauthbearer_response = oauthbearer_initial_response(*token);
    return client;
  }
  const auto scram = scram_mechanism_from_name(credentials.mechanism);
  if (scram == scram_mechanism::unknown) {
    return status::error(error_code::invalid_config,
                         "SASL mechanism " + credentials.mechanism +
                             " is not supported between nodes (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and "
                             "OAUTHBEARER are)");
  }
  if (client_nonce.empty()) client_nonce = scram_random_nonce();
  return sasl_client(std::move(credentials), scram, std::move(client_nonce));
}

status sasl_client::fail(std::string reason) {
  _state = state::failed;
  return status::error(error_code::sasl_authentication_failed, std::move(reason));
}

std::vector<uint8_t> sasl_client::first_message() {
  if (!_oauthbearer_response.empty()) {
    _state = state::server_final;
    return to_bytes(_oauthbearer_response);
  }
  if (_scram == scram_mechanism::unknown) {
    // RFC 4616: [authzid] NUL authcid NUL passwd, with no authorization id.
    std::string message;
    message.push_back('\0');
    message += _credentials.username;
    message.push_back('\0');
    message += _credentials.password;
    _state = state::server_final;
    return to_bytes(message);
  }
  _client_first_bare = "n=" + saslname_of(_credentials.username) + ",r=" + _client_nonce;
  _state = state::server_first;
  return to_bytes("n,," + _client_first_bare);
}

result<std::optional<std::vector<uint8_t>>> sasl_client::evaluate(std::span<const uint8_t> server_message) {
  const std::string_view text(reinterpret_cast<const char*>(server_message.data()), server_message.size());
  switch (_state) {
    case state::server_first: {
      auto first = parse_server_first(text);
      if (!first) return fail("malformed SCRAM server first message");
      if (!first->nonce.starts_with(_client_nonce) || first->nonce.size() <= _client_nonce.size()) {
        return fail("the SCRAM server nonce does not extend the client's");
      }
      if (first->iterations < scram_min_iterations) {
        return fail("the SCRAM server asks for " + std::to_string(first->iterations) +
                    " iterations, fewer than the minimum " + std::to_string(scram_min_iterations));
      }
      if (first->iterations > scram_max_iterations) {
        return fail("the SCRAM server asks for " + std::to_string(first->iterations) +
                    " iterations, more than the maximum " + std::to_string(scram_max_iterations));
      }
      const auto salted =
          scram_salted_password(_scram, _credentials.password, first->salt, first->iterations);
      const auto client_key = scram_hmac(_scram, salted, bytes_of("Client Key"));
      const auto stored_key = scram_hash(_scram, client_key);
      const auto server_key = scram_hmac(_scram, salted, bytes_of("Server Key"));
      const std::string without_proof = "c=" + base64_encode(bytes_of("n,,")) + ",r=" + first->nonce;
      const std::string auth_message = _client_first_bare + "," + std::string(text) + "," + without_proof;
      const auto client_signature = scram_hmac(_scram, stored_key, bytes_of(auth_message));
      _expected_server_signature = scram_hmac(_scram, server_key, bytes_of(auth_message));
      _state = state::server_final;
      return std::optional<std::vector<uint8_t>>(
          to_bytes(without_proof + ",p=" + base64_encode(xor_bytes(client_key, client_signature))));
    }
    case state::server_final: {
      if (!_oauthbearer_response.empty()) {
        // OAUTHBEARER: an empty answer accepts the token; an error challenge (JSON) is acknowledged with a
        // lone %x01 (RFC 7628 3.2.3), after which the server fails the exchange.
        if (server_message.empty()) {
          _state = state::complete;
          return std::optional<std::vector<uint8_t>>();
        }
        _state = state::failed;
        return std::optional<std::vector<uint8_t>>(std::vector<uint8_t>{0x01});
      }
      if (_scram == scram_mechanism::unknown) {
        // PLAIN: the server answers an empty message once it accepted the credentials.
        if (!server_message.empty()) return fail("unexpected SASL/PLAIN server message");
        _state = state::complete;
        return std::optional<std::vector<uint8_t>>();
      }
      if (text.starts_with("e=")) return fail("the SCRAM server refused: " + std::string(text.substr(2)));
      if (!text.starts_with("v=")) return fail("malformed SCRAM server final message");
      const std::string_view encoded = text.substr(
          2, text.find(',') == std::string_view::npos ? std::string_view::npos : text.find(',') - 2);
      auto signature = base64_decode(encoded);
      if (!signature || !constant_time_equal(*signature, _expected_server_signature)) {
        return fail("the SCRAM server's signature does not match: it does not know the password");
      }
      _state = state::complete;
      return std::optional<std::vector<uint8_t>>();
    }
    case state::initial:
      return fail("a server message before the client's first");
    case state::complete:
    case state::failed:
      break;
  }
  return fail("a server message after the exchange ended");
}

result<sasl_client_credentials> node_sasl_credentials(const node_config& config, const std::string& listener,
                                                      const std::string& mechanism) {
  auto found = find_listener_jaas(config, listener, mechanism);
  const std::string& key = found.key;
  const auto& jaas = found.text;
  auto refuse = [&](const std::string& why) -> status {
    return status::error(error_code::invalid_config, key + ": " + why);
  };
  if (!jaas) {
    return refuse("the node authenticates to listener " + listener + " with " + mechanism +
                  " but no JAAS configuration is set for it");
  }
  auto modules = parse_jaas_config(*jaas);
  if (!modules.ok()) return refuse(modules.error().message);
  const std::string_view wanted = mechanism == "PLAIN"         ? plain_login_module
                                  : mechanism == "OAUTHBEARER" ? oauthbearer_login_module
                                                               : scram_login_module;
  for (const auto& m : *modules) {
    if (m.class_name != wanted) continue;
    if (mechanism == "OAUTHBEARER") {
      auto login = oauthbearer_login::open(config, listener, m.options);
      if (!login.ok()) return refuse(login.error().message);
      sasl_client_credentials out;
      out.mechanism = mechanism;
      out.oauthbearer = std::move(*login);
      return out;
    }
    auto user = m.options.find("username");
    auto password = m.options.find("password");
    if (user == m.options.end() || password == m.options.end()) {
      return refuse("the " + std::string(wanted) + " entry needs username and password options: they are " +
                    "the credentials this node presents to listener " + listener);
    }
    return sasl_client_credentials{mechanism, user->second, password->second};
  }
  return refuse("the JAAS configuration has no " + std::string(wanted) + " entry for " + mechanism);
}

}  // namespace mala::security
