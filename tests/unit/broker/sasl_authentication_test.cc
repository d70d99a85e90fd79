// The SASL state machine of a connection on a SASL listener (Kafka's SaslServerAuthenticator) driven through
// the dispatcher: the allowed order ApiVersions -> SaslHandshake -> SaslAuthenticate, closing on anything
// else, UNSUPPORTED_SASL_MECHANISM and SASL_AUTHENTICATION_FAILED answered then closed, PLAIN and SCRAM
// (credentials from the metadata image) completing with the principal set, SaslHandshake v0's bare tokens,
// KIP-368 session expiry and re-authentication, and ILLEGAL_SASL_STATE on PLAINTEXT listeners.
#include <gtest/gtest.h>

#include "mala/broker/broker_dispatcher.h"
#include "mala/broker/handler_table.h"
#include "mala/broker/sasl_authenticator.h"
#include "mala/protocol/messages/api_versions_request.h"
#include "mala/protocol/messages/metadata_request.h"
#include "mala/protocol/messages/sasl_authenticate_request.h"
#include "mala/protocol/messages/sasl_authenticate_response.h"
#include "mala/protocol/messages/sasl_handshake_request.h"
#include "mala/protocol/messages/sasl_handshake_response.h"
#include "mala/security/oauthbearer.h"
#include "mala/security/sasl_settings.h"
#include "mala/security/scram.h"

namespace mala::broker {
namespace {

using namespace mala::protocol;
using action = net::dispatch_result::action;

class sasl_authentication_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto image = std::make_shared<metadata::metadata_image>();
    image->cluster_id = "test-cluster";
    const auto credential =
        security::scram_credential_from_password(security::scram_mechanism::sha256, "pencil", 4096);
    image->scram_credentials["user"][1] = {credential.salt, credential.stored_key, credential.server_key,
                                           4096};
    cache.publish(image);
    services = {1, &cache, &table, {}};
    services.clock_ms = [this] { return now; };
    auto& l = settings.listeners["SASL_PLAINTEXT"];
    l.enabled_mechanisms = {"PLAIN", "SCRAM-SHA-256"};
    l.plain_users = {{"alice", "alice-secret"}};
    services.sasl = &settings;
    connection.listener_name = "SASL_PLAINTEXT";
    connection.protocol = security_protocol::sasl_plaintext;
    connection.max_receive_bytes = 524288;
  }

  template <typename Request>
  std::vector<uint8_t> frame(int16_t key, int16_t version, const Request& body) {
    std::vector<uint8_t> out;
    wire_writer w(out);
    request_header h{key, version, 42, std::string("unit-test")};
    encode_request_header(w, h, request_header_version(Request::is_flexible(version)));
    body.encode(w, version);
    return out;
  }

  net::dispatch_result send(std::span<const uint8_t> bytes) {
    broker_dispatcher d(services);
    return d.dispatch_now(connection, bytes);
  }

  sasl_handshake_response handshake(const std::string& mechanism, net::dispatch_result* out = nullptr,
                                    int16_t version = 1) {
    sasl_handshake_request req;
    req.mechanism = mechanism;
    auto result = send(frame(17, version, req));
    EXPECT_EQ(result.what, action::respond);
    wire_reader r(result.response);
    EXPECT_EQ(r.read_int32(), 42);
    sasl_handshake_response resp;
    EXPECT_EQ(resp.decode(r, version), decode_status::ok);
    if (out) *out = std::move(result);
    return resp;
  }

  sasl_authenticate_response authenticate(const std::string& token, net::dispatch_result* out = nullptr,
                                          int16_t version = 2) {
    sasl_authenticate_request req;
    req.auth_bytes.assign(token.begin(), token.end());
    auto result = send(frame(36, version, req));
    EXPECT_EQ(result.what, action::respond);
    wire_reader r(result.response);
    EXPECT_EQ(r.read_int32(), 42);
    if (version >= 2) r.read_uvarint();  // response header v1: no tagged fields
    sasl_authenticate_response resp;
    EXPECT_EQ(resp.decode(r, version), decode_status::ok);
    if (out) *out = std::move(result);
    return resp;
  }

