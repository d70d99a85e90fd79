#include "mala/security/scram.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>

#include "mala/common/assert.h"

namespace mala::security {

namespace {

const EVP_MD* digest(scram_mechanism m) {
  return m == scram_mechanism::sha512 ? EVP_sha512() : EVP_sha256();
}

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

status invalid(std::string what) {
  return status::error(error_code::sasl_authentication_failed, std::move(what));
}

// Kafka's ScramMessages: a value is ASCII 0x01-0x7F without ','; printable is 0x21-0x7E without ','.
bool is_value(std::string_view v) {
  if (v.empty()) return false;
  for (char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x01 || u > 0x7f || c == ',') return false;
  }
  return true;
}
bool is_printable(std::string_view v) {
  if (v.empty()) return false;
  for (char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u > 0x7e || c == ',') return false;
  }
  return true;
}
bool is_alpha(std::string_view v) {
  if (v.empty()) return false;
  for (char c : v) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;
  }
  return true;
}

// Splits on ','; empty fields are kept.
std::vector<std::string_view> split_commas(std::string_view s) {
  std::vector<std::string_view> out;
  size_t from = 0;
  for (;;) {
    const size_t comma = s.find(',', from);
    out.push_back(s.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
    if (comma == std::string_view::npos) return out;
    from = comma + 1;
  }
}

// "k=value" with a one-letter key `k`: the value, or nullopt.
std::optional<std::string_view> attribute(std::string_view field, char key) {
  if (field.size() < 2 || field[0] != key || field[1] != '=') return std::nullopt;
  return field.substr(2);
}

// Extensions "name=value" with an alphabetic name (Kafka's EXTENSIONS pattern).
bool parse_extension(std::string_view field, std::vector<std::pair<std::string, std::string>>& out) {
  const size_t eq = field.find('=');
  if (eq == std::string_view::npos) return false;
  const auto name = field.substr(0, eq);
  const auto value = field.substr(eq + 1);
  if (!is_alpha(name) || !is_value(value)) return false;
  out.emplace_back(std::string(name), std::string(value));
  return true;
}

}  // namespace

scram_mechanism scram_mechanism_from_name(std::string_view name) {
  if (name == "SCRAM-SHA-256") return scram_mechanism::sha256;
  if (name == "SCRAM-SHA-512") return scram_mechanism::sha512;
  return scram_mechanism::unknown;
}

scram_mechanism scram_mechanism_from_type(int8_t type) {
  if (type == 1) return scram_mechanism::sha256;
  if (type == 2) return scram_mechanism::sha512;
  return scram_mechanism::unknown;
}

std::string_view scram_mechanism_name(scram_mechanism m) {
  switch (m) {
    case scram_mechanism::sha256:
      return "SCRAM-SHA-256";
    case scram_mechanism::sha512:
      return "SCRAM-SHA-512";
    default:
      return "UNKNOWN";
  }
}

std::vector<uint8_t> scram_hmac(scram_mechanism m, std::span<const uint8_t> key,
                                std::span<const uint8_t> data) {
  std::vector<uint8_t> out(EVP_MAX_MD_SIZE);
  unsigned int length = 0;
  const bool ok = HMAC(digest(m), key.data(), static_cast<int>(key.size()), data.data(), data.size(),
                       out.data(), &length) != nullptr;
  MALA_ASSERT(ok, "HMAC failed");
  out.resize(length);
  return out;
}

std::vector<uint8_t> scram_hash(scram_mechanism m, std::span<const uint8_t> data) {
  std::vector<uint8_t> out(EVP_MAX_MD_SIZE);
  unsigned int length = 0;
  const bool ok = EVP_Digest(data.data(), data.size(), out.data(), &length, digest(m), nullptr) == 1;
  MALA_ASSERT(ok, "digest failed");
  out.resize(length);
  return out;
}

