#include "mala/net/peer_client.h"

#include <cerrno>
#include <chrono>
#include <climits>
#include <string_view>
#include <utility>

#include <sys/socket.h>

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/ssl/stream.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "mala/common/logging.h"
#include "mala/net/coroutine_frame_warning.h"
#include "mala/net/tls.h"
#include "mala/protocol/messages/sasl_authenticate_request.h"
#include "mala/protocol/messages/sasl_authenticate_response.h"
#include "mala/protocol/messages/sasl_handshake_request.h"
#include "mala/protocol/messages/sasl_handshake_response.h"
#include "mala/protocol/request_header.h"
#include "mala/protocol/wire.h"

namespace mala::net {

using asio::ip::tcp;

struct peer_client::connection {
  explicit connection(asio::io_context& io) : socket(io) {}
  tcp::socket socket;
  // The client context the TLS stream was made from, kept while the stream lives (a key store update swaps
  // the node's context for later connections).
  std::shared_ptr<asio::ssl::context> tls_context;
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;  // over `socket` when the listener is SSL
  uint64_t generation = 0;
  std::chrono::steady_clock::time_point idle_since;
  // SASL: past this point the connection is not reused (85% of the session the server granted).
  std::chrono::steady_clock::time_point renew_at = std::chrono::steady_clock::time_point::max();

  void close() {
    std::error_code ec;
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }
};

namespace {

std::string address_key(const peer_address& to) {
  return to.host + ":" + std::to_string(to.port);
}

// What one call shares with its timeout: on expiry the resolver is cancelled and the connection closed, so
// whatever the call awaits completes with an error that the call then reports as request_timed_out.
struct call_deadline {
  explicit call_deadline(asio::io_context& io) : timer(io), resolver(io) {}
  asio::steady_timer timer;
  tcp::resolver resolver;
  std::shared_ptr<void> conn_owner;  // keeps the connection alive for the timer's handler
  tcp::socket* socket = nullptr;
  bool expired = false;
  bool done = false;
};

// An idle pooled connection the server closed (or sent something unasked) reads as ready: EOF or bytes.
bool looks_closed(tcp::socket& socket) {
  uint8_t b;
  const ssize_t n = ::recv(socket.native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n >= 0) return true;  // 0: EOF; > 0: bytes nobody asked for
  return errno != EAGAIN && errno != EWOULDBLOCK;
}

int32_t read_be32(const uint8_t* p) {
  return static_cast<int32_t>((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) |
                              uint32_t{p[3]});
}

}  // namespace

// Fills `buffer` from the connection, through TLS when it has it.
asio::awaitable<void> peer_client::read_exactly(connection& conn, asio::mutable_buffer buffer,
                                                std::error_code& ec) {
  if (conn.tls) {
    co_await asio::async_read(*conn.tls, buffer, asio::redirect_error(asio::use_awaitable, ec));
  } else {
    co_await asio::async_read(conn.socket, buffer, asio::redirect_error(asio::use_awaitable, ec));
  }
}

peer_client::peer_client(asio::io_context& io, std::string client_id, peer_client_options options)
    : _io(io), _client_id(std::move(client_id)), _options(options) {}

peer_client::~peer_client() {
  close_all();
}

void peer_client::close_all() {
  ++_generation;
  for (auto& [key, conns] : _idle)
    for (auto& c : conns) c->close();
  _idle.clear();
  for (const auto& c : _busy) c->close();
}

size_t peer_client::idle_connections(const peer_address& to) const {
  auto it = _idle.find(address_key(to));
  return it == _idle.end() ? 0 : it->second.size();
}

peer_client::connection_ptr peer_client::take_idle(const std::string& key) {
  auto it = _idle.find(key);
  if (it == _idle.end()) return nullptr;
  auto& conns = it->second;
  const auto now = std::chrono::steady_clock::now();
  while (!conns.empty()) {
    connection_ptr c = std::move(conns.back());  // the most recently used: the least likely to be stale
    conns.pop_back();
    const bool too_old =
        now - c->idle_since > std::chrono::milliseconds(_options.max_idle_ms) || now >= c->renew_at;
    if (!too_old && c->socket.is_open() && !looks_closed(c->socket)) {
      if (conns.empty()) _idle.erase(it);
      return c;
    }
    c->close();
  }
  _idle.erase(it);
  return nullptr;
}

void peer_client::return_idle(const std::string& key, connection_ptr conn) {
  auto& conns = _idle[key];
  if (conn->generation != _generation || conns.size() >= _options.max_idle_per_address) {
    conn->close();
    if (conns.empty()) _idle.erase(key);
    return;
  }
  conn->idle_since = std::chrono::steady_clock::now();
  conns.push_back(std::move(conn));
}

asio::awaitable<result<std::vector<uint8_t>>> peer_client::call(
    peer_address to, int16_t api_key, int16_t api_version, int16_t request_header_version,
    int16_t response_header_version, std::vector<uint8_t> body, int32_t timeout_ms) {
  const std::string key = address_key(to);
  const std::string what =
      "request " + std::to_string(api_key) + " v" + std::to_string(api_version) + " to " + key;
  const uint64_t generation = _generation;

  auto deadline = std::make_shared<call_deadline>(_io);
  deadline->timer.expires_after(std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms));
  deadline->timer.async_wait([deadline](std::error_code ec) {
    if (ec || deadline->done) return;
    deadline->expired = true;
    deadline->resolver.cancel();
    if (deadline->socket != nullptr) {
      std::error_code ignored;
      deadline->socket->close(ignored);
    }
  });

