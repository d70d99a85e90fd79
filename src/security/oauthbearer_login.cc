#include "mala/security/oauthbearer_login.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "mala/common/exponential_backoff.h"
#include "mala/common/json.h"
#include "mala/common/logging.h"
#include "mala/security/jwks_source.h"
#include "mala/security/oauthbearer.h"
#include "mala/security/sasl_settings.h"
#include "mala/security/scram.h"

namespace mala::security {

namespace {

constexpr std::string_view unsecured_login_handler =
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredLoginCallbackHandler";
constexpr std::string_view login_handlers[] = {
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",  // before 4.0
};
// ExpiringCredentialRefreshingLogin: refresh at 80% of the lifetime, at least a minute after the last one.
constexpr double refresh_window_factor = 0.8;
constexpr int64_t min_refresh_period_ms = 60'000;
constexpr size_t max_token_bytes = 64 * 1024;  // a token file or endpoint answer larger than this is refused

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

status invalid(std::string message) {
  return status::error(error_code::invalid_config, std::move(message));
}

std::string base64url_encode(std::string_view text) {
  std::string out =
      base64_encode(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  while (!out.empty() && out.back() == '=') out.pop_back();
  return out;
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (c < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
          out += escaped;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// application/x-www-form-urlencoded, as Java's URLEncoder (which Kafka's HttpAccessTokenRetriever uses).
std::string form_encode(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '.' || c == '-' || c == '*' || c == '_') {
      out += static_cast<char>(c);
    } else if (c == ' ') {
      out += '+';
    } else {
      char escaped[4];
      std::snprintf(escaped, sizeof(escaped), "%%%02X", c);
      out += escaped;
    }
  }
  return out;
}

std::optional<std::string> option(const std::map<std::string, std::string>& options, const std::string& key) {
  auto it = options.find(key);
  if (it == options.end()) return std::nullopt;
  return it->second;
}

std::optional<double> parse_number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::istringstream in(text);
  double v = 0;
  in >> v;
  if (!in || !in.eof() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// The token a login handed out, refreshed before it expires.
class login_base : public oauthbearer_login {
 public:
  result<oauthbearer_login_token> current() override {
    std::lock_guard lock(_mutex);
    const int64_t now = wall_ms();
    if (needs_new(now)) {
      if (auto fresh = refresh_inline(now)) {
        if (!fresh->ok()) {
          if (!_token || now >= _token->expires_at_ms) return fresh->error();
        } else {
          _token = std::move(fresh->value());
        }
      }
    }
    if (!_token || now >= _token->expires_at_ms) {
      return status::error(error_code::sasl_authentication_failed,
                           "the node's OAUTHBEARER token expired and no new one could be obtained");
    }
    return *_token;
  }

 protected:
  // When the token held should be replaced (ExpiringCredentialRefreshingLogin's schedule).
  bool needs_new(int64_t now) const { return !_token || now >= refresh_at(*_token); }
  static int64_t refresh_at(const oauthbearer_login_token& t) {
    const int64_t lifetime = std::max<int64_t>(0, t.expires_at_ms - t.issued_at_ms);
    const int64_t at =
        t.issued_at_ms + static_cast<int64_t>(static_cast<double>(lifetime) * refresh_window_factor);
    // At least a minute after it was obtained, unless that is past its expiry.
    return std::min(std::max(at, t.issued_at_ms + min_refresh_period_ms), t.expires_at_ms);
  }
  // For logins cheap enough to make on the caller's thread: the new token; nullopt otherwise.
  virtual std::optional<result<oauthbearer_login_token>> refresh_inline(int64_t now) = 0;

  std::mutex _mutex;
  std::optional<oauthbearer_login_token> _token;
};

// OAuthBearerUnsecuredLoginCallbackHandler: made when needed, no I/O.
class unsecured_login final : public login_base {
 public:
  explicit unsecured_login(std::map<std::string, std::string> options) : _options(std::move(options)) {}

 private:
  std::optional<result<oauthbearer_login_token>> refresh_inline(int64_t now) override {
    return unsecured_login_token(_options, now);
  }
  std::map<std::string, std::string> _options;
};

// OAuthBearerLoginCallbackHandler: a file or a token endpoint, read on this login's own thread.
class retrieving_login final : public login_base {
 public:
  struct settings {
    std::string url;
    std::string client_id, client_secret, scope;
    std::string sub_claim = "sub";
    int64_t retry_backoff_ms = 100;
    int64_t retry_backoff_max_ms = 10'000;
    int32_t timeout_ms = 10'000;
    std::string listener;
  };
  explicit retrieving_login(settings s) : _settings(std::move(s)) {}
  ~retrieving_login() override {
    {
      std::lock_guard lock(_mutex);
      _stopping = true;
    }
    _wake.notify_all();
    if (_thread.joinable()) _thread.join();
  }

  // The first token, on the caller's thread (the node opening), then the refresh thread.
  status start() {
    auto first = retrieve(wall_ms());
    if (!first.ok()) return first.error();
    {
      std::lock_guard lock(_mutex);
      _token = std::move(*first);
    }
    _thread = std::thread([this] { run(); });
    return status::success();
  }

 private:
  std::optional<result<oauthbearer_login_token>> refresh_inline(int64_t) override { return std::nullopt; }

  result<oauthbearer_login_token> retrieve(int64_t now) const {
    std::string jwt;
    if (_settings.url.starts_with("file:")) {
      std::string path = _settings.url.substr(5);
      if (path.starts_with("//")) path = path.substr(2);
      std::ifstream in(path, std::ios::binary);
      if (!in) return invalid("sasl.oauthbearer.token.endpoint.url: cannot read the token file " + path);
      std::string text(max_token_bytes + 1, '\0');
      in.read(text.data(), static_cast<std::streamsize>(text.size()));
      text.resize(static_cast<size_t>(in.gcount()));
      if (text.size() > max_token_bytes) return invalid("the token file " + path + " is larger than 64 KiB");
      jwt = std::move(text);
    } else {
      std::string form = "grant_type=client_credentials";
      if (!_settings.scope.empty()) form += "&scope=" + form_encode(_settings.scope);
      const std::string credentials =
          form_encode(_settings.client_id) + ":" + form_encode(_settings.client_secret);
      const std::string authorization =
          "Basic " + base64_encode(std::span<const uint8_t>(
                         reinterpret_cast<const uint8_t*>(credentials.data()), credentials.size()));
      auto body = http_post_form(_settings.url, authorization, form, _settings.timeout_ms, max_token_bytes);
      if (!body.ok()) return body.error();
      auto doc = json::parse(*body);
      const json::value* token = doc.ok() ? doc->find("access_token") : nullptr;
      if (!token || !token->as_string() || token->as_string()->empty()) {
        return status::error(error_code::sasl_authentication_failed,
                             "the token endpoint " + _settings.url + " answered without an access_token");
      }
      jwt = *token->as_string();
    }
    // Kafka trims the file's whitespace.
    const auto first = jwt.find_first_not_of(" \t\r\n");
    const auto last = jwt.find_last_not_of(" \t\r\n");
    jwt = first == std::string::npos ? std::string() : jwt.substr(first, last - first + 1);
    return login_token_from_jwt(jwt, _settings.sub_claim, now);
  }

  void run() {
    auto log = subsystem_logger("security");
    exponential_backoff backoff(_settings.retry_backoff_ms, _settings.retry_backoff_max_ms);
    int64_t last_retrieval_ms = wall_ms();  // start() got the first token
    std::unique_lock lock(_mutex);
    while (!_stopping) {
      int64_t due = _token ? refresh_at(*_token) : wall_ms();
      // Never sooner than a minute after the last retrieval while the token is valid: a token issued long
      // ago (a file read again, an endpoint's cached answer) would otherwise be due again at once, forever.
      if (_token && wall_ms() < _token->expires_at_ms)
        due = std::max(due, std::min(last_retrieval_ms + min_refresh_period_ms, _token->expires_at_ms));
      const int64_t wait = std::max<int64_t>(0, due - wall_ms());
      if (wait > 0) {
        _wake.wait_for(lock, std::chrono::milliseconds(wait));
        continue;
      }
      lock.unlock();
      auto fresh = retrieve(wall_ms());
      lock.lock();
      last_retrieval_ms = wall_ms();
      if (_stopping) break;
      if (fresh.ok()) {
        _token = std::move(*fresh);
        backoff.reset();
        log->info("listener {}: OAUTHBEARER token refreshed, valid until {} ms since the epoch",
                  _settings.listener, _token->expires_at_ms);
        continue;
      }
      const int64_t wait_ms = backoff.after_failure();
      log->warn("listener {}: cannot refresh the node's OAUTHBEARER token: {}; trying again in {} ms",
                _settings.listener, fresh.error().message, wait_ms);
      _wake.wait_for(lock, std::chrono::milliseconds(wait_ms));
    }
  }

  settings _settings;
  std::condition_variable _wake;
  bool _stopping = false;
  std::thread _thread;
};

}  // namespace

result<oauthbearer_login_token> unsecured_login_token(const std::map<std::string, std::string>& options,
                                                      int64_t now_ms) {
  const std::string principal_claim = option(options, "unsecuredLoginPrincipalClaimName").value_or("sub");
  int64_t lifetime_seconds = 3600;
  if (auto text = option(options, "unsecuredLoginLifetimeSeconds")) {
    auto v = parse_number(*text);
    if (!v || *v <= 0 || *v > 1e9) return invalid("unsecuredLoginLifetimeSeconds must be a positive number");
    lifetime_seconds = static_cast<int64_t>(*v);
  }
  const int64_t iat = now_ms / 1000;
  const int64_t exp = iat + lifetime_seconds;
  std::string claims = "{\"iat\":" + std::to_string(iat) + ",\"exp\":" + std::to_string(exp);
  oauthbearer_login_token token;
  bool principal = false;
  for (const auto& [key, value] : options) {
    std::string name;
    std::string json;
    if (key.starts_with("unsecuredLoginStringClaim_")) {
      name = key.substr(26);
      json = json_string(value);
      if (name == principal_claim) principal = !value.empty();
    } else if (key.starts_with("unsecuredLoginNumberClaim_")) {
      name = key.substr(26);
      if (!parse_number(value)) return invalid(key + " must be a number");
      json = value;
    } else if (key.starts_with("unsecuredLoginListClaim_")) {
      name = key.substr(24);
      // The first character is the delimiter of the rest.
      json = "[";
      if (!value.empty()) {
        const char delimiter = value.front();
        size_t from = 1;
        bool first = true;
        while (from <= value.size()) {
          size_t end = value.find(delimiter, from);
          if (end == std::string::npos) end = value.size();
          if (end > from) {
            json += (first ? "" : ",") + json_string(value.substr(from, end - from));
            first = false;
          }
          from = end + 1;
        }
      }
      json += "]";
    } else if (key.starts_with("unsecuredLoginExtension_")) {
      const std::string extension = key.substr(24);
      if (extension.empty() || extension == "auth")
        return invalid(key + ": the SASL extension name is not allowed");
      token.extensions[extension] = value;
      continue;
    } else {
      continue;
    }
    if (name.empty() || name == "iat" || name == "exp") return invalid(key + ": that claim is not allowed");
    claims += "," + json_string(name) + ":" + json;
  }
  if (!principal) {
    return invalid("the OAuthBearerLoginModule needs unsecuredLoginStringClaim_" + principal_claim +
                   " (the principal this node presents) for the unsecured login");
  }
  claims += "}";
  token.value = base64url_encode("{\"alg\":\"none\"}") + "." + base64url_encode(claims) + ".";
  token.issued_at_ms = iat * 1000;
  token.expires_at_ms = exp * 1000;
  return token;
}

result<oauthbearer_login_token> login_token_from_jwt(const std::string& jwt, const std::string& sub_claim,
                                                     int64_t now_ms) {
  auto refuse = [](const std::string& why) {
    return status::error(error_code::invalid_request, "the retrieved OAUTHBEARER token " + why);
  };
  const size_t first_dot = jwt.find('.');
  const size_t second_dot = first_dot == std::string::npos ? first_dot : jwt.find('.', first_dot + 1);
  if (second_dot == std::string::npos || jwt.find('.', second_dot + 1) != std::string::npos)
    return refuse("is not a JWT of three parts");
  auto payload = base64url_decode(std::string_view(jwt).substr(first_dot + 1, second_dot - first_dot - 1));
  if (!payload) return refuse("has a payload that is not base64url");
  auto claims =
      json::parse(std::string_view(reinterpret_cast<const char*>(payload->data()), payload->size()));
  if (!claims.ok() || !claims->as_object()) return refuse("has a payload that is not a JSON object");
  const json::value* exp = claims->find("exp");
  if (!exp || !exp->as_number()) return refuse("has no numeric exp claim");
  const json::value* sub = claims->find(sub_claim);
  if (!sub || !sub->as_string() || sub->as_string()->empty()) return refuse("has no " + sub_claim + " claim");
  oauthbearer_login_token token;
  token.value = jwt;
  token.expires_at_ms = static_cast<int64_t>(exp->as_number()->as_double * 1000);
  token.issued_at_ms = now_ms;
  if (const json::value* iat = claims->find("iat"); iat && iat->as_number())
    token.issued_at_ms = static_cast<int64_t>(iat->as_number()->as_double * 1000);
  if (token.expires_at_ms <= now_ms) return refuse("has expired");
  return token;
}

std::string oauthbearer_initial_response(const oauthbearer_login_token& token) {
  std::string message =
      "n,,\x01"
      "auth=Bearer " +
      token.value + "\x01";
  for (const auto& [key, value] : token.extensions) message += key + "=" + value + "\x01";
  return message + "\x01";
}

result<std::shared_ptr<oauthbearer_login>> oauthbearer_login::open(
    const node_config& config, const std::string& listener,
    const std::map<std::string, std::string>& options) {
  const auto handler = oauthbearer_setting(config, listener, "sasl.login.callback.handler.class");
  if (!handler || handler->empty() || *handler == unsecured_login_handler) {
    auto made = unsecured_login_token(options, wall_ms());
    if (!made.ok()) return invalid("listener " + listener + ": " + made.error().message);
    return std::shared_ptr<oauthbearer_login>(std::make_shared<unsecured_login>(options));
  }
  if (std::find(std::begin(login_handlers), std::end(login_handlers), *handler) == std::end(login_handlers)) {
    return invalid("sasl.login.callback.handler.class: Mala logs in with Kafka's " +
                   std::string(login_handlers[0]) + " or its unsecured login handler, not " + *handler);
  }
  retrieving_login::settings s;
  s.listener = listener;
  auto url = oauthbearer_setting(config, listener, "sasl.oauthbearer.token.endpoint.url");
  if (!url || url->empty()) {
    return invalid("sasl.oauthbearer.token.endpoint.url: listener " + listener + " logs in with " + *handler +
                   ", which needs the token endpoint's URL (file, http or https)");
  }
  s.url = *url;
  const bool file = s.url.starts_with("file:");
  if (!file && !s.url.starts_with("http://") && !s.url.starts_with("https://"))
    return invalid("sasl.oauthbearer.token.endpoint.url must be a file, http or https URL");
  if (!file) {
    auto id = option(options, "clientId");
    auto secret = option(options, "clientSecret");
    if (!id || !secret || id->empty() || secret->empty()) {
      return invalid("the OAuthBearerLoginModule of listener " + listener +
                     " needs the clientId and clientSecret options for the token endpoint");
    }
    s.client_id = *id;
    s.client_secret = *secret;
    s.scope = option(options, "scope").value_or("");
  }
  if (auto sub = oauthbearer_setting(config, listener, "sasl.oauthbearer.sub.claim.name");
      sub && !sub->empty())
    s.sub_claim = *sub;
  auto number = [&](const std::string& key, int64_t fallback) {
    auto text = oauthbearer_setting(config, listener, key);
    auto v = text ? parse_number(*text) : std::nullopt;
    return v && *v > 0 ? static_cast<int64_t>(*v) : fallback;
  };
  s.retry_backoff_ms = number("sasl.login.retry.backoff.ms", 100);
  s.retry_backoff_max_ms = std::max(s.retry_backoff_ms, number("sasl.login.retry.backoff.max.ms", 10'000));
  s.timeout_ms =
      static_cast<int32_t>(std::min<int64_t>(number("sasl.login.read.timeout.ms", 10'000), INT32_MAX));
  auto login = std::make_shared<retrieving_login>(std::move(s));
  if (auto st = login->start(); !st.ok())
    return invalid("listener " + listener + ": cannot obtain the node's OAUTHBEARER token: " + st.message);
  return std::shared_ptr<oauthbearer_login>(std::move(login));
}

}  // namespace mala::security
