// Per-listener SASL settings from a node's configuration, and what start-up refuses.
#include "mala/security/sasl_settings.h"

#include <gtest/gtest.h>

namespace mala::security {
namespace {

constexpr std::string_view base_yaml = R"(
node.id: 1
process.roles: broker,controller
listeners: PLAINTEXT://:9092,SASL_PLAINTEXT://:9094,CONTROLLER://:9093
listener.security.protocol.map: PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names: CONTROLLER
controller.quorum.voters: 1@localhost:9093
log.dirs: /tmp/mala-test
)";

constexpr const char* plain_jaas =
    "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
    "PlainLoginModule "
    "required user_alice=\"alice-secret\";";

result<sasl_settings> build(const std::vector<std::string>& overrides, std::string_view yaml = base_yaml) {
  auto config = node_config::load_from_string(yaml, config_format::yaml, overrides);
  EXPECT_TRUE(config.ok()) << config.error().message;
  if (!config.ok()) return config.error();
  return build_sasl_settings(*config);
}

std::string refusal(const std::vector<std::string>& overrides) {
  auto s = build(overrides);
  EXPECT_FALSE(s.ok());
  return s.ok() ? "" : s.error().message;
}

TEST(sasl_settings, listener_mechanisms_and_plain_users) {
  auto s = build({"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256", plain_jaas});
  ASSERT_TRUE(s.ok()) << s.error().message;
  const auto* l = s->find("SASL_PLAINTEXT");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->enabled_mechanisms, (std::vector<std::string>{"PLAIN", "SCRAM-SHA-256"}));
  EXPECT_EQ(l->plain_users.at("alice"), "alice-secret");
  EXPECT_EQ(s->find("PLAINTEXT"), nullptr);
  EXPECT_EQ(s->max_receive_size, 524288);
  // The listener's own list wins; SCRAM needs no JAAS users.
  auto own = build({"sasl.enabled.mechanisms=PLAIN",
                    "listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-512"});
  ASSERT_TRUE(own.ok()) << own.error().message;
  EXPECT_EQ(own->find("SASL_PLAINTEXT")->enabled_mechanisms, (std::vector<std::string>{"SCRAM-SHA-512"}));
  // Fallbacks for the JAAS configuration: the listener's, then sasl.jaas.config.
  auto global = build({"sasl.enabled.mechanisms=PLAIN",
                       "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                       "user_bob=\"b\";"});
  ASSERT_TRUE(global.ok()) << global.error().message;
  EXPECT_EQ(global->find("SASL_PLAINTEXT")->plain_users.at("bob"), "b");
}

TEST(sasl_settings, refuses_what_it_cannot_serve) {
  // Kafka's default GSSAPI on a SASL listener.
  EXPECT_NE(refusal({}).find("GSSAPI"), std::string::npos);
  EXPECT_NE(refusal({"sasl.enabled.mechanisms=PLAIN,OAUTHBEARER", plain_jaas}).find("OAUTHBEARER"),
            std::string::npos);
  EXPECT_NE(refusal({"listener.name.sasl_plaintext.sasl.enabled.mechanisms="}).find("no SASL mechanism"),
            std::string::npos);
  EXPECT_NE(refusal({"sasl.enabled.mechanisms=PLAIN"}).find("plain.sasl.jaas.config"), std::string::npos);
  const auto bad_jaas = refusal({"sasl.enabled.mechanisms=PLAIN",
                                 "listener.name.sasl_plaintext.plain.sasl.jaas.config=Module required "
                                 "user_a=\"secret-value"});
  EXPECT_NE(bad_jaas.find("JAAS"), std::string::npos);
  EXPECT_EQ(bad_jaas.find("secret-value"), std::string::npos);
  // Inter-broker SASL: the mechanism must be enabled on the inter-broker listener.
  EXPECT_NE(refusal({"sasl.enabled.mechanisms=SCRAM-SHA-256", "inter.broker.listener.name=SASL_PLAINTEXT"})
                .find("sasl.mechanism.inter.broker.protocol"),
            std::string::npos);
  auto inter_broker =
      build({"sasl.enabled.mechanisms=SCRAM-SHA-256", "inter.broker.listener.name=SASL_PLAINTEXT",
             "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256"});
  EXPECT_TRUE(inter_broker.ok()) << inter_broker.error().message;
}

TEST(sasl_settings, controller_mechanism_must_be_enabled_on_a_sasl_controller_listener) {
  const std::vector<std::string> sasl_controller = {
      "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_"
      "PLAINTEXT",
      "sasl.enabled.mechanisms=PLAIN", plain_jaas,
      "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
      "PlainLoginModule "
      "required username=\"ctl\" password=\"ctl-secret\" user_ctl=\"ctl-secret\";"};
  // Kafka's default GSSAPI is not enabled there.
  EXPECT_NE(refusal(sasl_controller).find("sasl.mechanism.controller.protocol"), std::string::npos);
  auto with_plain = sasl_controller;
  with_plain.push_back("sasl.mechanism.controller.protocol=PLAIN");
  auto s = build(with_plain);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_NE(s->find("CONTROLLER"), nullptr);
  EXPECT_EQ(s->find("CONTROLLER")->plain_users.at("ctl"), "ctl-secret");
}

TEST(sasl_settings, gssapi_default_is_fine_without_sasl_listeners) {
  constexpr std::string_view plaintext_only = R"(
node.id: 1
process.roles: broker,controller
listeners: PLAINTEXT://:9092,CONTROLLER://:9093
controller.listener.names: CONTROLLER
controller.quorum.voters: 1@localhost:9093
log.dirs: /tmp/mala-test
)";
  auto s = build({}, plaintext_only);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(s->listeners.empty());
}

}  // namespace
}  // namespace mala::security