std::vector<uint8_t> scram_salted_password(scram_mechanism m, std::string_view password,
                                           std::span<const uint8_t> salt, int32_t iterations) {
  std::vector<uint8_t> out(static_cast<size_t>(EVP_MD_get_size(digest(m))));
  const bool ok = PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()), salt.data(),
                                    static_cast<int>(salt.size()), iterations, digest(m),
                                    static_cast<int>(out.size()), out.data()) == 1;
  MALA_ASSERT(ok, "PBKDF2 failed");
  return out;
}

scram_credential scram_credential_from_salted(scram_mechanism m, std::span<const uint8_t> salt,
                                              std::span<const uint8_t> salted_password, int32_t iterations) {
  scram_credential c;
  c.salt.assign(salt.begin(), salt.end());
  c.iterations = iterations;
  const auto client_key = scram_hmac(m, salted_password, bytes_of("Client Key"));
  c.stored_key = scram_hash(m, client_key);
  c.server_key = scram_hmac(m, salted_password, bytes_of("Server Key"));
  return c;
}

scram_credential scram_credential_from_password(scram_mechanism m, std::string_view password,
                                                int32_t iterations) {
  const auto salt = secure_random_bytes(24);
  const auto salted = scram_salted_password(m, password, salt, iterations);
  return scram_credential_from_salted(m, salt, salted, iterations);
}

std::vector<uint8_t> secure_random_bytes(size_t n) {
  std::vector<uint8_t> out(n);
  const bool ok = RAND_bytes(out.data(), static_cast<int>(n)) == 1;
  MALA_ASSERT(ok, "RAND_bytes failed");
  return out;
}

std::string scram_random_nonce() {
  static constexpr std::string_view alphabet =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string nonce;
  // 32 characters of 62: about 190 bits. 248 = 4 * 62 keeps the choice unbiased.
  while (nonce.size() < 32) {
    for (uint8_t b : secure_random_bytes(48)) {
      if (b < 248 && nonce.size() < 32) nonce.push_back(alphabet[b % 62]);
    }
  }
  return nonce;
}

bool constant_time_equal(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string base64_encode(std::span<const uint8_t> bytes) {
  static constexpr std::string_view table =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = (uint32_t{bytes[i]} << 16) | (uint32_t{bytes[i + 1]} << 8) | bytes[i + 2];
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += table[(v >> 6) & 63];
    out += table[v & 63];
  }
  if (bytes.size() - i == 1) {
    const uint32_t v = uint32_t{bytes[i]} << 16;
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += "==";
  } else if (bytes.size() - i == 2) {
    const uint32_t v = (uint32_t{bytes[i]} << 16) | (uint32_t{bytes[i + 1]} << 8);
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += table[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::optional<std::vector<uint8_t>> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int v[4];
    int padding = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + static_cast<size_t>(k)];
      if (c == '=' && last && k >= 2) {
        v[k] = 0;
        ++padding;
        continue;
      }
      if (padding > 0) return std::nullopt;  // data after padding
      v[k] = value(c);
      if (v[k] < 0) return std::nullopt;
    }
    const uint32_t n = (static_cast<uint32_t>(v[0]) << 18) | (static_cast<uint32_t>(v[1]) << 12) |
                       (static_cast<uint32_t>(v[2]) << 6) | static_cast<uint32_t>(v[3]);
    out.push_back(static_cast<uint8_t>(n >> 16));
    if (padding < 2) out.push_back(static_cast<uint8_t>(n >> 8));
    if (padding < 1) out.push_back(static_cast<uint8_t>(n));
  }
  return out;
}

std::optional<std::string> scram_username_from_saslname(std::string_view saslname) {
  std::string out;
  out.reserve(saslname.size());
  for (size_t i = 0; i < saslname.size(); ++i) {
    const char c = saslname[i];
    if (c != '=') {
      out.push_back(c);
      continue;
    }
    const auto escape = saslname.substr(i, 3);
    if (escape == "=2C") {
      out.push_back(',');
    } else if (escape == "=3D") {
      out.push_back('=');
    } else {
      return std::nullopt;
    }
    i += 2;
  }
  return out;
}

