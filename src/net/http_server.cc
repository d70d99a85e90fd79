#include "mala/net/http_server.h"

#include "listen_address.h"

#include <exception>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "mala/common/logging.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::net {

using asio::ip::tcp;

namespace {

// How long a request head may take to arrive (and an idle keep-alive connection may stay), and a response to
// be written.
constexpr auto io_timeout = std::chrono::seconds(30);
constexpr size_t max_connections = 64;

std::string_view reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

std::string encode_response(const http_response& response, bool keep_alive, bool with_body,
                            std::string_view extra_headers = {}) {
  std::string out =
      fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n{}\r\n",
                  response.status, reason_phrase(response.status), response.content_type,
                  response.body.size(), keep_alive ? "keep-alive" : "close", extra_headers);
  if (with_body) out += response.body;
  return out;
}

}  // namespace

// Closes a connection's socket once a deadline passes, unless disarmed (or re-armed) first. The timer's
// handler holds only weak references, and a deadline disarmed after its expiry was already queued closes
// nothing: a stale expiry must not close the socket under the connection's next request, nor touch a freed
// one.
class connection_deadline {
 public:
  connection_deadline(asio::io_context& context, const std::shared_ptr<tcp::socket>& socket)
      : _timer(context), _socket(socket), _generation(std::make_shared<uint64_t>(0)) {}
  ~connection_deadline() { _timer.cancel(); }

  void arm(std::chrono::steady_clock::duration after) {
    const uint64_t armed = ++*_generation;
    _timer.expires_after(after);
    _timer.async_wait(
        [socket = _socket, generation = std::weak_ptr<uint64_t>(_generation), armed](std::error_code ec) {
          if (ec) return;
          auto current = generation.lock();
          if (!current || *current != armed) return;
          if (auto s = socket.lock()) s->close(ec);
        });
  }
  void disarm() {
    ++*_generation;
    _timer.cancel();
  }

 private:
  asio::steady_timer _timer;
  std::weak_ptr<tcp::socket> _socket;
  std::shared_ptr<uint64_t> _generation;
};

struct http_server::impl : std::enable_shared_from_this<impl> {
  impl(asio::io_context& c, http_handler h) : context(c), handler(std::move(h)), accept_backoff(c) {}

  asio::io_context& context;
  http_handler handler;
  std::shared_ptr<spdlog::logger> log = subsystem_logger("net");
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::vector<uint16_t> ports;
  std::unordered_set<std::shared_ptr<tcp::socket>> connections;
  asio::steady_timer accept_backoff;
  size_t handlers_running = 0;
  bool stopped = false;

