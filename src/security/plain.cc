#include "mala/security/plain.h"

#include <string_view>
#include <vector>

#include "mala/security/scram.h"

namespace mala::security {

std::variant<plain_success, plain_failure> plain_authenticate(
    std::span<const uint8_t> token, const std::map<std::string, std::string>& users) {
  const std::string_view text(reinterpret_cast<const char*>(token.data()), token.size());
  // Kafka's extractTokens: split on NUL into at most 4 parts; anything but exactly 3 is refused.
  std::vector<std::string_view> parts;
  size_t from = 0;
  for (int i = 0; i < 4; ++i) {
    const size_t nul = text.find('\0', from);
    if (nul == std::string_view::npos) {
      parts.push_back(text.substr(from));
      break;
    }
    parts.push_back(text.substr(from, nul - from));
    from = nul + 1;
  }
  if (parts.size() != 3) {
    return plain_failure{"Invalid SASL/PLAIN response: expected 3 tokens, got " +
                         std::to_string(parts.size())};
  }
  const auto authzid = parts[0];
  const auto user = parts[1];
  const auto password = parts[2];
  if (user.empty()) return plain_failure{"Authentication failed: username not specified"};
  if (password.empty()) return plain_failure{"Authentication failed: password not specified"};
  const auto it = users.find(std::string(user));
  // Compare even for an unknown user, so the time taken says less about which users exist.
  static const std::string no_password(32, '\0');
  const std::string& expected = it == users.end() ? no_password : it->second;
  const bool match =
      constant_time_equal({reinterpret_cast<const uint8_t*>(expected.data()), expected.size()},
                          {reinterpret_cast<const uint8_t*>(password.data()), password.size()});
  if (it == users.end() || !match)
    return plain_failure{"Authentication failed: Invalid username or password"};
  if (!authzid.empty() && authzid != user) {
    return plain_failure{
        "Authentication failed: Client requested an authorization id that is different from username"};
  }
  return plain_success{std::string(user)};
}

}  // namespace mala::security
