// SASL/OAUTHBEARER's server side: the client initial response as Kafka's OAuthBearerClientInitialResponse
// parses it, the unsecured validator's checks (OAuthBearerUnsecuredJws + OAuthBearerValidationUtils), and
// the exchange with its JSON challenge and %x01 acknowledgement.
#include "mala/security/oauthbearer.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "mala/security/scram.h"

namespace mala::security {
namespace {

std::span<const uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string b64url(const std::string& s) {
  std::string out = base64_encode(bytes(s));
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (auto& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}

std::string unsecured(const std::string& claims, const std::string& header = R"({"alg":"none"})") {
  return b64url(header) + "." + b64url(claims) + ".";
}

std::string initial(const std::string& token, const std::string& authzid = "", const std::string& ext = "") {
  return "n," + (authzid.empty() ? "" : "a=" + authzid) + ",\x01" + "auth=Bearer " + token + "\x01" + ext +
         "\x01";
}

constexpr int64_t now_ms = 1'700'000'000'000;  // the claims below are in seconds around it

TEST(oauthbearer, parses_the_client_initial_response) {
  auto m = parse_oauthbearer_client_message(bytes(initial("abc.def.", "alice", "traceId=42\x01")));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->token, "abc.def.");
  EXPECT_EQ(m->authorization_id, "alice");
  EXPECT_EQ(m->extensions.at("traceId"), "42");
  // librdkafka's and Java's form without an authzid; the scheme in any case.
  auto plain =
      parse_oauthbearer_client_message(bytes("n,,\x01"
                                             "auth=bearer x.y.z\x01\x01"));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->token, "x.y.z");
  for (const std::string& bad : {std::string(""), std::string("n,,"),
                                 std::string("y,,\x01"
                                             "auth=Bearer t\x01\x01"),
                                 std::string("n,,\x01"
                                             "auth=Bearer t\x01"),  // no final %x01
                                 std::string("n,,\x01"
                                             "auth=Bearer t\x01\x01x"),  // bytes after it
                                 std::string("n,,\x01"
                                             "auth=Basic t\x01\x01"),  // not Bearer
                                 std::string("n,,\x01"
                                             "auth=Bearer\x01\x01"),  // no token
                                 std::string("n,,\x01"
                                             "auth=Bearer a b\x01\x01"),  // space in the token
                                 std::string("n,,\x01"
                                             "x1=2\x01\x01"),  // bad key, no auth
                                 std::string("n,,\x01"
                                             "k=v\x01\x01"),  // no auth
                                 std::string("n,a=al,ice,\x01"
                                             "auth=Bearer t\x01\x01"),
                                 std::string("n,a=a=b,\x01"
                                             "auth=Bearer t\x01\x01")}) {
    EXPECT_FALSE(parse_oauthbearer_client_message(bytes(bad)).ok()) << bad;
  }
}

TEST(oauthbearer, base64url_takes_both_alphabets_with_or_without_padding) {
  EXPECT_EQ(base64url_decode("-_8"), (std::vector<uint8_t>{0xFB, 0xFF}));
  EXPECT_EQ(base64url_decode("+/8="), (std::vector<uint8_t>{0xFB, 0xFF}));
  EXPECT_FALSE(base64url_decode("a"));
  EXPECT_FALSE(base64url_decode("ab!c"));
}

std::variant<oauthbearer_token, oauthbearer_refusal> check(const std::string& token,
                                                           unsecured_validator_options options = {}) {
  return validate_unsecured_jws(token, options, now_ms);
}

std::string reason(const std::variant<oauthbearer_token, oauthbearer_refusal>& v) {
  return std::holds_alternative<oauthbearer_refusal>(v) ? std::get<oauthbearer_refusal>(v).reason
                                                        : "accepted";
}

TEST(oauthbearer, unsecured_validator_accepts_a_well_formed_token) {
  auto v = check(unsecured(R"({"sub":"alice","iat":1699999990,"exp":1700000100.5,"scope":["a","b "]})"));
  ASSERT_TRUE(std::holds_alternative<oauthbearer_token>(v)) << reason(v);
  const auto& t = std::get<oauthbearer_token>(v);
  EXPECT_EQ(t.principal, "alice");
  EXPECT_EQ(t.lifetime_ms, 1'700'000'100'500);
  EXPECT_EQ(t.start_ms, 1'699'999'990'000);
  EXPECT_EQ(t.scope, (std::set<std::string>{"a", "b"}));
}

TEST(oauthbearer, unsecured_validator_refuses_as_kafka_does) {
  const std::string ok_claims = R"({"sub":"alice","exp":1700000100})";
  EXPECT_EQ(reason(check(unsecured(ok_claims, R"({"alg":"RS256"})"))),
            "Unsecured JWS must have 'none' for an algorithm");
  EXPECT_EQ(reason(check(unsecured(ok_claims, R"({"typ":"JWT"})"))),
            "Unsecured JWS must have 'none' for an algorithm");
  EXPECT_EQ(reason(check(unsecured(ok_claims) + "c2ln")),
            "Unsecured JWS must not contain a digital signature");
  EXPECT_NE(reason(check(b64url(R"({"alg":"none"})") + "..")).find(".."), std::string::npos);
  EXPECT_NE(reason(check("only.two")).find("3 dot-separated"), std::string::npos);
  EXPECT_NE(reason(check("a.b.c.d")).find("3 dot-separated"), std::string::npos);
  EXPECT_NE(reason(check("!!.??.")).find("malformed"), std::string::npos);
  EXPECT_NE(reason(check(b64url(R"({"alg":"none"})") + "." + b64url("[1]") + ".")).find("malformed"),
            std::string::npos);
  EXPECT_EQ(reason(check(unsecured(R"({"sub":"alice"})"))), "No expiration time in JWT");
  EXPECT_EQ(reason(check(unsecured(R"({"sub":"alice","exp":"soon"})"))),
            "The 'exp' claim was not of type Number");
  EXPECT_EQ(reason(check(unsecured(R"({"exp":1700000100})"))), "No principal name in JWT claim: sub");
  EXPECT_EQ(reason(check(unsecured(R"({"sub":"  ","exp":1700000100})"))),
            "No principal name in JWT claim: sub");
  EXPECT_EQ(reason(check(unsecured(R"({"sub":7,"exp":1700000100})"))),
            "The 'sub' claim was not of type String");
  // Expired (exp at or before now), issued in the future, exp not after iat.
  EXPECT_NE(reason(check(unsecured(R"({"sub":"a","exp":1700000000})"))).find("Expiration"),
            std::string::npos);
  EXPECT_NE(reason(check(unsecured(R"({"sub":"a","exp":1700000100,"iat":1700000050})"))).find("Issued At"),
            std::string::npos);
  EXPECT_NE(reason(check(unsecured(R"({"sub":"a","exp":1700000100,"iat":"x"})"))).find("iat"),
            std::string::npos);
  // The clock skew allowance applies to both ends.
  unsecured_validator_options skewed;
  skewed.allowable_clock_skew_ms = 60'000;
  EXPECT_EQ(reason(check(unsecured(R"({"sub":"a","exp":1699999990,"iat":1699999980})"), skewed)), "accepted");
  EXPECT_EQ(reason(check(unsecured(R"({"sub":"a","exp":1700000100,"iat":1700000050})"), skewed)), "accepted");
  EXPECT_NE(
      reason(check(unsecured(R"({"sub":"a","exp":1700000040,"iat":1700000050})"), skewed)).find("not after"),
      std::string::npos);
}

TEST(oauthbearer, claim_names_and_required_scope_come_from_the_jaas_options) {
  auto options = unsecured_validator_options_from({{"unsecuredValidatorPrincipalClaimName", " user "},
                                                   {"unsecuredValidatorScopeClaimName", "scp"},
                                                   {"unsecuredValidatorRequiredScope", "read  write"},
                                                   {"unsecuredValidatorAllowableClockSkewMs", "100"}});
  ASSERT_TRUE(options.ok()) << options.error().message;
  EXPECT_EQ(options->principal_claim, "user");
  EXPECT_EQ(options->required_scope, (std::vector<std::string>{"read", "write"}));
  EXPECT_EQ(options->allowable_clock_skew_ms, 100);
  auto ok = check(unsecured(R"({"user":"bob","exp":1700000100,"scp":"read write"})"), *options);
  // A scope string is one element (Kafka's calculateScope), so "read write" does not hold "read".
  ASSERT_TRUE(std::holds_alternative<oauthbearer_refusal>(ok));
  EXPECT_EQ(std::get<oauthbearer_refusal>(ok).missing_scope, "[read, write]");
  auto listed = check(unsecured(R"({"user":"bob","exp":1700000100,"scp":["write","read"]})"), *options);
  ASSERT_TRUE(std::holds_alternative<oauthbearer_token>(listed)) << reason(listed);
  EXPECT_EQ(std::get<oauthbearer_token>(listed).principal, "bob");
  EXPECT_FALSE(unsecured_validator_options_from({{"unsecuredValidatorAllowableClockSkewMs", "-1"}}).ok());
  EXPECT_FALSE(unsecured_validator_options_from({{"unsecuredValidatorAllowableClockSkewMs", "x"}}).ok());
}

TEST(oauthbearer, exchange_with_challenge_and_acknowledgement) {
  {
    oauthbearer_server server(make_unsecured_validator({}));
    auto ok = server.evaluate(bytes(initial(unsecured(R"({"sub":"alice","exp":1700000100})"))), now_ms);
    ASSERT_TRUE(std::holds_alternative<oauthbearer_server::step>(ok));
    EXPECT_TRUE(std::get<oauthbearer_server::step>(ok).complete);
    EXPECT_TRUE(std::get<oauthbearer_server::step>(ok).response.empty());
    EXPECT_EQ(server.token().principal, "alice");
    EXPECT_EQ(server.token().lifetime_ms, 1'700'000'100'000);
  }
  {  // A refused token: the JSON challenge first, then the failure once the client sends %x01.
    oauthbearer_server server(make_unsecured_validator({}));
    auto challenge = server.evaluate(bytes(initial(unsecured(R"({"sub":"alice","exp":1})"))), now_ms);
    ASSERT_TRUE(std::holds_alternative<oauthbearer_server::step>(challenge));
    const auto& step = std::get<oauthbearer_server::step>(challenge);
    EXPECT_FALSE(step.complete);
    EXPECT_EQ(std::string(step.response.begin(), step.response.end()), R"({"status":"invalid_token"})");
    auto failed = server.evaluate(bytes("\x01"), now_ms);
    ASSERT_TRUE(std::holds_alternative<oauthbearer_server::failure>(failed));
    EXPECT_EQ(std::get<oauthbearer_server::failure>(failed).client_message, R"({"status":"invalid_token"})");
  }
  {  // Missing scope: insufficient_scope with the required scope.
    unsecured_validator_options options;
    options.required_scope = {"admin"};
    oauthbearer_server server(make_unsecured_validator(options));
    auto challenge = server.evaluate(bytes(initial(unsecured(R"({"sub":"a","exp":1700000100})"))), now_ms);
    const auto& step = std::get<oauthbearer_server::step>(challenge);
    EXPECT_EQ(std::string(step.response.begin(), step.response.end()),
              R"({"status":"insufficient_scope", "scope":"[admin]"})");
  }
  {  // An authorization id other than the token's principal.
    oauthbearer_server server(make_unsecured_validator({}));
    auto refused =
        server.evaluate(bytes(initial(unsecured(R"({"sub":"alice","exp":1700000100})"), "bob")), now_ms);
    ASSERT_TRUE(std::holds_alternative<oauthbearer_server::failure>(refused));
    EXPECT_NE(std::get<oauthbearer_server::failure>(refused).client_message.find("authorization id (bob)"),
              std::string::npos);
  }
  {  // A malformed message fails at once; a lone %x01 with no challenge pending is malformed.
    oauthbearer_server server(make_unsecured_validator({}));
    EXPECT_TRUE(std::holds_alternative<oauthbearer_server::failure>(server.evaluate(bytes("\x01"), now_ms)));
  }
}

}  // namespace
}  // namespace mala::security