  net::dispatch_result metadata() { return send(frame(3, 12, metadata_request{})); }

  int64_t now = 1'000'000;
  metadata::metadata_cache cache;
  handler_table table;
  broker_services services;
  security::sasl_settings settings;
  net::connection_info connection;
};

TEST_F(sasl_authentication_test, plain_after_api_versions) {
  api_versions_request av;
  EXPECT_EQ(send(frame(18, 3, av)).what, action::respond);
  auto hs = handshake("PLAIN");
  EXPECT_EQ(hs.error_code, 0);
  EXPECT_EQ(hs.mechanisms, (std::vector<std::string>{"PLAIN", "SCRAM-SHA-256"}));
  EXPECT_EQ(connection.principal_name, "ANONYMOUS");
  auto resp = authenticate(std::string("\0alice\0alice-secret", 19));
  EXPECT_EQ(resp.error_code, 0);
  EXPECT_FALSE(resp.error_message);
  EXPECT_EQ(resp.session_lifetime_ms, 0);
  EXPECT_EQ(connection.principal_type, "User");
  EXPECT_EQ(connection.principal_name, "alice");
  EXPECT_EQ(connection.max_receive_bytes, 0);
  EXPECT_EQ(metadata().what, action::respond);
  // After authentication both SASL requests answer ILLEGAL_SASL_STATE (re-authentication is off).
  EXPECT_EQ(handshake("PLAIN").error_code, 34);
  auto again = authenticate("x");
  EXPECT_EQ(again.error_code, 34);
  EXPECT_EQ(again.error_message, "SaslAuthenticate request received after successful authentication");
}

TEST_F(sasl_authentication_test, wrong_password_is_answered_then_closed) {
  handshake("PLAIN");
  net::dispatch_result result;
  auto resp = authenticate(std::string("\0alice\0nope", 11), &result);
  EXPECT_EQ(resp.error_code, 58);
  EXPECT_EQ(resp.error_message, "Authentication failed: Invalid username or password");
  EXPECT_TRUE(result.close_after_response);
  EXPECT_EQ(result.close_reason.find("nope"), std::string::npos);
  EXPECT_EQ(connection.principal_name, "ANONYMOUS");
  EXPECT_EQ(metadata().what, action::close);
}

TEST_F(sasl_authentication_test, unknown_mechanism_lists_the_enabled_ones) {
  net::dispatch_result result;
  auto hs = handshake("GSSAPI", &result);
  EXPECT_EQ(hs.error_code, 33);
  EXPECT_EQ(hs.mechanisms, (std::vector<std::string>{"PLAIN", "SCRAM-SHA-256"}));
  EXPECT_TRUE(result.close_after_response);
}

TEST_F(sasl_authentication_test, requests_out_of_order_close_the_connection) {
  {
    auto result = metadata();
    EXPECT_EQ(result.what, action::close);
    EXPECT_NE(result.close_reason.find("during SASL handshake"), std::string::npos) << result.close_reason;
  }
  {
    connection.authentication.reset();
    sasl_authenticate_request req;
    auto result = send(frame(36, 2, req));
    EXPECT_EQ(result.what, action::close);
  }
  {
    connection.authentication.reset();
    handshake("PLAIN");
    auto result = metadata();
    EXPECT_EQ(result.what, action::close);
    EXPECT_NE(result.close_reason.find("during SASL authentication"), std::string::npos)
        << result.close_reason;
  }
  {
    // ApiVersions only once, before the handshake.
    connection.authentication.reset();
    api_versions_request av;
    EXPECT_EQ(send(frame(18, 3, av)).what, action::respond);
    EXPECT_EQ(send(frame(18, 3, av)).what, action::close);
  }
}

