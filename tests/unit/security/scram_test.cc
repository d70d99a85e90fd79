// SCRAM messages, key derivation and the server exchange: RFC 7677's SCRAM-SHA-256 example end to end, a
// SCRAM-SHA-512 exchange against a client computed here, and every refusal Kafka's ScramSaslServer makes.
#include "mala/security/scram.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

namespace mala::security {
namespace {

std::span<const uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
std::string text(const std::vector<uint8_t>& v) {
  return std::string(v.begin(), v.end());
}

// RFC 7677 section 3: user "user", password "pencil".
constexpr const char* rfc_client_first = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
constexpr const char* rfc_server_nonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
constexpr const char* rfc_server_first =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
constexpr const char* rfc_client_final =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+"
    "Ute9ytag9zjfMHgsqmmiz7AndVQ=";
constexpr const char* rfc_server_final = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

scram_credential rfc_credential() {
  const auto salt = *base64_decode("W22ZaJ0SNY7soEsUEjb6gQ==");
  const auto salted = scram_salted_password(scram_mechanism::sha256, "pencil", salt, 4096);
  return scram_credential_from_salted(scram_mechanism::sha256, salt, salted, 4096);
}

scram_server rfc_server(std::optional<scram_credential> credential) {
  return scram_server(
      scram_mechanism::sha256,
      [credential](const std::string& user) -> std::optional<scram_credential> {
        if (user != "user") return std::nullopt;
        return credential;
      },
      rfc_server_nonce);
}

TEST(scram, rfc7677_exchange) {
  auto server = rfc_server(rfc_credential());
  auto first = server.evaluate(bytes(rfc_client_first));
  ASSERT_TRUE(std::holds_alternative<scram_server::step>(first));
  EXPECT_EQ(text(std::get<scram_server::step>(first).response), rfc_server_first);
  EXPECT_FALSE(std::get<scram_server::step>(first).complete);
  auto final_step = server.evaluate(bytes(rfc_client_final));
  ASSERT_TRUE(std::holds_alternative<scram_server::step>(final_step));
  EXPECT_EQ(text(std::get<scram_server::step>(final_step).response), rfc_server_final);
  EXPECT_TRUE(std::get<scram_server::step>(final_step).complete);
  EXPECT_EQ(server.authorized_user(), "user");
  // Nothing more after the exchange.
  EXPECT_TRUE(std::holds_alternative<scram_server::failure>(server.evaluate(bytes(rfc_client_final))));
}

TEST(scram, wrong_proof_and_nonce_fail_with_the_generic_message) {
  {
    auto server = rfc_server(rfc_credential());
    server.evaluate(bytes(rfc_client_first));
    std::string bad = rfc_client_final;
    bad[bad.size() - 3] = bad[bad.size() - 3] == 'A' ? 'B' : 'A';
    auto out = server.evaluate(bytes(bad));
    ASSERT_TRUE(std::holds_alternative<scram_server::failure>(out));
    EXPECT_FALSE(std::get<scram_server::failure>(out).client_message);
  }
  {
    auto server = rfc_server(rfc_credential());
    server.evaluate(bytes(rfc_client_first));
    std::string bad = rfc_client_final;
    bad.replace(bad.find("k0"), 2, "k1");  // nonce no longer the server's
    EXPECT_TRUE(std::holds_alternative<scram_server::failure>(server.evaluate(bytes(bad))));
  }
  {
    // Channel binding must repeat the gs2 header "n,," ("biws"); "y,," is "eSws".
    auto server = rfc_server(rfc_credential());
    server.evaluate(bytes(rfc_client_first));
    std::string bad = rfc_client_final;
    bad.replace(2, 4, "eSws");
    EXPECT_TRUE(std::holds_alternative<scram_server::failure>(server.evaluate(bytes(bad))));
  }
}

TEST(scram, unknown_user_authzid_iterations_and_tokens_are_refused) {
  {
    auto server = rfc_server(std::nullopt);
    auto out = server.evaluate(bytes(rfc_client_first));
    ASSERT_TRUE(std::holds_alternative<scram_server::failure>(out));
    EXPECT_FALSE(std::get<scram_server::failure>(out).client_message);
  }
  {
    auto server = rfc_server(rfc_credential());
    auto out = server.evaluate(bytes(std::string("n,a=admin,n=user,r=abc")));
    ASSERT_TRUE(std::holds_alternative<scram_server::failure>(out));
    EXPECT_EQ(std::get<scram_server::failure>(out).client_message,
              "Authentication failed: Client requested an authorization id that is different from username");
  }
  {
    auto server = rfc_server(rfc_credential());
    EXPECT_TRUE(std::holds_alternative<scram_server::step>(
        server.evaluate(bytes(std::string("n,a=user,n=user,r=abc")))));
  }
  {
    auto weak = rfc_credential();
    weak.iterations = 4095;
    auto server = rfc_server(weak);
    EXPECT_TRUE(std::holds_alternative<scram_server::failure>(server.evaluate(bytes(rfc_client_first))));
  }
  {
    auto server = rfc_server(rfc_credential());
    EXPECT_TRUE(std::holds_alternative<scram_server::failure>(
        server.evaluate(bytes(std::string("n,,n=user,r=abc,tokenauth=true")))));
  }
  {
    // Other extensions are ignored, as Kafka does.
    auto server = rfc_server(rfc_credential());
    EXPECT_TRUE(std::holds_alternative<scram_server::step>(
        server.evaluate(bytes(std::string("n,,n=user,r=abc,foo=bar")))));
  }
}

TEST(scram, sha512_exchange_against_a_client) {
  const auto credential = scram_credential_from_password(scram_mechanism::sha512, "s3cret", 8192);
  scram_server server(scram_mechanism::sha512,
                      [&](const std::string& user) -> std::optional<scram_credential> {
                        if (user == "bob,=x") return credential;
                        return std::nullopt;
                      });
  const std::string client_first_bare = "n=bob=2C=3Dx,r=clientnonce";
  auto first = server.evaluate(bytes("y,," + client_first_bare));
  ASSERT_TRUE(std::holds_alternative<scram_server::step>(first));
  const std::string server_first = text(std::get<scram_server::step>(first).response);
  // The client's side of RFC 5802.
  const auto nonce = server_first.substr(2, server_first.find(',') - 2);
  EXPECT_TRUE(nonce.starts_with("clientnonce"));
  EXPECT_NE(server_first.find(",i=8192"), std::string::npos);
  const auto salted = scram_salted_password(scram_mechanism::sha512, "s3cret", credential.salt, 8192);
  const auto client_key = scram_hmac(scram_mechanism::sha512, salted, bytes("Client Key"));
  const auto stored_key = scram_hash(scram_mechanism::sha512, client_key);
  const std::string without_proof = "c=eSws,r=" + nonce;
  const std::string auth_message = client_first_bare + "," + server_first + "," + without_proof;
  auto proof = scram_hmac(scram_mechanism::sha512, stored_key, bytes(auth_message));
  for (size_t i = 0; i < proof.size(); ++i) proof[i] ^= client_key[i];
  auto final_step = server.evaluate(bytes(without_proof + ",p=" + base64_encode(proof)));
  ASSERT_TRUE(std::holds_alternative<scram_server::step>(final_step));
  const auto server_key = scram_hmac(scram_mechanism::sha512, salted, bytes("Server Key"));
  EXPECT_EQ(text(std::get<scram_server::step>(final_step).response),
            "v=" + base64_encode(scram_hmac(scram_mechanism::sha512, server_key, bytes(auth_message))));
  EXPECT_EQ(server.authorized_user(), "bob,=x");
}

TEST(scram, client_first_parser) {
  auto ok = parse_scram_client_first("n,a=al=2Cice,n=al=3Dice,r=n0nce,ext=v1,other=v2");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->gs2_header, "n,a=al=2Cice,");
  EXPECT_EQ(ok->authorization_id, "al,ice");
  EXPECT_EQ(ok->username, "al=ice");
  EXPECT_EQ(ok->nonce, "n0nce");
  ASSERT_EQ(ok->extensions.size(), 2u);
  EXPECT_EQ(ok->extensions[1].first, "other");
  EXPECT_EQ(ok->bare, "n=al=3Dice,r=n0nce,ext=v1,other=v2");
  for (const char* bad : {"", "n", "n,", "p=tls-unique,,n=a,r=b", "x,,n=a,r=b", "n,,n=a", "n,,r=b,n=a",
                          "n,,n=a,r=", "n,,n=,r=b", "n,,n=a=41,r=b", "n,,n=a,r=b,", "n,,n=a,r=b,1x=y",
                          "n,,m=ext,n=a,r=b", "n,b=x,n=a,r=b", "n,,n=a,r=b c"}) {
    EXPECT_FALSE(parse_scram_client_first(bad).ok()) << bad;
  }
}

TEST(scram, client_final_parser) {
  auto ok = parse_scram_client_final("c=biws,r=abc,ext=1,p=AAEC");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(text(ok->channel_binding), "n,,");
  EXPECT_EQ(ok->nonce, "abc");
  EXPECT_EQ(ok->proof, (std::vector<uint8_t>{0, 1, 2}));
  EXPECT_EQ(ok->without_proof, "c=biws,r=abc,ext=1");
  for (const char* bad :
       {"", "c=biws,r=abc", "c=biws,p=AAEC", "r=abc,c=biws,p=AAEC", "c=bi,r=abc,p=AAEC",
        "c=biws,r=abc,p=", "c=biws,r=abc,p=A===", "c=biws,r=,p=AAEC", "c=biws,r=a,x,p=AAEC"}) {
    EXPECT_FALSE(parse_scram_client_final(bad).ok()) << bad;
  }
}

TEST(scram, formatters_and_base64) {
  const std::vector<uint8_t> salt{0xff, 0x00, 0x7f};
  EXPECT_EQ(format_scram_server_first("abc", salt, 4096), "r=abc,s=/wB/,i=4096");
  EXPECT_EQ(format_scram_server_final(salt), "v=/wB/");
  for (size_t n = 0; n < 10; ++n) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 37 + 1);
    EXPECT_EQ(base64_decode(base64_encode(v)), v);
  }
  EXPECT_FALSE(base64_decode("AA=A"));
  EXPECT_FALSE(base64_decode("A"));
  EXPECT_FALSE(base64_decode("AA*A"));
  EXPECT_EQ(scram_username_from_saslname("a=2Cb=3Dc"), "a,b=c");
  EXPECT_FALSE(scram_username_from_saslname("a=2"));
  EXPECT_FALSE(scram_username_from_saslname("a=41"));
}

TEST(scram, mechanism_names_and_nonces) {
  EXPECT_EQ(scram_mechanism_from_name("SCRAM-SHA-256"), scram_mechanism::sha256);
  EXPECT_EQ(scram_mechanism_from_name("SCRAM-SHA-512"), scram_mechanism::sha512);
  EXPECT_EQ(scram_mechanism_from_name("scram-sha-256"), scram_mechanism::unknown);
  EXPECT_EQ(scram_mechanism_from_type(2), scram_mechanism::sha512);
  EXPECT_EQ(scram_mechanism_from_type(3), scram_mechanism::unknown);
  const auto a = scram_random_nonce();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, scram_random_nonce());
}

}  // namespace
}  // namespace mala::security
