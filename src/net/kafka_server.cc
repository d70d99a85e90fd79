#include "mala/net/kafka_server.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/v6_only.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "mala/common/logging.h"

namespace mala::net {

using asio::ip::tcp;

namespace {

status listener_error(std::string message) {
  return status::error(error_code::unknown_server_error, std::move(message));
}

std::string endpoint_text(const tcp::endpoint& ep) {
  std::error_code ec;
  auto addr = ep.address();
  if (addr.is_v6() && addr.to_v6().is_v4_mapped())
    addr = asio::ip::make_address_v4(asio::ip::v4_mapped, addr.to_v6());
  return addr.is_v6() ? "[" + addr.to_string() + "]:" + std::to_string(ep.port())
                      : addr.to_string() + ":" + std::to_string(ep.port());
}

// State shared by a connection's reader coroutine and its idle watchdog; both run on the connection's shard.
struct connection_state {
  explicit connection_state(tcp::socket s) : socket(std::move(s)), idle_timer(socket.get_executor()) {}
  tcp::socket socket;
  asio::steady_timer idle_timer;
  std::chrono::steady_clock::time_point last_activity = std::chrono::steady_clock::now();
  bool closed = false;
  connection_info info;

  void close() {
    if (closed) return;
    closed = true;
    std::error_code ec;
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
    idle_timer.cancel();
  }
};

// Why a response could not be sent whole. A socket failure (peer gone, reset) ends the connection quietly;
// a file failure is logged.
struct send_failure {
  enum class kind : uint8_t { none, socket, file };
  kind what = kind::none;
  std::string reason;

  bool failed() const { return what != kind::none; }
  static send_failure socket(std::string reason) { return {kind::socket, std::move(reason)}; }
  static send_failure file(std::string reason) { return {kind::file, std::move(reason)}; }
};

// TCP_CORK while a response of several pieces goes out, so that the small buffers between file ranges (the
// partition headers of a Fetch response) share segments with the records instead of leaving as tiny packets
// (the sockets have TCP_NODELAY); uncorking sends what is left at once.
class tcp_cork {
 public:
  explicit tcp_cork(tcp::socket& socket) : _socket(socket) { set(1); }
  ~tcp_cork() { set(0); }
  tcp_cork(const tcp_cork&) = delete;
  tcp_cork& operator=(const tcp_cork&) = delete;

 private:
  // The idle watchdog may have closed the socket meanwhile; its descriptor number may belong to another now.
  void set(int on) const {
    if (_socket.is_open())
      (void)::setsockopt(_socket.native_handle(), IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
  }
  tcp::socket& _socket;
};

// One gather write of the buffers collected so far (size prefix, memory pieces).
asio::awaitable<send_failure> write_buffers(tcp::socket& socket, std::vector<asio::const_buffer>& buffers) {
  if (buffers.empty()) co_return send_failure{};
  std::error_code ec;
  co_await asio::async_write(socket, buffers, asio::redirect_error(asio::use_awaitable, ec));
  buffers.clear();
  if (ec) co_return send_failure::socket(ec.message());
  co_return send_failure{};
}

// Sends a file range with sendfile(2) on the non-blocking socket: a partial send continues where it stopped,
// EAGAIN waits until the socket is writable. The size prefix and the records' length are already out, so the
// range must go whole: like Kafka's FileRecords.writeTo ("has been truncated during write"), a file now
// shorter than the range (truncated since the fetch read it) fails, and the connection is closed rather than
// padded; the client retries the fetch on a new connection.
asio::awaitable<send_failure> send_file(tcp::socket& socket, const file_range& range) {
  if (range.size == 0) co_return send_failure{};
  struct stat st {};
  if (::fstat(range.fd, &st) != 0)
    co_return send_failure::file(std::string("fstat: ") + std::strerror(errno));
  const int64_t end = range.offset + static_cast<int64_t>(range.size);
  if (st.st_size < end) {
    co_return send_failure::file("file range " + std::to_string(range.offset) + ".." + std::to_string(end) +
                                 " is past the end of its file (" + std::to_string(st.st_size) +
                                 " bytes): truncated since the fetch read it");
  }
  off_t offset = static_cast<off_t>(range.offset);
  size_t left = range.size;
  while (left > 0) {
    const ssize_t n = ::sendfile(socket.native_handle(), range.fd, &offset, left);
    if (n > 0) {
      left -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      co_return send_failure::file("file ended at " + std::to_string(offset) + " while sending up to " +
                                   std::to_string(end) + ": truncated during the send");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      std::error_code ec;
      co_await socket.async_wait(tcp::socket::wait_write, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return send_failure::socket(ec.message());
      continue;
    }
    const int err = errno;
    // Errors of the output side are the peer's doing; others (EIO reading the file) are the file's.
    if (err == EPIPE || err == ECONNRESET || err == ENOTCONN)
      co_return send_failure::socket(std::strerror(err));
    co_return send_failure::file(std::string("sendfile: ") + std::strerror(err));
  }
  co_return send_failure{};
}

// Writes a size-prefixed response: one gather write for a plain response; for a response with file ranges,
// the memory pieces between them gathered and the ranges sent with sendfile.
asio::awaitable<send_failure> send_response(tcp::socket& socket, const dispatch_result& result) {
  const size_t size = result.response_size();
  if (size > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    co_return send_failure::file("response of " + std::to_string(size) + " bytes does not fit a size prefix");
  }
  const auto n = static_cast<uint32_t>(size);
  const uint8_t prefix[4] = {static_cast<uint8_t>(n >> 24), static_cast<uint8_t>(n >> 16),
                             static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)};
  std::vector<asio::const_buffer> pending{asio::buffer(prefix)};
  if (result.pieces.empty()) {
    pending.push_back(asio::buffer(result.response));
    co_return co_await write_buffers(socket, pending);
  }
  tcp_cork cork(socket);
  for (const auto& piece : result.pieces) {
    if (const auto* bytes = std::get_if<std::vector<uint8_t>>(&piece)) {
      pending.push_back(asio::buffer(*bytes));
      continue;
    }
    if (auto failure = co_await write_buffers(socket, pending); failure.failed()) co_return failure;
    if (auto failure = co_await send_file(socket, std::get<file_range>(piece)); failure.failed()) {
      co_return failure;
    }
  }
  co_return co_await write_buffers(socket, pending);
}

}  // namespace

struct kafka_server::impl {
  impl(shard_pool& s, request_dispatcher& d, server_limits l) : shards(s), dispatcher(d), limits(l) {}

