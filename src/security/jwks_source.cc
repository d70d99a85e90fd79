#include "mala/security/jwks_source.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "mala/common/exponential_backoff.h"
#include "mala/common/logging.h"

namespace mala::security {

namespace {

// RefreshingHttpsJwks.maybeExpediteRefresh: one fetch per unknown kid per period (Kafka waits 60 s; 10 s
// here), and at most one per second whatever the kids.
constexpr int64_t kid_recheck_ms = 10'000;
constexpr int64_t expedite_gap_ms = 1'000;
constexpr size_t max_missing_kids = 16;
constexpr size_t max_kid_chars = 1000;

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

status fetch_error(const std::string& url, const std::string& why) {
  return status::error(error_code::network_exception, "HTTP request to " + url + ": " + why);
}

struct parsed_url {
  std::string scheme, host, path;
  int port = 0;
};

std::optional<parsed_url> parse_url(const std::string& url) {
  parsed_url out;
  const size_t colon = url.find("://");
  if (colon == std::string::npos) return std::nullopt;
  out.scheme = url.substr(0, colon);
  std::transform(out.scheme.begin(), out.scheme.end(), out.scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string rest = url.substr(colon + 3);
  const size_t slash = rest.find('/');
  out.path = slash == std::string::npos ? "/" : rest.substr(slash);
  std::string authority = rest.substr(0, slash);
  if (authority.empty() || authority.find('@') != std::string::npos) return std::nullopt;
  out.port = out.scheme == "https" ? 443 : 80;
  size_t port_colon = std::string::npos;
  if (authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) return std::nullopt;
    out.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return std::nullopt;
      port_colon = close + 1;
    }
  } else {
    port_colon = authority.find(':');
    out.host = authority.substr(0, port_colon);
  }
  if (port_colon != std::string::npos) {
    const std::string digits = authority.substr(port_colon + 1);
    if (digits.empty() || digits.size() > 5 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) {
      return std::nullopt;
    }
    out.port = std::stoi(digits);
    if (out.port <= 0 || out.port > 65535) return std::nullopt;
  }
  if (out.host.empty()) return std::nullopt;
  return out;
}

// A TCP connection to host:port within the deadline; -1 (with `why`) otherwise.
int connect_within(const parsed_url& u, int64_t deadline_ms, std::string& why) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(u.host.c_str(), std::to_string(u.port).c_str(), &hints, &found); rc != 0) {
    why = std::string("cannot resolve the host: ") + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      why = std::string("cannot connect: ") + std::strerror(errno);
      ::close(fd);
      fd = -1;
      continue;
    }
    pollfd p{fd, POLLOUT, 0};
    const int wait = static_cast<int>(std::max<int64_t>(0, deadline_ms - steady_ms()));
    int err = 0;
    socklen_t len = sizeof(err);
    if (::poll(&p, 1, wait) != 1 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      why = err != 0 ? std::string("cannot connect: ") + std::strerror(err) : "connect timed out";
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd >= 0) {
    // Blocking from here, each read and write bounded by what is left of the deadline.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    const int64_t left = std::max<int64_t>(1, deadline_ms - steady_ms());
    timeval tv{static_cast<time_t>(left / 1000), static_cast<suseconds_t>((left % 1000) * 1000)};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  return fd;
}

}  // namespace