  connection_ptr conn;
  // Every exit goes through here: the watchdog is disarmed and the connection pooled or dropped.
  auto finish = [&](result<std::vector<uint8_t>> r) -> result<std::vector<uint8_t>> {
    deadline->done = true;
    deadline->timer.cancel();
    deadline->socket = nullptr;
    if (conn) {
      _busy.erase(conn);
      if (r.ok()) {
        return_idle(key, std::move(conn));
      } else {
        conn->close();
      }
    }
    return r;
  };
  auto failure = [&](std::string_view step, const std::error_code& ec) -> result<std::vector<uint8_t>> {
    if (deadline->expired) {
      return finish(status::error(error_code::request_timed_out,
                                  what + ": no response within " + std::to_string(timeout_ms) + " ms"));
    }
    if (generation != _generation) {
      return finish(status::error(error_code::network_exception, what + ": client closed"));
    }
    return finish(
        status::error(error_code::network_exception,
                      what + ": " + std::string(step) + (ec ? ": " + ec.message() : std::string())));
  };

  if (to.port <= 0 || to.port > 65535) {
    co_return finish(status::error(error_code::network_exception, what + ": invalid port"));
  }

  std::error_code ec;
  conn = take_idle(key);
  if (conn) {
    _busy.insert(conn);
  } else {
    auto endpoints = co_await deadline->resolver.async_resolve(to.host, std::to_string(to.port),
                                                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec || deadline->expired || generation != _generation) co_return failure("cannot resolve host", ec);
    conn = std::make_shared<connection>(_io);
    conn->generation = generation;
    _busy.insert(conn);
    deadline->conn_owner = conn;
    deadline->socket = &conn->socket;
    co_await asio::async_connect(conn->socket, endpoints, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || deadline->expired || generation != _generation) co_return failure("cannot connect", ec);
    conn->socket.set_option(tcp::no_delay(true), ec);
    if (_options.tls) {
      // The handshake is bounded by the call's deadline like every other step (it closes the socket).
      conn->tls_context = _options.tls->current();
      conn->tls = std::make_unique<asio::ssl::stream<tcp::socket&>>(conn->socket, *conn->tls_context);
      if (!prepare_tls_client_connection(*_options.tls, conn->tls->native_handle(), to.host)) {
        co_return failure("TLS setup for " + to.host + ": " + openssl_error_reason("refused"), {});
      }
      co_await conn->tls->async_handshake(asio::ssl::stream_base::client,
                                          asio::redirect_error(asio::use_awaitable, ec));
      if (ec || deadline->expired || generation != _generation) {
        const std::string reason = ec ? openssl_error_reason(ec.message()) : std::string();
        co_return failure("TLS handshake with listener " + _options.tls->listener_name + " failed" +
                              (reason.empty() ? "" : ": " + reason),
                          {});
      }
    }
    if (_options.sasl) {
      auto refused = co_await authenticate(*conn, key, ec);
      if (deadline->expired || generation != _generation || (refused && ec)) {
        co_return failure(refused ? refused->message : std::string("SASL authentication"), ec);
      }
      if (refused) co_return finish(std::move(*refused));
    }
  }
  deadline->conn_owner = conn;
  deadline->socket = &conn->socket;

