// libFuzzer target for the SASL bytes a client sends before it is authenticated, and the JAAS text of the
// configuration: the SCRAM client-first and client-final parsers, base64, SASL/PLAIN, a whole SCRAM server
// exchange (two messages cut from the input at its first NUL), the JAAS parser and the node's SCRAM client
// reading a server's messages, an OAUTHBEARER exchange, the JSON parser, key sets with signed tokens, and the
// access token a token endpoint hands the node's own OAUTHBEARER login, and the HTTP request heads the
// metrics endpoint reads. The first input byte picks what to do. Any crash, sanitizer report or disagreement
// (a parsed message whose parts are not in it) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "mala/common/http_request.h"
#include "mala/common/json.h"
#include "mala/security/jaas_config.h"
#include "mala/security/jwt.h"
#include "mala/security/oauthbearer.h"
#include "mala/security/oauthbearer_login.h"
#include "mala/security/plain.h"
#include "mala/security/sasl_client.h"
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
  switch (selector % 12) {
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
    case 6: {
      // The node's SCRAM client reading a server's first and final messages (cut at the first NUL). A server
      // that does not know the password cannot sign: completing is a bug.
      auto client = sasl_client::start({"SCRAM-SHA-256", "user", "pencil"}, "fuzzNonce");
      check(client.ok());
      client->first_message();
      const size_t nul = text.find('\0');
      const auto first = text.substr(0, nul);
      auto next = client->evaluate({reinterpret_cast<const uint8_t*>(first.data()), first.size()});
      if (next.ok()) {
        check(next->has_value());
        if (nul != std::string_view::npos) {
          const auto second = text.substr(nul + 1);
          auto last = client->evaluate({reinterpret_cast<const uint8_t*>(second.data()), second.size()});
          check(!last.ok() && !client->complete());
        }
      }
      break;
    }
    case 7: {
      // An OAUTHBEARER exchange with the unsecured validator: a message, then (after a NUL) the next one. A
      // completed exchange must have a principal and a future expiry.
      oauthbearer_server server(make_unsecured_validator({}));
      const size_t nul = text.find('\0');
      const auto first = text.substr(0, nul);
      constexpr int64_t now_ms = 1'700'000'000'000;
      auto step = server.evaluate({reinterpret_cast<const uint8_t*>(first.data()), first.size()}, now_ms);
      if (auto* s = std::get_if<oauthbearer_server::step>(&step); s != nullptr && s->complete) {
        check(!server.token().principal.empty() && server.token().lifetime_ms > now_ms);
      } else if (nul != std::string_view::npos) {
        const auto second = text.substr(nul + 1);
        server.evaluate({reinterpret_cast<const uint8_t*>(second.data()), second.size()}, now_ms);
      }
      break;
    }
    case 8: {
      auto parsed = mala::json::parse(text);
      if (parsed.ok()) check(text.size() <= mala::json::limits{}.max_bytes);
      break;
    }
    case 9: {
      // A key set, then a token checked against it (cut at the first NUL). Without the private keys no
      // signature can verify: acceptance is a bug.
      const size_t nul = text.find('\0');
      auto keys = json_web_key_set::parse(text.substr(0, nul));
      if (keys.ok() && nul != std::string_view::npos) {
        auto outcome = validate_signed_jwt(text.substr(nul + 1), *keys, {}, 1'700'000'000'000);
        check(std::holds_alternative<jwt_refusal>(outcome));
      }
      break;
    }
    case 10: {
      // An access token a token endpoint handed the node (its claims read unverified, as Kafka's login does),
      // and the initial response carrying an accepted one, which the server's parser must read back whole.
      auto token = login_token_from_jwt(std::string(text), "sub", 1'700'000'000'000);
      if (token.ok()) {
        const std::string message = oauthbearer_initial_response(*token);
        auto parsed = parse_oauthbearer_client_message(
            {reinterpret_cast<const uint8_t*>(message.data()), message.size()});
        check(!parsed.ok() || parsed->token == token->value);
      }
      break;
    }
    case 11: {
      // What a client sends the metrics endpoint before anything authenticates it: an HTTP request head,
      // found in the bytes and parsed; an accepted head's parts come from its bytes.
      const size_t end = mala::http_head_end(text);
      auto head = mala::parse_http_request_head(end == std::string_view::npos ? text : text.substr(0, end));
      if (head.ok()) {
        check(text.size() <= mala::http_max_head_bytes || end <= mala::http_max_head_bytes);
        check(text.find(head->method) != std::string_view::npos);
        check(head->path.front() == '/' && text.find(head->path) != std::string_view::npos);
        check(head->content_length >= 0);
      }
      break;
    }
  }
  return 0;
}