namespace {

// One HTTP/1.0 request (GET without a body, POST with a form) and the body of a 200 answer.
result<std::string> http_request(const std::string& method, const std::string& url,
                                 const std::string& extra_headers, const std::string& body_out,
                                 int32_t timeout_ms, size_t max_bytes) {
  auto u = parse_url(url);
  if (!u || (u->scheme != "http" && u->scheme != "https")) return fetch_error(url, "not an http(s) URL");
  const int64_t deadline = steady_ms() + timeout_ms;
  std::string why;
  const int fd = connect_within(*u, deadline, why);
  if (fd < 0) return fetch_error(url, why);
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(nullptr, SSL_CTX_free);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(nullptr, SSL_free);
  auto fail = [&](const std::string& step) -> status {
    ERR_clear_error();
    ssl.reset();
    ::close(fd);
    return fetch_error(url, step);
  };
  if (u->scheme == "https") {
    ctx.reset(SSL_CTX_new(TLS_client_method()));
    if (!ctx || SSL_CTX_set_default_verify_paths(ctx.get()) != 1) return fail("no TLS context");
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
    ssl.reset(SSL_new(ctx.get()));
    if (!ssl || SSL_set_fd(ssl.get(), fd) != 1) return fail("no TLS session");
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
    in6_addr ip6{};
    in_addr ip4{};
    if (inet_pton(AF_INET, u->host.c_str(), &ip4) == 1 || inet_pton(AF_INET6, u->host.c_str(), &ip6) == 1) {
      X509_VERIFY_PARAM_set1_ip_asc(param, u->host.c_str());  // an address: its IP SAN, and no SNI
    } else {
      X509_VERIFY_PARAM_set1_host(param, u->host.c_str(), 0);
      SSL_set_tlsext_host_name(ssl.get(), u->host.c_str());
    }
    if (SSL_connect(ssl.get()) != 1) {
      const long verify = SSL_get_verify_result(ssl.get());
      return fail(verify != X509_V_OK ? std::string("TLS: ") + X509_verify_cert_error_string(verify)
                                      : "TLS handshake failed");
    }
  }
  std::string request = method + " " + u->path + " HTTP/1.0\r\nHost: " + u->host +
                        "\r\nAccept: application/json\r\n" + extra_headers +
                        "User-Agent: mala\r\nConnection: close\r\n";
  if (method == "POST") request += "Content-Length: " + std::to_string(body_out.size()) + "\r\n";
  request += "\r\n" + body_out;
  size_t sent = 0;
  while (sent < request.size()) {
    const int n =
        ssl ? SSL_write(ssl.get(), request.data() + sent, static_cast<int>(request.size() - sent))
            : static_cast<int>(::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL));
    if (n <= 0) return fail("send failed");
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buffer[16384];
  while (true) {
    if (steady_ms() > deadline) return fail("timed out");
    const int n = ssl ? SSL_read(ssl.get(), buffer, sizeof(buffer))
                      : static_cast<int>(::recv(fd, buffer, sizeof(buffer), 0));
    if (n == 0) break;
    if (n < 0) {
      if (ssl && SSL_get_error(ssl.get(), n) == SSL_ERROR_ZERO_RETURN) break;
      if (!ssl && errno == EINTR) continue;
      if (ssl && SSL_get_error(ssl.get(), n) == SSL_ERROR_SYSCALL && errno == 0)
        break;  // EOF without close_notify
      return fail(errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : "read failed");
    }
    response.append(buffer, static_cast<size_t>(n));
    if (response.size() > max_bytes + 16384) return fail("response larger than " + std::to_string(max_bytes));
  }
  ssl.reset();
  ::close(fd);
  const size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos || !response.starts_with("HTTP/1.")) {
    return fetch_error(url, "malformed HTTP response");
  }
  const size_t space = response.find(' ');
  const std::string status_code = response.substr(space + 1, 3);
  if (status_code != "200") return fetch_error(url, "HTTP status " + status_code);
  std::string body = response.substr(header_end + 4);
  if (body.size() > max_bytes) return fetch_error(url, "response larger than " + std::to_string(max_bytes));
  return body;
}

}  // namespace

result<std::string> http_get(const std::string& url, int32_t timeout_ms, size_t max_bytes) {
  return http_request("GET", url, "", "", timeout_ms, max_bytes);
}

result<std::string> http_post_form(const std::string& url, const std::string& authorization,
                                   const std::string& form, int32_t timeout_ms, size_t max_bytes) {
  std::string headers = "Content-Type: application/x-www-form-urlencoded\r\n";
  if (!authorization.empty()) headers += "Authorization: " + authorization + "\r\n";
  return http_request("POST", url, headers, form, timeout_ms, max_bytes);
}