  std::string step;
  auto response = co_await exchange(*conn, api_key, api_version, request_header_version,
                                    response_header_version, body, step, ec);
  if (!response || deadline->expired) co_return failure(step, ec);
  co_return finish(std::move(*response));
}

asio::awaitable<std::optional<std::vector<uint8_t>>> peer_client::exchange(
    connection& conn, int16_t api_key, int16_t api_version, int16_t request_header_version,
    int16_t response_header_version, const std::vector<uint8_t>& body, std::string& step,
    std::error_code& ec) {
  const int32_t correlation_id = _next_correlation_id++;
  if (_next_correlation_id == INT32_MAX) _next_correlation_id = 1;
  std::vector<uint8_t> frame;
  {
    protocol::wire_writer w(frame);
    w.write_int32(0);  // size prefix, filled below
    protocol::request_header header{api_key, api_version, correlation_id, _client_id};
    protocol::encode_request_header(w, header, request_header_version);
    w.write_raw(body);
  }
  const auto size = static_cast<uint32_t>(frame.size() - 4);
  frame[0] = static_cast<uint8_t>(size >> 24);
  frame[1] = static_cast<uint8_t>(size >> 16);
  frame[2] = static_cast<uint8_t>(size >> 8);
  frame[3] = static_cast<uint8_t>(size);
  if (conn.tls) {
    co_await asio::async_write(*conn.tls, asio::buffer(frame), asio::redirect_error(asio::use_awaitable, ec));
  } else {
    co_await asio::async_write(conn.socket, asio::buffer(frame),
                               asio::redirect_error(asio::use_awaitable, ec));
  }
  if (ec) {
    step = "send failed";
    co_return std::nullopt;
  }

  uint8_t size_bytes[4];
  co_await read_exactly(conn, asio::buffer(size_bytes), ec);
  if (ec) {
    step = "connection closed before the response";
    co_return std::nullopt;
  }
  const int32_t response_size = read_be32(size_bytes);
  if (response_size < 4 || response_size > _options.max_response_bytes) {
    step = "response size " + std::to_string(response_size) + " outside 4.." +
           std::to_string(_options.max_response_bytes);
    co_return std::nullopt;
  }
  std::vector<uint8_t> response(static_cast<size_t>(response_size));
  co_await read_exactly(conn, asio::buffer(response), ec);
  if (ec) {
    step = "connection closed mid-response";
    co_return std::nullopt;
  }

  protocol::wire_reader r(response);
  const int32_t got_correlation_id = r.read_int32();
  if (got_correlation_id != correlation_id) {
    step = "response correlation id " + std::to_string(got_correlation_id) + " instead of " +
           std::to_string(correlation_id);
    co_return std::nullopt;
  }
  if (response_header_version >= 1) {
    const uint32_t tags = r.read_tag_count();
    for (uint32_t i = 0; i < tags && r.ok(); ++i) {
      r.read_uvarint();
      r.skip(r.read_uvarint());
    }
  }
  if (!r.ok()) {
    step = "malformed response header";
    co_return std::nullopt;
  }
  const size_t header_size = r.position();
  response.erase(response.begin(), response.begin() + static_cast<std::ptrdiff_t>(header_size));
  co_return response;
}

