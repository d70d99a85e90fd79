// The client side of SASL between nodes: RFC 7677's SCRAM-SHA-256 example from the client's side, exchanges
// against Mala's own scram_server, every refusal of a bad server (Kafka's ScramSaslClient checks), PLAIN's
// message, and the credentials read from a listener's JAAS configuration.
#include "mala/security/sasl_client.h"

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

constexpr const char* rfc_server_first =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";

sasl_client rfc_client(std::string password = "pencil") {
  auto c = sasl_client::start({"SCRAM-SHA-256", "user", std::move(password)}, "rOprNGfwEbeRWgbNEkqO");
  EXPECT_TRUE(c.ok());
  return std::move(*c);
}

TEST(sasl_client, rfc7677_exchange_from_the_client_side) {
  auto client = rfc_client();
  EXPECT_EQ(text(client.first_message()), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
  auto final_message = client.evaluate(bytes(rfc_server_first));
  ASSERT_TRUE(final_message.ok()) << final_message.error().message;
  ASSERT_TRUE(final_message->has_value());
  EXPECT_EQ(text(**final_message),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+"
            "Ute9ytag9zjfMHgsqmmiz7AndVQ=");
  EXPECT_FALSE(client.complete());
  auto done = client.evaluate(bytes("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="));
  ASSERT_TRUE(done.ok()) << done.error().message;
  EXPECT_FALSE(done->has_value());
  EXPECT_TRUE(client.complete());
  EXPECT_FALSE(client.evaluate(bytes("v=x")).ok());  // nothing after the end
}

// Runs a whole exchange between a client and Mala's server; returns the server's verdict and the client's.
struct outcome {
  bool server_ok = false;
  bool client_ok = false;
};

outcome exchange(scram_mechanism m, const std::string& user, const std::string& stored_password,
                 const std::string& client_password) {
  const auto credential = scram_credential_from_password(m, stored_password, 4096);
  scram_server server(m, [&](const std::string& u) -> std::optional<scram_credential> {
    if (u != user) return std::nullopt;
    return credential;
  });
  auto client = sasl_client::start({std::string(scram_mechanism_name(m)), user, client_password});
  EXPECT_TRUE(client.ok());
  auto message = client->first_message();
  outcome out;
  while (true) {
    auto step = server.evaluate(message);
    if (std::holds_alternative<scram_server::failure>(step)) return out;
    const auto& s = std::get<scram_server::step>(step);
    out.server_ok = s.complete;
    auto next = client->evaluate(s.response);
    if (!next.ok()) return out;
    if (!next->has_value()) {
      out.client_ok = client->complete();
      return out;
    }
    message = std::move(**next);
  }
}

TEST(sasl_client, exchanges_with_mala_s_server) {
  auto ok512 = exchange(scram_mechanism::sha512, "broker", "s3cret", "s3cret");
  EXPECT_TRUE(ok512.server_ok);
  EXPECT_TRUE(ok512.client_ok);
  // A user name with ',' and '=' travels as =2C / =3D.
  auto odd = exchange(scram_mechanism::sha256, "a,b=c", "pw", "pw");
  EXPECT_TRUE(odd.server_ok && odd.client_ok);
  auto wrong = exchange(scram_mechanism::sha256, "broker", "s3cret", "guess");
  EXPECT_FALSE(wrong.server_ok);
  EXPECT_FALSE(wrong.client_ok);
}

TEST(sasl_client, refuses_a_server_that_does_not_follow_scram) {
  {  // The server's nonce must extend the client's.
    auto client = rfc_client();
    client.first_message();
    auto r = client.evaluate(bytes("r=someoneElse123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, error_code::sasl_authentication_failed);
  }
  {  // ... and add to it.
    auto client = rfc_client();
    client.first_message();
    EXPECT_FALSE(client.evaluate(bytes("r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")).ok());
  }
  {  // Fewer than 4096 iterations.
    auto client = rfc_client();
    client.first_message();
    auto r = client.evaluate(bytes("r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095"));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("4095"), std::string::npos);
  }
  for (const char* malformed : {"", "r=,s=,i=", "s=abc,r=def,i=4096", "r=rOprNGfwEbeRWgbNEkqOx,s=!!,i=4096",
                                "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999999"}) {
    auto client = rfc_client();
    client.first_message();
    EXPECT_FALSE(client.evaluate(bytes(malformed)).ok()) << malformed;
  }
  {  // A server that does not know the password cannot sign: refused, and the server's error is reported.
    auto client = rfc_client();
    client.first_message();
    ASSERT_TRUE(client.evaluate(bytes(rfc_server_first)).ok());
    auto forged = client.evaluate(bytes("v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="));
    ASSERT_FALSE(forged.ok());
    EXPECT_FALSE(client.complete());
  }
  {
    auto client = rfc_client();
    client.first_message();
    ASSERT_TRUE(client.evaluate(bytes(rfc_server_first)).ok());
    auto refused = client.evaluate(bytes("e=invalid-proof"));
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("invalid-proof"), std::string::npos);
  }
  {  // A server message before the client spoke.
    auto client = rfc_client();
    EXPECT_FALSE(client.evaluate(bytes(rfc_server_first)).ok());
  }
}

TEST(sasl_client, plain_sends_one_message_and_completes_on_an_empty_answer) {
  auto client = sasl_client::start({"PLAIN", "broker", "pw"});
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(text(client->first_message()), std::string("\0broker\0pw", 10));
  auto done = client->evaluate({});
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(done->has_value());
  EXPECT_TRUE(client->complete());
  EXPECT_FALSE(sasl_client::start({"GSSAPI", "a", "b"}).ok());
  EXPECT_FALSE(sasl_client::start({"OAUTHBEARER", "a", "b"}).ok());
}

constexpr std::string_view node_yaml = R"(
node.id: 1
process.roles: broker,controller
listeners: SASL_PLAINTEXT://:9094,CONTROLLER://:9093
listener.security.protocol.map: SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name: SASL_PLAINTEXT
controller.listener.names: CONTROLLER
controller.quorum.voters: 1@localhost:9093
log.dirs: /tmp/mala-test
)";

