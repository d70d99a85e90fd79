// The node's own OAUTHBEARER login (issue 23: OAUTHBEARER between nodes): the unsecured JWS Kafka's
// OAuthBearerUnsecuredLoginCallbackHandler makes from the login module's options, accepted by the unsecured
// validator a listener runs; the initial response parsed back as the server parses it; a whole exchange of
// sasl_client against oauthbearer_server, accepted and refused; and a token read from a file:// token
// endpoint (OAuthBearerLoginCallbackHandler).
#include "mala/security/oauthbearer_login.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "mala/security/oauthbearer.h"
#include "mala/security/sasl_client.h"

namespace mala::security {
namespace {

constexpr int64_t now_ms = 1'764'000'000'000;

std::map<std::string, std::string> login_options() {
  return {{"unsecuredLoginStringClaim_sub", "broker"},
          {"unsecuredLoginListClaim_scope", ",inter-broker,admin"},
          {"unsecuredLoginNumberClaim_rank", "7"},
          {"unsecuredLoginLifetimeSeconds", "120"},
          {"unsecuredLoginExtension_traceId", "abc"}};
}

std::span<const uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(oauthbearer_login, the_unsecured_token_is_what_the_unsecured_validator_accepts) {
  auto token = unsecured_login_token(login_options(), now_ms);
  ASSERT_TRUE(token.ok()) << token.error().message;
  EXPECT_EQ(token->issued_at_ms, now_ms);
  EXPECT_EQ(token->expires_at_ms, now_ms + 120'000);
  EXPECT_TRUE(token->value.ends_with("."));  // no signature

  unsecured_validator_options v;
  v.required_scope = {"inter-broker"};
  auto validated = validate_unsecured_jws(token->value, v, now_ms + 1000);
  ASSERT_TRUE(std::holds_alternative<oauthbearer_token>(validated))
      << std::get<oauthbearer_refusal>(validated).reason;
  const auto& accepted = std::get<oauthbearer_token>(validated);
  EXPECT_EQ(accepted.principal, "broker");
  EXPECT_EQ(accepted.lifetime_ms, now_ms + 120'000);
  EXPECT_EQ(accepted.scope, (std::set<std::string>{"inter-broker", "admin"}));
  // Expired once its lifetime passed.
  EXPECT_TRUE(
      std::holds_alternative<oauthbearer_refusal>(validate_unsecured_jws(token->value, v, now_ms + 121'000)));

  auto parsed = parse_oauthbearer_client_message(bytes(oauthbearer_initial_response(*token)));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->token, token->value);
  EXPECT_EQ(parsed->extensions, (std::map<std::string, std::string>{{"traceId", "abc"}}));
  EXPECT_TRUE(parsed->authorization_id.empty());
}

TEST(oauthbearer_login, unusable_login_options_are_refused) {
  auto without_principal = login_options();
  without_principal.erase("unsecuredLoginStringClaim_sub");
  auto refused = unsecured_login_token(without_principal, now_ms);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("unsecuredLoginStringClaim_sub"), std::string::npos);

  auto bad_lifetime = login_options();
  bad_lifetime["unsecuredLoginLifetimeSeconds"] = "soon";
  EXPECT_FALSE(unsecured_login_token(bad_lifetime, now_ms).ok());
  auto auth_extension = login_options();
  auth_extension["unsecuredLoginExtension_auth"] = "x";
  EXPECT_FALSE(unsecured_login_token(auth_extension, now_ms).ok());
  auto exp_claim = login_options();
  exp_claim["unsecuredLoginNumberClaim_exp"] = "1";
  EXPECT_FALSE(unsecured_login_token(exp_claim, now_ms).ok());
}

// The client against the server, as peer_client and the broker's authenticator carry them.
std::optional<std::string> exchange(sasl_client& client, oauthbearer_server& server, int64_t at_ms) {
  auto message = client.first_message();
  for (int round = 0; round < 4; ++round) {
    auto step = server.evaluate(message, at_ms);
    if (auto* failed = std::get_if<oauthbearer_server::failure>(&step)) return failed->client_message;
    auto& ok = std::get<oauthbearer_server::step>(step);
    auto next = client.evaluate(ok.response);
    if (!next.ok()) return next.error().message;
    if (ok.complete) {
      EXPECT_TRUE(client.complete());
      return std::nullopt;
    }
    if (!next->has_value()) return "client done before the server";
    message = **next;
  }
  return "no end";
}

TEST(oauthbearer_login, a_node_authenticates_with_its_unsecured_token_and_is_refused_without_the_scope) {
  auto made = unsecured_login_token(login_options(), now_ms);
  ASSERT_TRUE(made.ok());
  struct fixed_login : oauthbearer_login {
    oauthbearer_login_token token;
    result<oauthbearer_login_token> current() override { return token; }
  };
  auto login = std::make_shared<fixed_login>();
  login->token = *made;
  sasl_client_credentials credentials;
  credentials.mechanism = "OAUTHBEARER";
  credentials.oauthbearer = login;

  auto client = sasl_client::start(credentials);
  ASSERT_TRUE(client.ok()) << client.error().message;
  oauthbearer_server accepting(make_unsecured_validator({}));
  EXPECT_EQ(exchange(*client, accepting, now_ms + 1000), std::nullopt);
  EXPECT_EQ(accepting.token().principal, "broker");

  unsecured_validator_options strict;
  strict.required_scope = {"cluster-admin"};
  auto refused_client = sasl_client::start(credentials);
  ASSERT_TRUE(refused_client.ok());
  oauthbearer_server refusing(make_unsecured_validator(strict));
  auto refusal = exchange(*refused_client, refusing, now_ms + 1000);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_NE(refusal->find("insufficient_scope"), std::string::npos) << *refusal;
  EXPECT_FALSE(refused_client->complete());
}

std::string jwt_with(const std::string& claims) {
  auto b64 = [](const std::string& text) {
    std::string out = base64_encode(bytes(text));
    for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
    while (!out.empty() && out.back() == '=') out.pop_back();
    return out;
  };
  return b64(R"({"alg":"RS256","kid":"k"})") + "." + b64(claims) + ".c2lnbmF0dXJl";
}

TEST(oauthbearer_login, retrieved_tokens_are_checked_as_kafka_s_login_validator_does) {
  const int64_t now_s = now_ms / 1000;
  auto ok = login_token_from_jwt(jwt_with(R"({"sub":"broker","iat":)" + std::to_string(now_s) + R"(,"exp":)" +
                                          std::to_string(now_s + 600) + "}"),
                                 "sub", now_ms);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->expires_at_ms, (now_s + 600) * 1000);
  EXPECT_EQ(ok->issued_at_ms, now_s * 1000);
  EXPECT_FALSE(
      login_token_from_jwt(jwt_with(R"({"exp":)" + std::to_string(now_s + 600) + "}"), "sub", now_ms).ok());
  EXPECT_FALSE(login_token_from_jwt(jwt_with(R"({"sub":"b"})"), "sub", now_ms).ok());
  EXPECT_FALSE(
      login_token_from_jwt(jwt_with(R"({"sub":"b","exp":)" + std::to_string(now_s - 1) + "}"), "sub", now_ms)
          .ok());
  EXPECT_FALSE(login_token_from_jwt("not-a-jwt", "sub", now_ms).ok());
  EXPECT_FALSE(login_token_from_jwt("a.b.c.d", "sub", now_ms).ok());
  // Another claim names the subject (sasl.oauthbearer.sub.claim.name).
  EXPECT_TRUE(
      login_token_from_jwt(jwt_with(R"({"client_id":"broker","exp":)" + std::to_string(now_s + 600) + "}"),
                           "client_id", now_ms)
          .ok());
}

// A node with a SASL_PLAINTEXT listener INTERNAL and these settings.
result<node_config> internal_listener_config(const std::vector<std::string>& overrides) {
  return node_config::load_from_string(
      "node.id: 1\nprocess.roles: broker,controller\nlisteners: INTERNAL://:9094,CONTROLLER://:9093\n"
      "listener.security.protocol.map: INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT\n"
      "controller.listener.names: CONTROLLER\ninter.broker.listener.name: INTERNAL\n"
      "controller.quorum.voters: 1@localhost:9093\nlog.dirs: /tmp/x\n",
      config_format::yaml, overrides);
}

// INTERNAL logging in with OAuthBearerLoginCallbackHandler from a file:// token endpoint.
result<node_config> file_login_config(const std::filesystem::path& token_file) {
  return internal_listener_config(
      {"listener.name.internal.oauthbearer.sasl.login.callback.handler.class="
       "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
       "listener.name.internal.oauthbearer.sasl.oauthbearer.token.endpoint.url=file://" +
           token_file.string()});
}

TEST(oauthbearer_login, a_file_token_endpoint_is_read_when_the_node_opens) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("mala-oauth-login-" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  const int64_t wall_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const std::string jwt = jwt_with(R"({"sub":"broker","exp":)" + std::to_string(wall_s + 3600) + "}");
  std::ofstream(dir / "token.jwt") << jwt << "\n";
  auto config = file_login_config(dir / "token.jwt");
  ASSERT_TRUE(config.ok()) << config.error().message;
  auto login = oauthbearer_login::open(*config, "INTERNAL", {});
  ASSERT_TRUE(login.ok()) << login.error().message;
  auto token = (*login)->current();
  ASSERT_TRUE(token.ok()) << token.error().message;
  EXPECT_EQ(token->value, jwt);  // the file's whitespace trimmed

  // A token issued long ago is not read again at once (at most once a minute while it is valid): the file
  // changing now does not change the token.
  const std::string old_jwt = jwt_with(R"({"sub":"broker","iat":)" + std::to_string(wall_s - 7200) +
                                       R"(,"exp":)" + std::to_string(wall_s + 600) + "}");
  std::ofstream(dir / "old.jwt") << old_jwt;
  auto old_config = file_login_config(dir / "old.jwt");
  ASSERT_TRUE(old_config.ok());
  auto old_login = oauthbearer_login::open(*old_config, "INTERNAL", {});
  ASSERT_TRUE(old_login.ok()) << old_login.error().message;
  std::ofstream(dir / "old.jwt", std::ios::trunc) << jwt;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ((*old_login)->current()->value, old_jwt);

  // A missing file: the node does not start.
  auto missing = file_login_config(dir / "absent.jwt");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(oauthbearer_login::open(*missing, "INTERNAL", {}).ok());
  // An endpoint without client credentials.
  auto http =
      internal_listener_config({"sasl.login.callback.handler.class=org.apache.kafka.common.security."
                                "oauthbearer.OAuthBearerLoginCallbackHandler",
                                "sasl.oauthbearer.token.endpoint.url=http://127.0.0.1:1/token"});
  ASSERT_TRUE(http.ok()) << http.error().message;
  auto no_client = oauthbearer_login::open(*http, "INTERNAL", {});
  ASSERT_FALSE(no_client.ok());
  EXPECT_NE(no_client.error().message.find("clientId"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mala::security