result<scram_client_first> parse_scram_client_first(std::string_view message) {
  // gs2-header: ("n" | "y") "," ["a=" saslname] ","
  if (message.size() < 3 || (message[0] != 'n' && message[0] != 'y') || message[1] != ',') {
    return invalid("invalid SCRAM client first message: channel binding flag must be 'n' or 'y'");
  }
  const size_t second_comma = message.find(',', 2);
  if (second_comma == std::string_view::npos) return invalid("invalid SCRAM client first message format");
  scram_client_first out;
  out.gs2_header = std::string(message.substr(0, second_comma + 1));
  const auto authzid_field = message.substr(2, second_comma - 2);
  if (!authzid_field.empty()) {
    auto authzid = attribute(authzid_field, 'a');
    if (!authzid || !is_value(*authzid)) return invalid("invalid SCRAM client first message: bad authzid");
    auto decoded = scram_username_from_saslname(*authzid);
    if (!decoded) return invalid("invalid SCRAM client first message: bad authzid");
    out.authorization_id = std::move(*decoded);
  }
  out.bare = std::string(message.substr(second_comma + 1));
  auto fields = split_commas(out.bare);
  size_t at = 0;
  // Kafka's optional reserved "m=" field is mandatory-extension syntax RFC 5802 says to refuse.
  if (at < fields.size() && fields[at].starts_with("m=")) {
    return invalid("invalid SCRAM client first message: mandatory extensions are not supported");
  }
  auto name = at < fields.size() ? attribute(fields[at], 'n') : std::nullopt;
  if (!name || !is_value(*name)) return invalid("invalid SCRAM client first message: no user name");
  auto user = scram_username_from_saslname(*name);
  if (!user) return invalid("invalid SCRAM client first message: bad user name encoding");
  out.username = std::move(*user);
  ++at;
  auto nonce = at < fields.size() ? attribute(fields[at], 'r') : std::nullopt;
  if (!nonce || !is_printable(*nonce)) return invalid("invalid SCRAM client first message: no nonce");
  out.nonce = std::string(*nonce);
  for (++at; at < fields.size(); ++at) {
    if (!parse_extension(fields[at], out.extensions)) {
      return invalid("invalid SCRAM client first message: bad extension");
    }
  }
  return out;
}

result<scram_client_final> parse_scram_client_final(std::string_view message) {
  const size_t proof_at = message.rfind(",p=");
  if (proof_at == std::string_view::npos) return invalid("invalid SCRAM client final message: no proof");
  scram_client_final out;
  out.without_proof = std::string(message.substr(0, proof_at));
  auto proof = base64_decode(message.substr(proof_at + 3));
  if (!proof || proof->empty()) return invalid("invalid SCRAM client final message: bad proof");
  out.proof = std::move(*proof);
  auto fields = split_commas(out.without_proof);
  if (fields.size() < 2) return invalid("invalid SCRAM client final message format");
  auto channel = attribute(fields[0], 'c');
  auto binding = channel ? base64_decode(*channel) : std::nullopt;
  if (!binding) return invalid("invalid SCRAM client final message: bad channel binding");
  out.channel_binding = std::move(*binding);
  auto nonce = attribute(fields[1], 'r');
  if (!nonce || !is_printable(*nonce)) return invalid("invalid SCRAM client final message: bad nonce");
  out.nonce = std::string(*nonce);
  std::vector<std::pair<std::string, std::string>> extensions;
  for (size_t i = 2; i < fields.size(); ++i) {
    if (!parse_extension(fields[i], extensions)) {
      return invalid("invalid SCRAM client final message: bad extension");
    }
  }
  return out;
}

std::string format_scram_server_first(std::string_view nonce, std::span<const uint8_t> salt,
                                      int32_t iterations) {
  return "r=" + std::string(nonce) + ",s=" + base64_encode(salt) + ",i=" + std::to_string(iterations);
}

