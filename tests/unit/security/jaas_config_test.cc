// The JAAS configuration parser (Kafka's sasl.jaas.config syntax) and the PlainLoginModule users read from
// it.
#include "mala/security/jaas_config.h"

#include <gtest/gtest.h>

#include "mala/security/sasl_settings.h"

namespace mala::security {
namespace {

TEST(jaas_config, parses_modules_options_quotes_and_escapes) {
  auto parsed = parse_jaas_config(
      "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
      "  username=\"admin\" password='admin-secret'\n"
      "  user_alice=\"a \\\"quoted\\\" \\\\ pass;word\" user_bob=plainword /* comment */ "
      "user_oct=\"\\101\\tb\";\n"
      "// a second module\n"
      "org.apache.kafka.common.security.scram.ScramLoginModule OPTIONAL;");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  ASSERT_EQ(parsed->size(), 2u);
  const auto& plain = (*parsed)[0];
  EXPECT_EQ(plain.class_name, plain_login_module);
  EXPECT_EQ(plain.flag, "required");
  EXPECT_EQ(plain.options.at("username"), "admin");
  EXPECT_EQ(plain.options.at("password"), "admin-secret");
  EXPECT_EQ(plain.options.at("user_alice"), "a \"quoted\" \\ pass;word");
  EXPECT_EQ(plain.options.at("user_bob"), "plainword");
  EXPECT_EQ(plain.options.at("user_oct"), "A\tb");
  EXPECT_EQ((*parsed)[1].class_name, scram_login_module);
  EXPECT_EQ((*parsed)[1].flag, "optional");
  EXPECT_TRUE((*parsed)[1].options.empty());
}

TEST(jaas_config, refuses_bad_syntax_without_echoing_secrets) {
  for (const char* bad :
       {"", "   ", "Module", "Module required", "Module mandatory;", "Module required user_a;",
        "Module required user_a=;", "Module required user_a=\"unterminated;", "Module required =x;",
        "Module required a=b /* open", "; Module required;", "Module required user_a=\"x\nsecret\";"}) {
    auto parsed = parse_jaas_config(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.error().code, error_code::invalid_config);
    EXPECT_EQ(parsed.error().message.find("secret"), std::string::npos);
  }
}

TEST(jaas_config, plain_users) {
  auto users = plain_users_from_jaas(
      "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"pw\" "
      "user_admin=\"pw\" user_alice=\"alice-secret\" user_=\"ignored\";");
  ASSERT_TRUE(users.ok());
  EXPECT_EQ(users->size(), 2u);
  EXPECT_EQ(users->at("alice"), "alice-secret");
  EXPECT_FALSE(
      plain_users_from_jaas("org.apache.kafka.common.security.scram.ScramLoginModule required;").ok());
}

}  // namespace
}  // namespace mala::security
