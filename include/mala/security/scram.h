// SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer speaks them: the message
// parsers and formatters, the key derivation (Hi = PBKDF2-HMAC, ClientKey, StoredKey, ServerKey) and the
// server side of one exchange. Pure functions and one small per-connection state machine; no shared state,
// callable from any thread. Parsers take untrusted bytes and never read past them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "mala/common/result.h"

namespace mala::security {

enum class scram_mechanism : int8_t { unknown = 0, sha256 = 1, sha512 = 2 };  // Kafka's ScramMechanism types

// "SCRAM-SHA-256" / "SCRAM-SHA-512"; unknown for anything else.
scram_mechanism scram_mechanism_from_name(std::string_view name);
scram_mechanism scram_mechanism_from_type(int8_t type);
std::string_view scram_mechanism_name(scram_mechanism m);
// Kafka's ScramMechanism.minIterations (4096) and ScramControlManager.MAX_ITERATIONS (16384).
inline constexpr int32_t scram_min_iterations = 4096;
inline constexpr int32_t scram_max_iterations = 16384;

// What the metadata log stores per (user, mechanism): UserScramCredentialRecord.
struct scram_credential {
  std::vector<uint8_t> salt;
  std::vector<uint8_t> stored_key;
  std::vector<uint8_t> server_key;
  int32_t iterations = 0;
  friend bool operator==(const scram_credential&, const scram_credential&) = default;
};

// --- Crypto (OpenSSL libcrypto)
std::vector<uint8_t> scram_hmac(scram_mechanism m, std::span<const uint8_t> key,
                                std::span<const uint8_t> data);
std::vector<uint8_t> scram_hash(scram_mechanism m, std::span<const uint8_t> data);
// Hi(password, salt, i) of RFC 5802: PBKDF2 with HMAC of the mechanism's hash, output of the hash's size.
std::vector<uint8_t> scram_salted_password(scram_mechanism m, std::string_view password,
                                           std::span<const uint8_t> salt, int32_t iterations);
// The stored and server keys of a salted password (Kafka's ScramControlManager.finishUpsertion).
scram_credential scram_credential_from_salted(scram_mechanism m, std::span<const uint8_t> salt,
                                              std::span<const uint8_t> salted_password, int32_t iterations);
// A full credential from a password with a fresh random salt (tests; kafka-configs computes it client-side).
scram_credential scram_credential_from_password(scram_mechanism m, std::string_view password,
                                                int32_t iterations);
// Random bytes from the OS CSPRNG.
std::vector<uint8_t> secure_random_bytes(size_t n);
// A printable random nonce (letters and digits).
std::string scram_random_nonce();
// Constant-time equality of two byte strings (time depends on the lengths only).
bool constant_time_equal(std::span<const uint8_t> a, std::span<const uint8_t> b);

std::string base64_encode(std::span<const uint8_t> bytes);
// Strict RFC 4648 base64 with padding; nullopt on anything else.
std::optional<std::vector<uint8_t>> base64_decode(std::string_view text);

// --- Messages
// client-first-message: gs2-header ("n,," or "y,," with an optional "a=authzid") then "n=saslname,r=nonce"
// and optional extensions ("tokenauth=true", ...).
struct scram_client_first {
  std::string gs2_header;  // "n,," / "y,," / "n,a=alice," ...: the client final's c= must be its base64
  std::string authorization_id;
  std::string username;  // saslname decoded (=2C is ',', =3D is '=')
  std::string nonce;
  std::vector<std::pair<std::string, std::string>> extensions;
  std::string bare;  // "n=...,r=...[,ext...]" as received, for the AuthMessage
};
result<scram_client_first> parse_scram_client_first(std::string_view message);

// client-final-message: "c=<base64 gs2 header>,r=<nonce>[,extensions],p=<base64 proof>".
struct scram_client_final {
  std::vector<uint8_t> channel_binding;
  std::string nonce;
  std::vector<uint8_t> proof;
  std::string without_proof;  // everything before ",p=", for the AuthMessage
};
result<scram_client_final> parse_scram_client_final(std::string_view message);

// "r=<nonce>,s=<base64 salt>,i=<iterations>".
std::string format_scram_server_first(std::string_view nonce, std::span<const uint8_t> salt,
                                      int32_t iterations);
// "v=<base64 server signature>".
std::string format_scram_server_final(std::span<const uint8_t> server_signature);

// Kafka's ScramFormatter.username: "=2C" -> ",", "=3D" -> "="; any other '=' is invalid.
std::optional<std::string> scram_username_from_saslname(std::string_view saslname);

// --- The server side of one exchange (Kafka's ScramSaslServer). `lookup` finds the credential of a user for
// this mechanism, nullopt when there is none.
class scram_server {
 public:
  using credential_lookup = std::function<std::optional<scram_credential>(const std::string& user)>;
  scram_server(scram_mechanism mechanism, credential_lookup lookup, std::string server_nonce = {});

  // One client message in, one server message out. A failure's status carries the reason for the log; the
  // client only ever sees Kafka's generic message (Kafka does not tell which step failed, so as not to
  // reveal whether a user exists), except authzid mismatch, whose message Kafka does send.
  struct step {
    std::vector<uint8_t> response;
    bool complete = false;
  };
  struct failure {
    std::string log_reason;
    std::optional<std::string> client_message;  // nullopt: the generic "invalid credentials" message
  };
  std::variant<step, failure> evaluate(std::span<const uint8_t> client_message);
  const std::string& authorized_user() const { return _user; }

 private:
  enum class state : uint8_t { client_first, client_final, complete, failed };
  scram_mechanism _mechanism;
  credential_lookup _lookup;
  state _state = state::client_first;
  std::string _server_nonce;
  std::string _user;
  std::optional<scram_credential> _credential;
  std::string _client_first_bare;
  std::string _server_first;
  std::string _gs2_header;
  std::string _nonce;  // client nonce + server nonce
};

}  // namespace mala::security
