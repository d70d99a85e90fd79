// The principal an Envelope carries (KIP-590): Kafka's DefaultKafkaPrincipalBuilder serialization, an int16
// version (0) and DefaultPrincipalData v0 (compact type and name, TokenAuthenticated, tagged fields), as a
// Kafka 4.4 broker forwarding for User:ANONYMOUS sends it; anything else is refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "handlers/envelope.h"

namespace mala::broker::handlers {
namespace {

// The bytes a Kafka 4.4 broker sent for User:ANONYMOUS (captured from its forwarding log line).
const std::vector<uint8_t> anonymous = {0,   0,   5,   'U', 's', 'e', 'r', 10, 'A', 'N',
                                        'O', 'N', 'Y', 'M', 'O', 'U', 'S', 0,  0};

TEST(envelope, reads_a_kafka_brokers_forwarded_principal) {
  auto principal = decode_forwarded_principal(anonymous);
  ASSERT_TRUE(principal);
  EXPECT_EQ(principal->type, "User");
  EXPECT_EQ(principal->name, "ANONYMOUS");
}

TEST(envelope, refuses_what_is_not_a_principal) {
  auto other_version = anonymous;
  other_version[1] = 1;
  EXPECT_FALSE(decode_forwarded_principal(other_version));
  auto trailing = anonymous;
  trailing.push_back(7);
  EXPECT_FALSE(decode_forwarded_principal(trailing));
  EXPECT_FALSE(decode_forwarded_principal(std::vector<uint8_t>(anonymous.begin(), anonymous.begin() + 9)));
  EXPECT_FALSE(decode_forwarded_principal({}));
  auto huge_name = anonymous;
  huge_name[7] = 0x7f;  // a name longer than the bytes left
  EXPECT_FALSE(decode_forwarded_principal(huge_name));
}

}  // namespace
}  // namespace mala::broker::handlers
