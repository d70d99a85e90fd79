// The server side of SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer: one message
// "[authzid] NUL authcid NUL passwd" checked against the configured users with a constant-time compare.
// Pure: callable from any thread.
#pragma once

#include <map>
#include <span>
#include <string>
#include <variant>

namespace mala::security {

struct plain_success {
  std::string user;
};
struct plain_failure {
  std::string message;  // Kafka's message, sent to the client and logged; never holds the password
};

std::variant<plain_success, plain_failure> plain_authenticate(
    std::span<const uint8_t> token, const std::map<std::string, std::string>& users);

}  // namespace mala::security