result<sasl_client_credentials> credentials(const std::vector<std::string>& overrides,
                                            const std::string& mechanism) {
  auto config = node_config::load_from_string(node_yaml, config_format::yaml, overrides);
  EXPECT_TRUE(config.ok()) << config.error().message;
  if (!config.ok()) return config.error();
  return node_sasl_credentials(*config, "SASL_PLAINTEXT", mechanism);
}

TEST(sasl_client, credentials_come_from_the_listener_s_login_module) {
  // The mechanism's own JAAS configuration on the listener first.
  auto scram =
      credentials({"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config="
                   "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\" "
                   "password=\"broker-secret\";",
                   "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                   "username=\"other\" password=\"x\";"},
                  "SCRAM-SHA-512");
  ASSERT_TRUE(scram.ok()) << scram.error().message;
  EXPECT_EQ(scram->username, "broker");
  EXPECT_EQ(scram->password, "broker-secret");
  EXPECT_EQ(scram->mechanism, "SCRAM-SHA-512");
  // Then the global one; PLAIN reads the PlainLoginModule (whose user_ options are the server's users).
  auto plain =
      credentials({"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                   "username=\"admin\" password=\"admin-secret\" user_admin=\"admin-secret\";"},
                  "PLAIN");
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->username, "admin");
  // Refusals name the key and never the password.
  auto none = credentials({}, "PLAIN");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("listener.name.sasl_plaintext.plain.sasl.jaas.config"),
            std::string::npos);
  auto no_password = credentials({"listener.name.sasl_plaintext.plain.sasl.jaas.config="
                                  "org.apache.kafka.common.security.plain.PlainLoginModule required "
                                  "username=\"admin\" user_admin=\"hidden-secret\";"},
                                 "PLAIN");
  ASSERT_FALSE(no_password.ok());
  EXPECT_EQ(no_password.error().message.find("hidden-secret"), std::string::npos);
  auto wrong_module = credentials({"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                                   "required username=\"a\" password=\"b\";"},
                                  "SCRAM-SHA-256");
  EXPECT_FALSE(wrong_module.ok());
}

}  // namespace
}  // namespace mala::security