  asio::awaitable<void> accept_loop(tcp::acceptor& acceptor) {
    auto self = shared_from_this();
    while (!stopped) {
      std::error_code ec;
      auto socket = std::make_shared<tcp::socket>(context);
      co_await acceptor.async_accept(*socket, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (stopped || ec == asio::error::operation_aborted) co_return;
        // Out of descriptors (EMFILE) and the like: wait a little instead of spinning on the error.
        log->warn("metrics listener: accept failed: {}", ec.message());
        accept_backoff.expires_after(std::chrono::milliseconds(100));
        co_await accept_backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      if (connections.size() >= max_connections) {
        log->debug("metrics listener: {} connections open, closing a new one", connections.size());
        socket->close(ec);
        continue;
      }
      connections.insert(socket);
      asio::co_spawn(context, serve_guarded(socket), asio::detached);
    }
  }

  asio::awaitable<void> serve_guarded(std::shared_ptr<tcp::socket> socket) {
    auto self = shared_from_this();
    try {
      co_await serve(socket);
    } catch (const std::exception& e) {
      log->warn("metrics listener: connection closed: {}", e.what());
    } catch (...) {
      log->warn("metrics listener: connection closed after an unknown error");
    }
    std::error_code ec;
    socket->close(ec);
    connections.erase(socket);
  }

  // Writes `bytes` within io_timeout, else the deadline closes the connection (a client that does not read).
  asio::awaitable<void> send(tcp::socket& socket, connection_deadline& deadline, const std::string& bytes) {
    std::error_code ec;
    deadline.arm(io_timeout);
    co_await asio::async_write(socket, asio::buffer(bytes), asio::redirect_error(asio::use_awaitable, ec));
    deadline.disarm();
  }

  // Answers a request this server refuses and closes the connection the way RFC 9112 (9.6) asks: the sending
  // side first, then what the client still sends is read and dropped (at most 64 KiB, for at most 2 s), so
  // that closing with unread bytes does not reset the connection and lose the answer on the client's side.
  // (No temporaries inside the co_await expressions here: GCC 12 destroys some twice, GCC bug 99576.)
  asio::awaitable<void> refuse(tcp::socket& socket, connection_deadline& deadline, int status,
                               std::string_view body, std::string_view headers = {}) {
    http_response response{status, "text/plain; charset=utf-8", std::string(body)};
    const std::string bytes = encode_response(response, false, true, headers);
    co_await send(socket, deadline, bytes);
    co_await linger(socket, deadline);
  }

  asio::awaitable<void> linger(tcp::socket& socket, connection_deadline& deadline) {
    std::error_code ec;
    socket.shutdown(tcp::socket::shutdown_send, ec);
    deadline.arm(std::chrono::seconds(2));
    std::array<char, 4096> sink{};
    size_t drained = 0;
    while (!ec && drained < 65536) {
      drained +=
          co_await socket.async_read_some(asio::buffer(sink), asio::redirect_error(asio::use_awaitable, ec));
    }
    deadline.disarm();
  }

  asio::awaitable<void> serve(std::shared_ptr<tcp::socket> connection) {
    tcp::socket& socket = *connection;
    connection_deadline deadline(context, connection);
    std::string buffer;
    std::array<char, 2048> chunk{};
    while (!stopped) {
      size_t end = http_head_end(buffer);
      // A whole request head must arrive within io_timeout of the first wait for it (a client sending a byte
      // now and then does not keep the connection), and an idle keep-alive connection goes after as long.
      if (end == std::string::npos) deadline.arm(io_timeout);
      while (end == std::string::npos) {
        if (buffer.size() > http_max_head_bytes) {
          deadline.disarm();
          log->debug("metrics listener: request head over {} bytes", http_max_head_bytes);
          co_await refuse(socket, deadline, 431, "request head too large\n");
          co_return;
        }
        std::error_code ec;
        const size_t n = co_await socket.async_read_some(asio::buffer(chunk),
                                                         asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return;
        buffer.append(chunk.data(), n);
        end = http_head_end(buffer);
      }
      deadline.disarm();
      auto head = parse_http_request_head(std::string_view(buffer).substr(0, end));
      if (!head.ok()) {
        log->debug("metrics listener: bad request: {}", head.error().message);
        const std::string why = head.error().message + "\n";
        co_await refuse(socket, deadline, 400, why);
        co_return;
      }
      buffer.erase(0, end);
      // This server reads no request body: a request announcing one is answered and its connection closed.
      const bool keep_alive = head->keep_alive && head->content_length == 0;
      if (head->method != "GET" && head->method != "HEAD") {
        co_await refuse(socket, deadline, 405, "only GET and HEAD\n", "Allow: GET, HEAD\r\n");
        co_return;
      }
      struct running_handler {
        size_t& count;
        explicit running_handler(size_t& c) : count(c) { ++count; }
        ~running_handler() { --count; }
      };
      std::optional<running_handler> running(std::in_place, handlers_running);
      http_response response = co_await handler(*head);
      running.reset();
      if (stopped) co_return;
      const std::string bytes = encode_response(response, keep_alive, head->method == "GET");
      co_await send(socket, deadline, bytes);
      if (!keep_alive) {
        // A body this server did not read would reset the connection on close: drained as for a refusal.
        if (head->content_length > 0) co_await linger(socket, deadline);
        co_return;
      }
    }
  }
};

http_server::http_server(asio::io_context& context, http_handler handler)
    : _impl(std::make_shared<impl>(context, std::move(handler))) {}

http_server::~http_server() {
  stop();
}

status http_server::listen(const std::vector<http_endpoint>& endpoints) {
  for (const auto& ep : endpoints) {
    auto address = listen_address_for(_impl->context, ep.host, ep.port);
    if (!address.ok()) {
      return status::error(error_code::unknown_server_error, "metrics listener: " + address.error().message);
    }
    const tcp::endpoint bind_to = address->endpoint;
    auto acceptor = std::make_unique<tcp::acceptor>(_impl->context);
    std::error_code ec = open_acceptor(*acceptor, *address);
    if (!ec) acceptor->bind(bind_to, ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return status::error(
          error_code::unknown_server_error,
          fmt::format("metrics listener: cannot listen on {}:{}: {}", ep.host, ep.port, ec.message()));
    }
    const uint16_t port = acceptor->local_endpoint(ec).port();
    _impl->ports.push_back(port);
    _impl->log->info("metrics listener: serving /metrics, /health/live and /health/ready on http://{}:{}",
                     ep.host.empty() ? "*" : ep.host, port);
    asio::co_spawn(_impl->context, _impl->accept_loop(*acceptor), asio::detached);
    _impl->acceptors.push_back(std::move(acceptor));
  }
  return status::success();
}

uint16_t http_server::bound_port(size_t index) const {
  return index < _impl->ports.size() ? _impl->ports[index] : 0;
}

bool http_server::answering() const {
  return _impl->handlers_running > 0;
}

void http_server::stop() {
  if (_impl->stopped) return;
  _impl->stopped = true;
  _impl->accept_backoff.cancel();
  std::error_code ec;
  for (auto& a : _impl->acceptors) a->close(ec);
  for (const auto& s : _impl->connections) s->close(ec);
}

}  // namespace mala::net