jwks_source::jwks_source(jwks_source_options options) : _options(std::move(options)) {}

result<std::shared_ptr<jwks_source>> jwks_source::open(jwks_source_options options) {
  std::shared_ptr<jwks_source> source(new jwks_source(std::move(options)));
  const std::string& url = source->_options.url;
  std::string scheme = url.substr(0, url.find(':'));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool file = scheme == "file" && url.find(':') != std::string::npos;
  if (!file && (!parse_url(url) || (scheme != "http" && scheme != "https"))) {
    return status::error(error_code::invalid_config,
                         "sasl.oauthbearer.jwks.endpoint.url must be a file, http or https URL");
  }
  source->_remote = !file;
  auto first = source->load();
  if (!first.ok()) return status::error(error_code::invalid_config, first.error().message);
  source->_keys = std::make_shared<const json_web_key_set>(std::move(*first));
  if (source->_remote) source->_thread = std::thread([raw = source.get()] { raw->run(); });
  return source;
}

jwks_source::~jwks_source() {
  {
    std::lock_guard lock(_mutex);
    _stopping = true;
  }
  _wake.notify_all();
  if (_thread.joinable()) _thread.join();
}

result<json_web_key_set> jwks_source::load() const {
  std::string text;
  if (!_remote) {
    // file:///path (or file:/path): the path after the scheme.
    std::string path = _options.url.substr(_options.url.find(':') + 1);
    while (path.starts_with("//")) path.erase(0, 1);
    std::ifstream in(path, std::ios::binary);
    if (!in) return status::error(error_code::invalid_config, "cannot read the JWKS file " + path);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
  } else {
    auto body = http_get(_options.url, _options.timeout_ms);
    if (!body.ok()) return body.error();
    text = std::move(*body);
  }
  auto keys = json_web_key_set::parse(text);
  if (!keys.ok())
    return status::error(keys.error().code, "the JWKS of " + _options.url + ": " + keys.error().message);
  return keys;
}

std::shared_ptr<const json_web_key_set> jwks_source::current() const {
  std::lock_guard lock(_mutex);
  return _keys;
}

void jwks_source::request_refresh(const std::string& kid) {
  if (!_remote || kid.empty() || kid.size() > max_kid_chars) return;
  {
    std::lock_guard lock(_mutex);
    const int64_t now = steady_ms();
    if (now - _last_expedited_ms < expedite_gap_ms) return;
    auto known = std::find_if(_missing_kids.begin(), _missing_kids.end(),
                              [&](const auto& entry) { return entry.first == kid; });
    if (known != _missing_kids.end()) {
      if (known->second > now) return;
      known->second = now + kid_recheck_ms;
    } else {
      _missing_kids.emplace_back(kid, now + kid_recheck_ms);
      if (_missing_kids.size() > max_missing_kids) _missing_kids.pop_front();
    }
    _last_expedited_ms = now;
    _expedite = true;
  }
  _wake.notify_all();
}

void jwks_source::run() {
  auto log = subsystem_logger("security");
  exponential_backoff backoff(_options.retry_backoff_ms, _options.retry_backoff_max_ms);
  int64_t wait_ms = _options.refresh_ms;
  while (true) {
    {
      std::unique_lock lock(_mutex);
      _wake.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(wait_ms, 1)),
                     [&] { return _stopping || _expedite; });
      if (_stopping) return;
      _expedite = false;
    }
    auto fresh = load();
    if (fresh.ok()) {
      const size_t count = fresh->size();
      {
        std::lock_guard lock(_mutex);
        _keys = std::make_shared<const json_web_key_set>(std::move(*fresh));
      }
      log->info("JWKS of {} refreshed: {} key(s)", _options.url, count);
      backoff.reset();
      wait_ms = _options.refresh_ms;
    } else {
      log->warn("JWKS refresh failed, the keys in hand stay: {}", fresh.error().message);
      wait_ms = backoff.after_failure();
    }
  }
}

}  // namespace mala::security