  shard_pool& shards;
  request_dispatcher& dispatcher;
  server_limits limits;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;  // accepting
  struct bound_acceptor {
    std::unique_ptr<tcp::acceptor> acceptor;
    std::string listener_name;
    tcp::endpoint endpoint;
  };
  std::vector<bound_acceptor> idle;  // bound, refusing connections until start()
  bool stopped = false;
  std::map<std::string, uint16_t> bound_ports;
  std::atomic<uint64_t> next_connection_id{1};
  std::atomic<size_t> next_shard{0};
  std::shared_ptr<spdlog::logger> log = subsystem_logger("net");

  asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, std::string listener_name) {
    for (;;) {
      const size_t shard = next_shard.fetch_add(1) % shards.size();
      std::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(shards.context(shard),
                                                          asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
        log->warn("accept on listener {} failed: {}", listener_name, ec.message());
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      if (limits.send_buffer_bytes != -1)
        socket.set_option(asio::socket_base::send_buffer_size(limits.send_buffer_bytes), ec);
      // File ranges of responses go out with sendfile(2) straight on the descriptor, which must not block the
      // shard (asio's own operations work the same in this mode).
      socket.native_non_blocking(true, ec);
      const bool zero_copy = !ec;
      auto state = std::make_shared<connection_state>(std::move(socket));
      state->info.id = next_connection_id.fetch_add(1);
      state->info.shard = shard;
      state->info.listener_name = listener_name;
      // Every listener is plaintext for now; a TLS listener will leave this false (the copy path).
      state->info.zero_copy = zero_copy;
      auto remote = state->socket.remote_endpoint(ec);
      state->info.peer = ec ? "unknown" : endpoint_text(remote);
      asio::co_spawn(shards.context(shard), serve_connection(state), asio::detached);
      if (limits.connections_max_idle_ms > 0) {
        asio::co_spawn(shards.context(shard), idle_watchdog(state), asio::detached);
      }
    }
  }

  asio::awaitable<void> idle_watchdog(std::shared_ptr<connection_state> state) {
    const auto max_idle = std::chrono::milliseconds(limits.connections_max_idle_ms);
    while (!state->closed) {
      const auto deadline = state->last_activity + max_idle;
      if (std::chrono::steady_clock::now() >= deadline) {
        log->info("closing connection {} from {}: idle for more than connections.max.idle.ms={}",
                  state->info.id, state->info.peer, limits.connections_max_idle_ms);
        state->close();
        co_return;
      }
      state->idle_timer.expires_at(deadline);
      std::error_code ec;
      co_await state->idle_timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }

  asio::awaitable<void> serve_connection(std::shared_ptr<connection_state> state) {
    auto& socket = state->socket;
    log->debug("connection {} from {} on listener {} (shard {})", state->info.id, state->info.peer,
               state->info.listener_name, state->info.shard);
    std::vector<uint8_t> frame;
    for (;;) {
      uint8_t size_bytes[4];
      std::error_code ec;
      co_await asio::async_read(socket, asio::buffer(size_bytes),
                                asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;  // peer closed, idle timeout or shutdown
      state->last_activity = std::chrono::steady_clock::now();
      const int32_t size =
          static_cast<int32_t>((uint32_t{size_bytes[0]} << 24) | (uint32_t{size_bytes[1]} << 16) |
                               (uint32_t{size_bytes[2]} << 8) | uint32_t{size_bytes[3]});
      if (size < 0 || size > limits.socket_request_max_bytes) {
        log->warn("closing connection {} from {}: request size {} is outside 0..socket.request.max.bytes={}",
                  state->info.id, state->info.peer, size, limits.socket_request_max_bytes);
        break;
      }
      frame.resize(static_cast<size_t>(size));
      co_await asio::async_read(socket, asio::buffer(frame), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (ec != asio::error::eof && ec != asio::error::operation_aborted) {
          log->info("connection {} from {}: read failed mid-request: {}", state->info.id, state->info.peer,
                    ec.message());
        } else if (ec == asio::error::eof) {
          log->info("connection {} from {} closed mid-request ({} of {} bytes missing)", state->info.id,
                    state->info.peer, size, size);
        }
        break;
      }
      state->last_activity = std::chrono::steady_clock::now();
      dispatch_result result = co_await dispatcher.dispatch(state->info, frame);
      if (result.what == dispatch_result::action::close) {
        log->log(result.logged ? spdlog::level::debug : spdlog::level::warn,
                 "closing connection {} from {}: {}", state->info.id, state->info.peer, result.close_reason);
        break;
      }
      if (result.what == dispatch_result::action::no_response) continue;
      const send_failure failure = co_await send_response(socket, result);
      if (failure.what == send_failure::kind::file) {
        log->warn("closing connection {} from {}: response not sent whole: {}", state->info.id,
                  state->info.peer, failure.reason);
      }
      if (failure.failed()) break;
      state->last_activity = std::chrono::steady_clock::now();
    }
    state->close();
  }
};

kafka_server::kafka_server(shard_pool& shards, request_dispatcher& dispatcher, server_limits limits)
    : _impl(std::make_unique<impl>(shards, dispatcher, limits)) {}

kafka_server::~kafka_server() = default;

status kafka_server::listen(const std::vector<listen_endpoint>& endpoints) {
  if (auto st = bind(endpoints); !st.ok()) return st;
  return start();
}

status kafka_server::bind(const std::vector<listen_endpoint>& endpoints) {
  auto& ctx = _impl->shards.context(0);
  for (const auto& ep : endpoints) {
    std::error_code ec;
    tcp::endpoint bind_to;
    bool dual_stack = false;
    if (ep.host.empty() || ep.host == "::" || ep.host == "[::]") {
      bind_to = tcp::endpoint(tcp::v6(), ep.port);
      dual_stack = true;
    } else if (ep.host == "0.0.0.0") {
      bind_to = tcp::endpoint(tcp::v4(), ep.port);
    } else {
      tcp::resolver resolver(ctx);
      auto results = resolver.resolve(ep.host, std::to_string(ep.port), ec);
      if (ec || results.empty()) {
        return listener_error("listener " + ep.listener_name + ": cannot resolve host '" + ep.host +
                              "': " + ec.message());
      }
      bind_to = results.begin()->endpoint();
    }
    auto acceptor = std::make_unique<tcp::acceptor>(ctx);
    acceptor->open(bind_to.protocol(), ec);
    if (!ec && dual_stack) acceptor->set_option(asio::ip::v6_only(false), ec);
    if (!ec) acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
    // Set before listen so that the TCP window scale accepted sockets announce fits the buffer (Kafka does
    // the same on its server socket).
    if (!ec && _impl->limits.receive_buffer_bytes != -1) {
      acceptor->set_option(asio::socket_base::receive_buffer_size(_impl->limits.receive_buffer_bytes), ec);
    }
    if (!ec) acceptor->bind(bind_to, ec);
    if (ec) {
      return listener_error("listener " + ep.listener_name + ": cannot listen on " + endpoint_text(bind_to) +
                            ": " + ec.message());
    }
    const uint16_t port = acceptor->local_endpoint(ec).port();
    _impl->bound_ports[ep.listener_name] = port;
    _impl->idle.push_back({std::move(acceptor), ep.listener_name, tcp::endpoint(bind_to.address(), port)});
  }
  return status::success();
}

status kafka_server::start() {
  if (_impl->stopped)
    return status::success();  // a late start() (a heartbeat answered during shutdown) opens nothing
  auto& ctx = _impl->shards.context(0);
  auto idle = std::move(_impl->idle);
  _impl->idle.clear();
  for (auto& b : idle) {
    std::error_code ec;
    b.acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return listener_error("listener " + b.listener_name + ": cannot listen on " +
                            endpoint_text(b.endpoint) + ": " + ec.message());
    _impl->log->info("listening on {} ({})", endpoint_text(b.endpoint), b.listener_name);
    asio::co_spawn(ctx, _impl->accept_loop(*b.acceptor, b.listener_name), asio::detached);
    _impl->acceptors.push_back(std::move(b.acceptor));
  }
  return status::success();
}

void kafka_server::stop() {
  _impl->stopped = true;
  for (auto& a : _impl->acceptors) {
    std::error_code ec;
    a->close(ec);
  }
  for (auto& b : _impl->idle) {
    std::error_code ec;
    b.acceptor->close(ec);
  }
}

uint16_t kafka_server::bound_port(const std::string& listener_name) const {
  auto it = _impl->bound_ports.find(listener_name);
  return it == _impl->bound_ports.end() ? 0 : it->second;
}

}  // namespace mala::net
