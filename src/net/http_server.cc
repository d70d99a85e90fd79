#include "mala/net/http_server.h"

#include "listen_address.h"

#include <exception>
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

constexpr auto idle_timeout = std::chrono::seconds(30);
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

struct http_server::impl : std::enable_shared_from_this<impl> {
  impl(asio::io_context& c, http_handler h) : context(c), handler(std::move(h)) {}

  asio::io_context& context;
  http_handler handler;
  std::shared_ptr<spdlog::logger> log = subsystem_logger("net");
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::vector<uint16_t> ports;
  std::unordered_set<std::shared_ptr<tcp::socket>> connections;
  bool stopped = false;

  asio::awaitable<void> accept_loop(tcp::acceptor& acceptor) {
    auto self = shared_from_this();
    while (!stopped) {
      std::error_code ec;
      auto socket = std::make_shared<tcp::socket>(context);
      co_await acceptor.async_accept(*socket, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (stopped || ec == asio::error::operation_aborted) co_return;
        log->warn("metrics listener: accept failed: {}", ec.message());
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
      co_await serve(*socket);
    } catch (const std::exception& e) {
      log->warn("metrics listener: connection closed: {}", e.what());
    }
    std::error_code ec;
    socket->close(ec);
    connections.erase(socket);
  }

  asio::awaitable<void> send(tcp::socket& socket, const std::string& bytes) {
    std::error_code ec;
    co_await asio::async_write(socket, asio::buffer(bytes), asio::redirect_error(asio::use_awaitable, ec));
  }

  // Answers a request this server refuses and closes the connection the way RFC 9112 (9.6) asks: the sending
  // side first, then what the client still sends is read and dropped (at most 64 KiB, for at most 2 s), so
  // that closing with unread bytes does not reset the connection and lose the answer on the client's side.
  // (No temporaries inside the co_await expressions here: GCC 12 destroys some twice, GCC bug 99576.)
  asio::awaitable<void> refuse(tcp::socket& socket, int status, std::string_view body,
                               std::string_view headers = {}) {
    http_response response{status, "text/plain; charset=utf-8", std::string(body)};
    const std::string bytes = encode_response(response, false, true, headers);
    co_await send(socket, bytes);
    co_await linger(socket);
  }

  asio::awaitable<void> linger(tcp::socket& socket) {
    std::error_code ec;
    socket.shutdown(tcp::socket::shutdown_send, ec);
    asio::steady_timer deadline(context);
    deadline.expires_after(std::chrono::seconds(2));
    deadline.async_wait([&socket](std::error_code e) {
      if (!e) socket.close(e);
    });
    std::array<char, 4096> sink{};
    size_t drained = 0;
    while (!ec && drained < 65536) {
      drained +=
          co_await socket.async_read_some(asio::buffer(sink), asio::redirect_error(asio::use_awaitable, ec));
    }
    deadline.cancel();
  }

  asio::awaitable<void> serve(tcp::socket& socket) {
    asio::steady_timer deadline(context);
    std::string buffer;
    std::array<char, 2048> chunk{};
    while (!stopped) {
      size_t end = http_head_end(buffer);
      while (end == std::string::npos) {
        if (buffer.size() > http_max_head_bytes) {
          log->debug("metrics listener: request head over {} bytes", http_max_head_bytes);
          co_await refuse(socket, 431, "request head too large\n");
          co_return;
        }
        // A client silent for idle_timeout loses its connection (the timer closes the socket under the read).
        deadline.expires_after(idle_timeout);
        deadline.async_wait([&socket](std::error_code ec) {
          if (!ec) socket.close(ec);
        });
        std::error_code ec;
        const size_t n = co_await socket.async_read_some(asio::buffer(chunk),
                                                         asio::redirect_error(asio::use_awaitable, ec));
        deadline.cancel();
        if (ec) co_return;
        buffer.append(chunk.data(), n);
        end = http_head_end(buffer);
      }
      auto head = parse_http_request_head(std::string_view(buffer).substr(0, end));
      if (!head.ok()) {
        log->debug("metrics listener: bad request: {}", head.error().message);
        const std::string why = head.error().message + "\n";
        co_await refuse(socket, 400, why);
        co_return;
      }
      buffer.erase(0, end);
      // This server reads no request body: a request announcing one is answered and its connection closed.
      const bool keep_alive = head->keep_alive && head->content_length == 0;
      if (head->method != "GET" && head->method != "HEAD") {
        co_await refuse(socket, 405, "only GET and HEAD\n", "Allow: GET, HEAD\r\n");
        co_return;
      }
      http_response response = co_await handler(*head);
      if (stopped) co_return;
      const std::string bytes = encode_response(response, keep_alive, head->method == "GET");
      co_await send(socket, bytes);
      if (!keep_alive) {
        // A body this server did not read would reset the connection on close: drained as for a refusal.
        if (head->content_length > 0) co_await linger(socket);
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

void http_server::stop() {
  if (_impl->stopped) return;
  _impl->stopped = true;
  std::error_code ec;
  for (auto& a : _impl->acceptors) a->close(ec);
  for (const auto& s : _impl->connections) s->close(ec);
}

}  // namespace mala::net