TEST_F(sasl_authentication_test, scram_sha_256_with_image_credentials) {
  EXPECT_EQ(handshake("SCRAM-SHA-256").error_code, 0);
  const std::string client_first_bare = "n=user,r=fyko+d2lbbFgONRv9qkxdawL";
  auto first = authenticate("n,," + client_first_bare);
  ASSERT_EQ(first.error_code, 0);
  const std::string server_first(first.auth_bytes.begin(), first.auth_bytes.end());
  const auto nonce = server_first.substr(2, server_first.find(',') - 2);
  const auto salt = *security::base64_decode(server_first.substr(
      server_first.find(",s=") + 3, server_first.find(",i=") - server_first.find(",s=") - 3));
  using security::scram_mechanism;
  auto b = [](const std::string& s) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  const auto salted = security::scram_salted_password(scram_mechanism::sha256, "pencil", salt, 4096);
  const auto client_key = security::scram_hmac(scram_mechanism::sha256, salted, b("Client Key"));
  const auto stored_key = security::scram_hash(scram_mechanism::sha256, client_key);
  const std::string without_proof = "c=biws,r=" + nonce;
  const std::string auth_message = client_first_bare + "," + server_first + "," + without_proof;
  auto proof = security::scram_hmac(scram_mechanism::sha256, stored_key, b(auth_message));
  for (size_t i = 0; i < proof.size(); ++i) proof[i] ^= client_key[i];
  auto final_resp = authenticate(without_proof + ",p=" + security::base64_encode(proof));
  EXPECT_EQ(final_resp.error_code, 0);
  EXPECT_EQ(std::string(final_resp.auth_bytes.begin(), final_resp.auth_bytes.end()).substr(0, 2), "v=");
  EXPECT_EQ(connection.principal_name, "user");
}

