#include "mala/common/ssl_principal_mapper.h"

#include <gtest/gtest.h>

namespace mala {
namespace {

// The cases of Kafka's SslPrincipalMapperTest.
TEST(ssl_principal_mapper_test, accepts_valid_rules) {
  for (const char* rules :
       {"DEFAULT", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L", "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/", "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/"}) {
    EXPECT_TRUE(ssl_principal_mapper::parse(rules).ok()) << rules;
  }
}

TEST(ssl_principal_mapper_test, refuses_invalid_rules) {
  for (const char* rules :
       {"default", "DEFAUL", "DEFAULT/L", "DEFAULT/U", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU", "RULE:^CN=((.*$/$1/"}) {
    auto mapper = ssl_principal_mapper::parse(rules);
    EXPECT_FALSE(mapper.ok()) << rules;
    if (!mapper.ok()) {
      EXPECT_EQ(mapper.error().code, error_code::invalid_config);
    }
  }
}

TEST(ssl_principal_mapper_test, maps_names_by_the_first_rule_that_applies) {
  auto mapper = ssl_principal_mapper::parse(
      "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, "
      "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, "
      "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, "
      "DEFAULT");
  ASSERT_TRUE(mapper.ok()) << mapper.error().message;
  EXPECT_EQ(mapper->map("CN=Duke,OU=ServiceUsers,O=Org,C=US"), "duke");
  EXPECT_EQ(mapper->map("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"), "duke@sme");
  EXPECT_EQ(mapper->map("cn=duke,ou=sme,dc=mycp,dc=com"), "DUKE@SME");
  EXPECT_EQ(mapper->map("cN=duke,OU=JavaSoft,O=Sun Microsystems"), "DUKE");
  EXPECT_EQ(mapper->map("OU=JavaSoft,O=Sun Microsystems,C=US"), "OU=JavaSoft,O=Sun Microsystems,C=US");
}

TEST(ssl_principal_mapper_test, no_rule_applying_is_no_name) {
  auto mapper = ssl_principal_mapper::parse("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/");
  ASSERT_TRUE(mapper.ok());
  EXPECT_EQ(mapper->map("CN=alice,OU=eng"), std::nullopt);
  EXPECT_EQ(mapper->map("CN=svc,OU=ServiceUsers,O=acme"), "svc");
  // No rule at all (an empty list) maps nothing.
  auto empty = ssl_principal_mapper::parse("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->map("CN=alice"), std::nullopt);
}

TEST(ssl_principal_mapper_test, comma_with_whitespace) {
  auto mapper = ssl_principal_mapper::parse("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT");
  ASSERT_TRUE(mapper.ok()) << mapper.error().message;
  EXPECT_EQ(mapper->map("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz"), "Tkac\\, Adam");
}

TEST(ssl_principal_mapper_test, replacement_references_and_escapes) {
  // A reference to a group the pattern lacks stays literal (Kafka escapes it); `\$` is a literal dollar.
  auto mapper = ssl_principal_mapper::parse("RULE:^CN=(\\w+),O=(\\w+)$/$2-$1-$3-\\$1/");
  ASSERT_TRUE(mapper.ok()) << mapper.error().message;
  EXPECT_EQ(mapper->map("CN=bob,O=acme"), "acme-bob-$3-$1");
  // $12 with two groups: group 1 then a literal 2.
  auto two = ssl_principal_mapper::parse("RULE:^CN=(\\w+),O=(\\w+)$/$12/");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->map("CN=bob,O=acme"), "bob2");
}

// Kafka's testRulesSplitting, through the same toString form.
TEST(ssl_principal_mapper_test, splits_rules_as_kafka) {
  auto describe = [](const char* rules) {
    auto mapper = ssl_principal_mapper::parse(rules);
    EXPECT_TRUE(mapper.ok()) << rules;
    return mapper.ok() ? mapper->describe() : std::string();
  };
  EXPECT_EQ(describe(""), "[]");
  EXPECT_EQ(describe("DEFAULT"), "[DEFAULT]");
  EXPECT_EQ(describe("RULE://"), "[RULE:/]");
  EXPECT_EQ(describe("RULE:/.*/"), "[RULE:/.*]");
  EXPECT_EQ(describe("RULE:/.*/L"), "[RULE:/.*/L]");
  EXPECT_EQ(describe("RULE://,DEFAULT"), "[RULE:/, DEFAULT]");
  EXPECT_EQ(describe("  RULE:// ,  DEFAULT  "), "[RULE:/, DEFAULT]");
  EXPECT_EQ(describe("  RULE:   /     / ,  DEFAULT  "), "[RULE:   /     , DEFAULT]");
  EXPECT_EQ(describe("  RULE:  /     /U   ,DEFAULT  "), "[RULE:  /     /U, DEFAULT]");
  EXPECT_EQ(describe("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
            "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]");
  EXPECT_EQ(describe(",   , , ,      , , ,   "), "[]");
  EXPECT_EQ(describe(",,RULE://,,,DEFAULT,,"), "[RULE:/, DEFAULT]");
  EXPECT_EQ(describe(",  , RULE: /   /    ,,,   DEFAULT, ,   "), "[RULE: /   , DEFAULT]");
  EXPECT_EQ(describe("     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"), "[RULE:   /  /U, DEFAULT]");
  EXPECT_EQ(describe("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"), "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]");
  EXPECT_EQ(describe("RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"), "[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]");
}

}  // namespace
}  // namespace mala
