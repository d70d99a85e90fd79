// The principal an Envelope carries (KIP-590): Kafka's DefaultKafkaPrincipalBuilder serialization, an int16
// version (0) and DefaultPrincipalData v0 (compact type and name, TokenAuthenticated, tagged fields), as a
// Kafka 4.4 broker forwarding for User:ANONYMOUS sends it; anything else is refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "handlers/envelope.h"
#include "mala/common/error_code.h"
#include "mala/protocol/messages/create_topics_response.h"
#include "mala/protocol/messages/incremental_alter_configs_response.h"
#include "mala/protocol/request_header.h"

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

// Kafka's RequestChannel.buildResponseSend: an inner answer with NOT_CONTROLLER among its error codes (any
// depth, any version's header) makes the Envelope's own error NOT_CONTROLLER.
template <typename Response>
std::vector<uint8_t> framed(const Response& body, int16_t version) {
  std::vector<uint8_t> out;
  protocol::wire_writer w(out);
  protocol::encode_response_header(w, 77, Response::is_flexible(version) ? 1 : 0);
  body.encode(w, version);
  return out;
}

TEST(envelope, finds_not_controller_in_the_inner_answer) {
  const int16_t not_controller = to_wire(error_code::not_controller);
  protocol::create_topics_response created;
  created.topics.resize(2);
  created.topics[0].name = "a";
  created.topics[1].name = "b";
  for (int16_t version : {int16_t{2}, int16_t{7}}) {
    EXPECT_FALSE(response_holds_not_controller(19, version, framed(created, version))) << version;
    auto lost = created;
    lost.topics[1].error_code = not_controller;
    EXPECT_TRUE(response_holds_not_controller(19, version, framed(lost, version))) << version;
    auto other = created;
    other.topics[1].error_code = to_wire(error_code::topic_already_exists);
    EXPECT_FALSE(response_holds_not_controller(19, version, framed(other, version))) << version;
  }
  protocol::incremental_alter_configs_response altered;
  altered.responses.resize(1);
  altered.responses[0].error_code = not_controller;
  EXPECT_TRUE(response_holds_not_controller(44, 1, framed(altered, 1)));
  // Bytes that are not that answer, and an unknown API: no.
  auto cut = framed(altered, 1);
  cut.resize(cut.size() - 3);
  EXPECT_FALSE(response_holds_not_controller(44, 1, cut));
  EXPECT_FALSE(response_holds_not_controller(9999, 0, framed(altered, 1)));
}

}  // namespace
}  // namespace mala::broker::handlers
