// SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer answers it.
#include "mala/security/plain.h"

#include <gtest/gtest.h>

#include <string>

namespace mala::security {
namespace {

std::variant<plain_success, plain_failure> run(const std::string& token) {
  static const std::map<std::string, std::string> users{{"alice", "alice-secret"}, {"bob", "b"}};
  return plain_authenticate({reinterpret_cast<const uint8_t*>(token.data()), token.size()}, users);
}

std::string failure(const std::string& token) {
  auto out = run(token);
  return std::holds_alternative<plain_failure>(out) ? std::get<plain_failure>(out).message : "(succeeded)";
}

TEST(plain, accepts_the_right_password) {
  auto out = run(std::string("\0alice\0alice-secret", 19));
  ASSERT_TRUE(std::holds_alternative<plain_success>(out));
  EXPECT_EQ(std::get<plain_success>(out).user, "alice");
  EXPECT_TRUE(std::holds_alternative<plain_success>(run(std::string("alice\0alice\0alice-secret", 24))));
}

TEST(plain, refuses_as_kafka_does) {
  EXPECT_EQ(failure(std::string("\0alice\0wrong", 12)),
            "Authentication failed: Invalid username or password");
  EXPECT_EQ(failure(std::string("\0alice\0alice-secre", 18)),
            "Authentication failed: Invalid username or password");
  EXPECT_EQ(failure(std::string("\0carol\0alice-secret", 19)),
            "Authentication failed: Invalid username or password");
  EXPECT_EQ(failure(std::string("\0\0pw", 4)), "Authentication failed: username not specified");
  EXPECT_EQ(failure(std::string("\0alice\0", 7)), "Authentication failed: password not specified");
  EXPECT_EQ(failure(std::string("bob\0alice\0alice-secret", 22)),
            "Authentication failed: Client requested an authorization id that is different from username");
  EXPECT_EQ(failure("alice"), "Invalid SASL/PLAIN response: expected 3 tokens, got 1");
  EXPECT_EQ(failure(std::string("a\0b\0c\0d", 7)), "Invalid SASL/PLAIN response: expected 3 tokens, got 4");
  EXPECT_EQ(failure(""), "Invalid SASL/PLAIN response: expected 3 tokens, got 1");
}

}  // namespace
}  // namespace mala::security