TEST_F(sasl_authentication_test, scram_failure_gives_the_generic_message) {
  handshake("SCRAM-SHA-256");
  net::dispatch_result result;
  auto resp = authenticate("n,,n=nobody,r=abc", &result);
  EXPECT_EQ(resp.error_code, 58);
  EXPECT_EQ(resp.error_message,
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-256");
  EXPECT_TRUE(result.close_after_response);
}

TEST_F(sasl_authentication_test, handshake_v0_takes_bare_tokens) {
  EXPECT_EQ(handshake("PLAIN", nullptr, 0).error_code, 0);
  const std::string token("\0alice\0alice-secret", 19);
  auto result = send(std::vector<uint8_t>(token.begin(), token.end()));
  ASSERT_EQ(result.what, action::respond);
  EXPECT_TRUE(result.response.empty());
  EXPECT_EQ(connection.principal_name, "alice");
  EXPECT_EQ(metadata().what, action::respond);
}

TEST_F(sasl_authentication_test, kip368_session_expiry_and_reauthentication) {
  settings.connections_max_reauth_ms = 10'000;
  handshake("PLAIN");
  auto v1 = authenticate(std::string("\0alice\0alice-secret", 19), nullptr, 1);
  EXPECT_EQ(v1.session_lifetime_ms, 10'000);
  now += 5'000;
  EXPECT_EQ(metadata().what, action::respond);
  // Re-authentication before the end: same mechanism, same principal.
  EXPECT_EQ(handshake("PLAIN").error_code, 0);
  EXPECT_EQ(authenticate(std::string("\0alice\0alice-secret", 19), nullptr, 1).error_code, 0);
  now += 9'000;
  EXPECT_EQ(metadata().what, action::respond);  // the new session runs until 15'000 + 10'000
  now += 2'000;
  auto expired = metadata();
  EXPECT_EQ(expired.what, action::close);
  EXPECT_NE(expired.close_reason.find("expired"), std::string::npos);
}

std::string unsecured_token(int64_t exp_seconds, const std::string& sub = "carol") {
  auto b64url = [](const std::string& text) {
    std::string out = security::base64_encode({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
    while (!out.empty() && out.back() == '=') out.pop_back();
    for (auto& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
    return out;
  };
  return b64url(R"({"alg":"none"})") + "." +
         b64url(R"({"sub":")" + sub + R"(","exp":)" + std::to_string(exp_seconds) + "}") + ".";
}

std::string oauthbearer_message(const std::string& token) {
  return std::string("n,,\x01") + "auth=Bearer " + token + "\x01\x01";
}

TEST_F(sasl_authentication_test, oauthbearer_session_ends_at_the_token_s_expiry) {
  settings.listeners["SASL_PLAINTEXT"].enabled_mechanisms.push_back("OAUTHBEARER");
  settings.listeners["SASL_PLAINTEXT"].oauthbearer = security::make_unsecured_validator({});
  now = 1'700'000'000'000;
  EXPECT_EQ(handshake("OAUTHBEARER").error_code, 0);
  auto ok = authenticate(oauthbearer_message(unsecured_token(1'700'000'030)));
  EXPECT_EQ(ok.error_code, 0);
  EXPECT_EQ(ok.session_lifetime_ms, 30'000);  // no connections.max.reauth.ms: the token alone bounds it
  EXPECT_EQ(connection.principal_name, "carol");
  now += 20'000;
  EXPECT_EQ(metadata().what, action::respond);
  // Re-authentication with a fresh token before the end, although connections.max.reauth.ms is 0.
  EXPECT_EQ(handshake("OAUTHBEARER").error_code, 0);
  EXPECT_EQ(authenticate(oauthbearer_message(unsecured_token(1'700'000'100))).session_lifetime_ms, 80'000);
  now += 80'000;
  EXPECT_EQ(metadata().what, action::close);
}

TEST_F(sasl_authentication_test, oauthbearer_refused_token_gets_the_challenge_then_fails) {
  settings.listeners["SASL_PLAINTEXT"].enabled_mechanisms.push_back("OAUTHBEARER");
  settings.listeners["SASL_PLAINTEXT"].oauthbearer = security::make_unsecured_validator({});
  settings.connections_max_reauth_ms = 60'000;
  now = 1'700'000'000'000;
  handshake("OAUTHBEARER");
  auto challenge = authenticate(oauthbearer_message(unsecured_token(1'600'000'000)));
  EXPECT_EQ(challenge.error_code, 0);
  EXPECT_EQ(std::string(challenge.auth_bytes.begin(), challenge.auth_bytes.end()),
            R"({"status":"invalid_token"})");
  net::dispatch_result result;
  auto failed = authenticate("\x01", &result);
  EXPECT_EQ(failed.error_code, 58);
  EXPECT_EQ(failed.error_message, R"({"status":"invalid_token"})");
  EXPECT_TRUE(result.close_after_response);
  EXPECT_EQ(connection.principal_name, "ANONYMOUS");
}

TEST_F(sasl_authentication_test, oauthbearer_session_is_the_shorter_of_token_and_reauth) {
  settings.listeners["SASL_PLAINTEXT"].enabled_mechanisms.push_back("OAUTHBEARER");
  settings.listeners["SASL_PLAINTEXT"].oauthbearer = security::make_unsecured_validator({});
  settings.connections_max_reauth_ms = 10'000;
  now = 1'700'000'000'000;
  handshake("OAUTHBEARER");
  EXPECT_EQ(authenticate(oauthbearer_message(unsecured_token(1'700'000'030))).session_lifetime_ms, 10'000);
}

TEST_F(sasl_authentication_test, reauthentication_cannot_change_mechanism) {
  settings.connections_max_reauth_ms = 10'000;
  handshake("PLAIN");
  authenticate(std::string("\0alice\0alice-secret", 19));
  net::dispatch_result result;
  EXPECT_EQ(handshake("SCRAM-SHA-256", &result).error_code, 33);
  EXPECT_TRUE(result.close_after_response);
}

TEST_F(sasl_authentication_test, plaintext_listener_answers_illegal_sasl_state) {
  connection.listener_name = "PLAINTEXT";
  connection.protocol = security_protocol::plaintext;
  auto hs = handshake("PLAIN");
  EXPECT_EQ(hs.error_code, 34);
  EXPECT_TRUE(hs.mechanisms.empty());
  EXPECT_EQ(connection.authentication, nullptr);
}

}  // namespace
}  // namespace mala::broker