std::string format_scram_server_final(std::span<const uint8_t> server_signature) {
  return "v=" + base64_encode(server_signature);
}

scram_server::scram_server(scram_mechanism mechanism, credential_lookup lookup, std::string server_nonce)
    : _mechanism(mechanism),
      _lookup(std::move(lookup)),
      _server_nonce(server_nonce.empty() ? scram_random_nonce() : std::move(server_nonce)) {}

std::variant<scram_server::step, scram_server::failure> scram_server::evaluate(
    std::span<const uint8_t> client_message) {
  const std::string_view text(reinterpret_cast<const char*>(client_message.data()), client_message.size());
  auto fail = [this](std::string reason, std::optional<std::string> client = std::nullopt) {
    _state = state::failed;
    _credential.reset();
    return failure{std::move(reason), std::move(client)};
  };
  switch (_state) {
    case state::client_first: {
      auto first = parse_scram_client_first(text);
      if (!first.ok()) return fail(first.error().message);
      // KIP-48 delegation tokens authenticate with tokenauth=true; Mala has no delegation tokens. Other
      // extensions are ignored, as Kafka's ScramSaslServer does.
      for (const auto& [name, value] : first->extensions) {
        if (name == "tokenauth" && value == "true") {
          return fail("delegation token authentication (tokenauth=true) is not supported");
        }
      }
      _credential = _lookup(first->username);
      if (!_credential)
        return fail("no " + std::string(scram_mechanism_name(_mechanism)) + " credential for user");
      if (!first->authorization_id.empty() && first->authorization_id != first->username) {
        return fail(
            "authorization id differs from the user name",
            "Authentication failed: Client requested an authorization id that is different from username");
      }
      if (_credential->iterations < scram_min_iterations) {
        return fail("the stored credential has " + std::to_string(_credential->iterations) +
                    " iterations, fewer than the minimum " + std::to_string(scram_min_iterations));
      }
      _user = first->username;
      _gs2_header = first->gs2_header;
      _client_first_bare = first->bare;
      _nonce = first->nonce + _server_nonce;
      _server_first = format_scram_server_first(_nonce, _credential->salt, _credential->iterations);
      _state = state::client_final;
      return step{std::vector<uint8_t>(_server_first.begin(), _server_first.end()), false};
    }
    case state::client_final: {
      auto final_message = parse_scram_client_final(text);
      if (!final_message.ok()) return fail(final_message.error().message);
      if (final_message->nonce != _nonce) return fail("Invalid client nonce in the final client message.");
      // Only "n" and "y" (no channel binding): c= must carry the client first message's gs2 header back.
      if (!constant_time_equal(final_message->channel_binding, bytes_of(_gs2_header))) {
        return fail("the channel binding does not repeat the client first message's gs2 header");
      }
      const std::string auth_message =
          _client_first_bare + "," + _server_first + "," + final_message->without_proof;
      const auto client_signature = scram_hmac(_mechanism, _credential->stored_key, bytes_of(auth_message));
      if (final_message->proof.size() != client_signature.size()) return fail("Invalid client credentials");
      std::vector<uint8_t> client_key(client_signature.size());
      for (size_t i = 0; i < client_key.size(); ++i)
        client_key[i] = client_signature[i] ^ final_message->proof[i];
      if (!constant_time_equal(scram_hash(_mechanism, client_key), _credential->stored_key)) {
        return fail("Invalid client credentials");
      }
      const auto server_signature = scram_hmac(_mechanism, _credential->server_key, bytes_of(auth_message));
      const std::string server_final = format_scram_server_final(server_signature);
      _credential.reset();
      _state = state::complete;
      return step{std::vector<uint8_t>(server_final.begin(), server_final.end()), true};
    }
    default:
      return fail("unexpected SCRAM message after the exchange ended");
  }
}

}  // namespace mala::security