asio::awaitable<std::optional<status>> peer_client::authenticate(connection& conn, const std::string& to,
                                                                 std::error_code& ec) {
  const auto& credentials = *_options.sasl;
  const std::string where =
      "SASL " + credentials.mechanism + " to listener " + _options.listener_name + " at " + to;
  auto refused = [&](error_code code, std::string why) -> std::optional<status> {
    const auto now = std::chrono::steady_clock::now();
    if (!ec && now - _last_refusal_warning >= std::chrono::seconds(10)) {
      _last_refusal_warning = now;
      subsystem_logger("net")->warn("{}: {} (repeats are not logged for 10 s)", where, why);
    }
    return status::error(code, where + ": " + why);
  };
  std::string step;
  protocol::sasl_handshake_request handshake;
  handshake.mechanism = credentials.mechanism;
  std::vector<uint8_t> body;
  {
    protocol::wire_writer w(body);
    handshake.encode(w, 1);
  }
  auto answer = co_await exchange(conn, protocol::sasl_handshake_request::api_key, 1, 1, 0, body, step, ec);
  if (!answer) co_return refused(error_code::network_exception, "handshake: " + step);
  protocol::sasl_handshake_response handshake_response;
  {
    protocol::wire_reader r(*answer);
    if (handshake_response.decode(r, 1) != protocol::decode_status::ok) {
      co_return refused(error_code::network_exception, "malformed SaslHandshake response");
    }
  }
  if (handshake_response.error_code != 0) {
    std::string enabled;
    for (const auto& m : handshake_response.mechanisms) enabled += (enabled.empty() ? "" : ",") + m;
    co_return refused(error_code::unsupported_sasl_mechanism,
                      "the server refused the mechanism (error " +
                          std::to_string(handshake_response.error_code) + "); it enables [" + enabled + "]");
  }
  auto client = security::sasl_client::start(credentials);
  if (!client.ok()) co_return refused(error_code::sasl_authentication_failed, client.error().message);
  std::vector<uint8_t> message = client->first_message();
  // SCRAM takes two rounds, PLAIN one; a server asking for more is not speaking either.
  for (int round = 0; round < 4; ++round) {
    protocol::sasl_authenticate_request request;
    request.auth_bytes = std::move(message);
    body.clear();
    {
      protocol::wire_writer w(body);
      request.encode(w, 2);
    }
    answer = co_await exchange(conn, protocol::sasl_authenticate_request::api_key, 2, 2, 1, body, step, ec);
    if (!answer) co_return refused(error_code::network_exception, "authenticate: " + step);
    protocol::sasl_authenticate_response response;
    {
      protocol::wire_reader r(*answer);
      if (response.decode(r, 2) != protocol::decode_status::ok) {
        co_return refused(error_code::network_exception, "malformed SaslAuthenticate response");
      }
    }
    if (response.error_code != 0) {
      co_return refused(error_code::sasl_authentication_failed,
                        "the server refused (error " + std::to_string(response.error_code) +
                            (response.error_message ? ": " + *response.error_message : std::string()) + ")");
    }
    auto next = client->evaluate(response.auth_bytes);
    if (!next.ok()) co_return refused(error_code::sasl_authentication_failed, next.error().message);
    if (!next->has_value()) {
      if (response.session_lifetime_ms > 0) {
        conn.renew_at = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(response.session_lifetime_ms * 85 / 100);
      }
      co_return std::nullopt;
    }
    message = std::move(**next);
  }
  co_return refused(error_code::sasl_authentication_failed, "the exchange did not end");
}

}  // namespace mala::net
