// libFuzzer target for the SASL bytes a client sends before it is authenticated, and the JAAS text of the
// configuration: the SCRAM client-first and client-final parsers, base64, SASL/PLAIN, a whole SCRAM server
// exchange (two messages cut from the input at its first NUL) and the JAAS parser. The first input byte picks
// what to do. Any crash, sanitizer report or disagreement (a parsed message whose parts are not in it) is a
// bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "mala/security/jaas_config.h"
#include "mala/security/plain.h"
#include "mala/security/scram.h"

using namespace mala::security;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

const scram_credential& fixed_credential() {
  static const scram_credential credential = [] {
    const std::vector<uint8_t> salt{1, 2, 3, 4, 5, 6, 7, 8};
    const auto salted = scram_salted_password(scram_mechanism::sha256, "pencil", salt, 4096);
    return scram_credential_from_salted(scram_mechanism::sha256, salt, salted, 4096);
  }();
  return credential;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const std::span<const uint8_t> rest(data + 1, size - 1);
  const std::string_view text(reinterpret_cast<const char*>(rest.data()), rest.size());
  switch (selector % 6) {
    case 0: {
      auto first = parse_scram_client_first(text);
      if (first.ok()) {
        check(text.find(first->bare) != std::string_view::npos);
        check(text.starts_with(first->gs2_header));
        check(!first->nonce.empty());
      }
      break;
    }
    case 1: {
      auto final_message = parse_scram_client_final(text);
      if (final_message.ok()) {
        check(text.starts_with(final_message->without_proof));
        check(!final_message->proof.empty());
      }
      break;
    }
    case 2: {
      auto decoded = base64_decode(text);
      // Bits past the last byte are not checked (RFC 4648 allows a decoder to ignore them), so compare bytes.
      if (decoded) check(base64_decode(base64_encode(*decoded)) == decoded);
      break;
    }
    case 3: {
      static const std::map<std::string, std::string> users{{"alice", "alice-secret"}};
      auto out = plain_authenticate(rest, users);
      if (auto* ok = std::get_if<plain_success>(&out)) check(ok->user == "alice");
      break;
    }
    case 4: {
      scram_server server(scram_mechanism::sha256,
                          [](const std::string& user) -> std::optional<scram_credential> {
                            if (user == "user") return fixed_credential();
                            return std::nullopt;
                          });
      const size_t nul = text.find('\0');
      const auto first = text.substr(0, nul);
      auto step = server.evaluate({reinterpret_cast<const uint8_t*>(first.data()), first.size()});
      if (nul != std::string_view::npos && std::holds_alternative<scram_server::step>(step)) {
        const auto second = text.substr(nul + 1);
        // Without the password the proof cannot be right: a success here is a bug.
        auto last = server.evaluate({reinterpret_cast<const uint8_t*>(second.data()), second.size()});
        check(std::holds_alternative<scram_server::failure>(last));
      }
      break;
    }
    case 5: {
      auto parsed = parse_jaas_config(text);
      if (parsed.ok()) check(!parsed->empty());
      break;
    }
  }
  return 0;
}
