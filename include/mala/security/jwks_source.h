// The JSON Web Key Set of sasl.oauthbearer.jwks.endpoint.url, as Kafka's VerificationKeyResolverFactory
// makes it: a file:// URL is read once at start-up (JwksFileVerificationKeyResolver); an http:// or https://
// URL is fetched at start-up and again every sasl.oauthbearer.jwks.endpoint.refresh.ms on the source's own
// thread (RefreshingHttpsJwks), and sooner when a token names a key id the set lacks (one such fetch per id
// per 10 s and at most one per second, for the last 16 unknown ids of at most 1,000 characters). https
// verifies the server with the system's trust anchors (or SSL_CERT_FILE) and its name. A failed refresh keeps
// the keys in hand and is retried with a growing backoff (retry.backoff.ms up to retry.backoff.max.ms).
// Responses are bounded (1 MiB) and every fetch ends within its timeout.
//
// Threads: current() and request_refresh() from any thread; the refresh thread is joined by the destructor.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "mala/common/result.h"
#include "mala/security/jwt.h"

namespace mala::security {

struct jwks_source_options {
  std::string url;
  int64_t refresh_ms = 3'600'000;         // sasl.oauthbearer.jwks.endpoint.refresh.ms
  int64_t retry_backoff_ms = 100;         // sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
  int64_t retry_backoff_max_ms = 10'000;  // sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
  int32_t timeout_ms = 10'000;            // one fetch, connect to last byte
};

// One GET of an http:// or https:// URL: the body of a 200 answer (at most `max_bytes`), else an error
// naming the step (never the body).
result<std::string> http_get(const std::string& url, int32_t timeout_ms, size_t max_bytes = 1 << 20);
// One POST of an application/x-www-form-urlencoded body, with an Authorization header when given; as
// http_get otherwise.
result<std::string> http_post_form(const std::string& url, const std::string& authorization,
                                   const std::string& form, int32_t timeout_ms, size_t max_bytes = 1 << 20);

class jwks_source {
 public:
  // Reads or fetches the set once; invalid_config when the URL is not file/http/https, or the first read
  // fails (Kafka's broker does not start either).
  static result<std::shared_ptr<jwks_source>> open(jwks_source_options options);
  ~jwks_source();
  jwks_source(const jwks_source&) = delete;
  jwks_source& operator=(const jwks_source&) = delete;

  std::shared_ptr<const json_web_key_set> current() const;
  // A token named key id `kid` that the set lacks: fetch again soon (http/https only; rate-limited).
  void request_refresh(const std::string& kid);
  const std::string& url() const { return _options.url; }

 private:
  explicit jwks_source(jwks_source_options options);
  result<json_web_key_set> load() const;
  void run();

  jwks_source_options _options;
  bool _remote = false;
  mutable std::mutex _mutex;
  std::condition_variable _wake;
  std::shared_ptr<const json_web_key_set> _keys;
  std::deque<std::pair<std::string, int64_t>>
      _missing_kids;  // the last unknown ids, with their next fetch time
  bool _expedite = false;
  int64_t _last_expedited_ms = -1'000'000;
  bool _stopping = false;
  std::thread _thread;
};

}  // namespace mala::security
