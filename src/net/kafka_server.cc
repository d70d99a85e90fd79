#include "mala/net/kafka_server.h"

#include "listen_address.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/ssl/stream.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "mala/common/logging.h"
#include "mala/net/request_meter.h"
#include "mala/net/tls.h"

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

// A wake-up for a coroutine of a connection waiting for the state to change (room to read, a response
// ready): wait() sleeps until notify() or close(); the waiter checks the state again when woken. Everything
// runs on the connection's shard, so a state checked right before wait() cannot change before it sleeps.
class connection_signal {
 public:
  explicit connection_signal(const asio::any_io_executor& executor) : _timer(executor) {}

  asio::awaitable<void> wait() {
    _timer.expires_at(asio::steady_timer::time_point::max());
    std::error_code ec;
    co_await _timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  void notify() { _timer.cancel(); }

 private:
  asio::steady_timer _timer;
};

// One request of a connection, from its frame read to its response written. The frame is the request's own
// buffer, lent to the dispatcher.
struct pipelined_request {
  std::vector<uint8_t> frame;
  ordering_point order;
  bool started = false;
  std::optional<dispatch_result> result;  // once the dispatch completed
};

// State shared by a connection's reader, its writer, its requests' dispatches and its idle watchdog; all run
// on the connection's shard.
struct connection_state : std::enable_shared_from_this<connection_state> {
  explicit connection_state(tcp::socket s)
      : socket(std::move(s)),
        idle_timer(socket.get_executor()),
        read_throttle_timer(socket.get_executor()),
        start_throttle_timer(socket.get_executor()),
        room_to_read(socket.get_executor()),
        response_ready(socket.get_executor()) {}
  tcp::socket socket;
  // On an SSL listener: the TLS session over `socket` (declared after it, so destroyed first), and the
  // listener's context. Reads and writes then go through it; the plaintext path uses `socket` directly.
  std::shared_ptr<tls_listener_context> tls_listener;
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;
  asio::steady_timer idle_timer;
  // KIP-219 mute (connection_info::throttled_until): the reader sleeps on the first, start_next's wake-up on
  // the second.
  asio::steady_timer read_throttle_timer;
  asio::steady_timer start_throttle_timer;
  bool start_wake_armed = false;
  connection_signal room_to_read;    // the reader waits for responses to drain (queued.max.request*)
  connection_signal response_ready;  // the writer waits for the oldest request's dispatch
  std::chrono::steady_clock::time_point last_activity = std::chrono::steady_clock::now();
  bool closed = false;
  bool reading_done = false;  // the reader stopped: the writer answers what was read, then closes
  bool closing = false;       // a request's result closes the connection: no later request starts
  connection_info info;
  // Read and not yet answered, in request order; their frames' bytes in `queued_bytes`.
  std::deque<std::shared_ptr<pipelined_request>> requests;
  size_t queued_bytes = 0;

  void close() {
    if (closed) return;
    closed = true;
    std::error_code ec;
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
    idle_timer.cancel();
    read_throttle_timer.cancel();
    start_throttle_timer.cancel();
    room_to_read.notify();
    response_ready.notify();
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

// Writes a size-prefixed response over TLS. Responses come materialised (connection_info::zero_copy is false
// on TLS connections: sendfile would bypass the encryption); a response with file ranges anyway is copied.
asio::awaitable<send_failure> send_response_tls(asio::ssl::stream<tcp::socket&>& stream,
                                                const dispatch_result& result) {
  std::optional<dispatch_result> copy;
  if (!result.pieces.empty()) {
    copy = result;
    if (auto st = copy->materialize(); !st.ok()) co_return send_failure::file(st.message);
  }
  const std::vector<uint8_t>& body = copy ? copy->response : result.response;
  if (body.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    co_return send_failure::file("response of " + std::to_string(body.size()) +
                                 " bytes does not fit a size prefix");
  }
  const auto n = static_cast<uint32_t>(body.size());
  const uint8_t prefix[4] = {static_cast<uint8_t>(n >> 24), static_cast<uint8_t>(n >> 16),
                             static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)};
  std::error_code ec;
  // asio's TLS stream encrypts each buffer of a sequence as its own record: a small response is joined with
  // its size prefix into one record (one segment on the wire, the sockets have TCP_NODELAY); a large one is
  // corked instead of copied, so the prefix's record shares a segment with the body.
  if (body.size() <= 16 * 1024) {
    std::vector<uint8_t> joined;
    joined.reserve(sizeof(prefix) + body.size());
    joined.insert(joined.end(), prefix, prefix + sizeof(prefix));
    joined.insert(joined.end(), body.begin(), body.end());
    co_await asio::async_write(stream, asio::buffer(joined), asio::redirect_error(asio::use_awaitable, ec));
  } else {
    tcp_cork cork(stream.next_layer());
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(prefix), asio::buffer(body)};
    co_await asio::async_write(stream, buffers, asio::redirect_error(asio::use_awaitable, ec));
  }
  if (ec) co_return send_failure::socket(ec.message());
  co_return send_failure{};
}

// Why a TLS handshake failed, for its log line: OpenSSL's reason, and the certificate verification's when
// that is what failed (an untrusted or expired client certificate).
std::string handshake_failure_reason(const std::error_code& ec, SSL* ssl) {
  std::string reason = ec.message();
  if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
    reason = "the peer closed the connection";
  }
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK)
    reason += " (certificate verification: " + std::string(X509_verify_cert_error_string(verify)) + ")";
  return reason;
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
    security_protocol protocol = security_protocol::plaintext;
    tcp::endpoint endpoint;
  };
  std::vector<bound_acceptor> idle;  // bound, refusing connections until start()
  bool stopped = false;
  std::map<std::string, uint16_t> bound_ports;
  std::atomic<uint64_t> next_connection_id{1};
  // The server context of each SSL listener, replaced by reload_tls; a connection keeps the one it was
  // accepted with.
  std::mutex tls_mutex;
  std::map<std::string, std::shared_ptr<tls_listener_context>> tls_contexts;

  std::shared_ptr<tls_listener_context> current_tls(const std::string& listener_name) {
    std::lock_guard lock(tls_mutex);
    auto it = tls_contexts.find(listener_name);
    return it == tls_contexts.end() ? nullptr : it->second;
  }
  std::atomic<size_t> next_shard{0};
  std::shared_ptr<spdlog::logger> log = subsystem_logger("net");

  asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, std::string listener_name,
                                    security_protocol protocol) {
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
      state->info.protocol = protocol;
      auto tls = protocol == security_protocol::ssl || protocol == security_protocol::sasl_ssl
                     ? current_tls(listener_name)
                     : nullptr;
      // sendfile(2) would bypass TLS: TLS connections take the copy path.
      state->info.zero_copy = zero_copy && !tls;
      if (tls) {
        state->tls_listener = tls;
        state->tls = std::make_unique<asio::ssl::stream<tcp::socket&>>(state->socket, tls->context);
      }
      if (protocol == security_protocol::sasl_plaintext || protocol == security_protocol::sasl_ssl) {
        state->info.max_receive_bytes = limits.sasl_max_receive_bytes;
      }
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
    log->debug("connection {} from {} on listener {} (shard {})", state->info.id, state->info.peer,
               state->info.listener_name, state->info.shard);
    if (state->tls) {
      // Not `tls && !co_await ...`: GCC miscompiles a co_await in a short-circuit operand.
      const bool established = co_await tls_handshake(state);
      if (!established) {
        state->close();
        co_return;
      }
    }
    asio::co_spawn(state->socket.get_executor(), write_responses(state), asio::detached);
    co_await read_requests(state);
    state->reading_done = true;
    state->response_ready.notify();
  }

  // The server side of the TLS handshake, bounded by limits.tls_handshake_timeout_ms; then the client's
  // principal from its certificate. A failure is one log line (peer, listener, OpenSSL's reason) and false.
  asio::awaitable<bool> tls_handshake(std::shared_ptr<connection_state> state) {
    asio::steady_timer deadline(state->socket.get_executor());
    // Shared with the deadline's handler, which may run after this frame is gone (it expired just as the
    // handshake completed).
    struct handshake_progress {
      bool done = false;
      bool timed_out = false;
    };
    auto progress = std::make_shared<handshake_progress>();
    deadline.expires_after(std::chrono::milliseconds(limits.tls_handshake_timeout_ms));
    auto on_deadline = [state, progress](std::error_code ec) {
      if (ec || progress->done) return;  // the handshake ended first
      progress->timed_out = true;
      state->close();
    };
    deadline.async_wait(on_deadline);
    std::error_code ec;
    co_await state->tls->async_handshake(asio::ssl::stream_base::server,
                                         asio::redirect_error(asio::use_awaitable, ec));
    progress->done = true;
    deadline.cancel();
    SSL* ssl = state->tls->native_handle();
    if (progress->timed_out || ec || state->closed) {
      const std::string reason =
          progress->timed_out
              ? "not completed within " + std::to_string(limits.tls_handshake_timeout_ms) + " ms"
              : handshake_failure_reason(ec, ssl);
      log->info("closing connection {} from {} on listener {}: TLS handshake failed: {}", state->info.id,
                state->info.peer, state->info.listener_name, reason);
      co_return false;
    }
    state->last_activity = std::chrono::steady_clock::now();
    // SASL_SSL: the principal is the one SASL authenticates (Kafka's SaslServerAuthenticator), not the
    // certificate's.
    if (state->info.protocol == security_protocol::sasl_ssl) {
      log->debug("connection {} from {} on listener {}: TLS {} {}, SASL to follow", state->info.id,
                 state->info.peer, state->info.listener_name, SSL_get_version(ssl), SSL_get_cipher_name(ssl));
      co_return true;
    }
    std::string dn;
    auto principal = tls_peer_principal(*state->tls_listener, ssl, dn);
    if (!principal) {
      log->info(
          "closing connection {} from {} on listener {}: no ssl.principal.mapping.rules rule applies to "
          "the client certificate's subject '{}'",
          state->info.id, state->info.peer, state->info.listener_name, dn);
      co_return false;
    }
    state->info.principal_type = "User";
    state->info.principal_name = std::move(*principal);
    state->last_activity = std::chrono::steady_clock::now();
    log->debug("connection {} from {} on listener {}: TLS {} {}, principal User:{}{}", state->info.id,
               state->info.peer, state->info.listener_name, SSL_get_version(ssl), SSL_get_cipher_name(ssl),
               state->info.principal_name, dn.empty() ? "" : " (subject " + dn + ")");
    co_return true;
  }

  // Whether one more request of `size` bytes may be read: within queued.max.requests, and within
  // queued.max.request.bytes unless nothing is in flight (a request larger than the bound is served alone).
  bool room_for(const connection_state& state, size_t size) const {
    if (state.requests.size() >= static_cast<size_t>(std::max(limits.queued_max_requests, 1))) return false;
    if (limits.queued_max_request_bytes < 0 || state.requests.empty()) return true;
    return state.queued_bytes + size <= static_cast<size_t>(limits.queued_max_request_bytes);
  }

  // Reads frames while there is room, queues them in request order and starts those whose turn it is. Returns
  // when the peer closes, on a framing error, or when the connection is closed.
  asio::awaitable<void> read_requests(std::shared_ptr<connection_state> state) {
    auto& socket = state->socket;
    for (;;) {
      while (!state->closed && !room_for(*state, 0)) co_await state->room_to_read.wait();
      // A throttled connection is muted (KIP-219): nothing more is read until the throttle time passed, so
      // the client's further requests wait in its socket (Kafka mutes the channel the same way).
      while (!state->closed && state->info.throttled()) {
        state->read_throttle_timer.expires_at(state->info.throttled_until);
        std::error_code wait_ec;
        co_await state->read_throttle_timer.async_wait(asio::redirect_error(asio::use_awaitable, wait_ec));
      }
      if (state->closed) co_return;
      uint8_t size_bytes[4];
      std::error_code ec;
      if (state->tls) {
        co_await asio::async_read(*state->tls, asio::buffer(size_bytes),
                                  asio::redirect_error(asio::use_awaitable, ec));
      } else {
        co_await asio::async_read(socket, asio::buffer(size_bytes),
                                  asio::redirect_error(asio::use_awaitable, ec));
      }
      if (ec) co_return;  // peer closed, idle timeout or shutdown
      state->last_activity = std::chrono::steady_clock::now();
      const int32_t size =
          static_cast<int32_t>((uint32_t{size_bytes[0]} << 24) | (uint32_t{size_bytes[1]} << 16) |
                               (uint32_t{size_bytes[2]} << 8) | uint32_t{size_bytes[3]});
      if (size < 0 || size > limits.socket_request_max_bytes) {
        // A TLS record header (handshake, version 3.x) where a size is expected: a TLS client on a
        // plaintext listener.
        const bool tls_hello = !state->tls && size_bytes[0] == 0x16 && size_bytes[1] == 0x03;
        log->warn(
            "closing connection {} from {} on listener {}: request size {} is outside "
            "0..socket.request.max.bytes={}{}",
            state->info.id, state->info.peer, state->info.listener_name, size,
            limits.socket_request_max_bytes,
            tls_hello ? " (a TLS handshake: the client speaks TLS to a plaintext listener)" : "");
        co_return;
      }
      if (state->info.max_receive_bytes > 0 && size > state->info.max_receive_bytes) {
        log->warn(
            "closing connection {} from {}: request size {} during SASL authentication is larger than "
            "sasl.server.max.receive.size={} (Kafka: invalid receive size)",
            state->info.id, state->info.peer, size, state->info.max_receive_bytes);
        co_return;
      }
      // The frame stays in the socket (and the client's send buffer) until the requests in flight leave
      // room for it.
      while (!state->closed && !room_for(*state, static_cast<size_t>(size))) {
        co_await state->room_to_read.wait();
      }
      if (state->closed) co_return;
      auto request = std::make_shared<pipelined_request>();
      request->frame.resize(static_cast<size_t>(size));
      if (state->tls) {
        co_await asio::async_read(*state->tls, asio::buffer(request->frame),
                                  asio::redirect_error(asio::use_awaitable, ec));
      } else {
        co_await asio::async_read(socket, asio::buffer(request->frame),
                                  asio::redirect_error(asio::use_awaitable, ec));
      }
      if (ec) {
        if (ec != asio::error::eof && ec != asio::error::operation_aborted) {
          log->info("connection {} from {}: read failed mid-request: {}", state->info.id, state->info.peer,
                    ec.message());
        } else if (ec == asio::error::eof) {
          log->info("connection {} from {} closed mid-request ({} bytes expected)", state->info.id,
                    state->info.peer, size);
        }
        co_return;
      }
      state->last_activity = std::chrono::steady_clock::now();
      state->queued_bytes += request->frame.size();
      state->requests.push_back(std::move(request));
      start_next(*state);
    }
  }

  // Starts the oldest request not started yet, if every request before it has released its ordering point
  // (Kafka serves a connection's requests one at a time; see net::ordering_point).
  void start_next(connection_state& state) {
    for (auto& request : state.requests) {
      if (request->started) {
        if (!request->order.released()) return;
        continue;
      }
      if (state.closed || state.closing) return;
      if (state.info.throttled()) {
        // Read before the throttle began: it starts once the throttle time passed, as Kafka would have read
        // it only then.
        wake_after_throttle(state);
        return;
      }
      request->started = true;
      // Released by the dispatch, which holds the state: the raw pointer cannot dangle.
      request->order = ordering_point([this, s = &state] { start_next(*s); });
      // Posted, not run inline: a dispatch that completes at once would otherwise start the next one from
      // inside its own release, one stack frame deeper each time.
      // On a metered executor when a request quota may apply: the request's own thread time is what request
      // quotas charge (net/request_meter.h).
      asio::post(state.socket.get_executor(), [this, s = state.shared_from_this(), request] {
        if (!dispatcher.wants_request_meter(s->info)) {
          asio::co_spawn(s->socket.get_executor(), run_request(s, request), asio::detached);
          return;
        }
        auto meter = std::make_shared<request_meter>();
        const auto& executor = s->socket.get_executor();
        // The shard's own executor wrapped, not the socket's type-erased one: one dispatch per resumption.
        if (const auto* own = executor.target<asio::io_context::executor_type>()) {
          asio::co_spawn(metered_executor(*own, std::move(meter)), run_request(s, request), asio::detached);
        } else {
          asio::co_spawn(metered_executor(executor, std::move(meter)), run_request(s, request),
                         asio::detached);
        }
      });
      return;
    }
  }

  void wake_after_throttle(connection_state& state) {
    if (state.start_wake_armed) return;
    state.start_wake_armed = true;
    state.start_throttle_timer.expires_at(state.info.throttled_until);
    state.start_throttle_timer.async_wait([this, s = state.shared_from_this()](const std::error_code&) {
      s->start_wake_armed = false;
      if (!s->closed) start_next(*s);
    });
  }

  asio::awaitable<void> run_request(std::shared_ptr<connection_state> state,
                                    std::shared_ptr<pipelined_request> request) {
    dispatch_result result = co_await dispatcher.dispatch(state->info, request->frame, request->order);
    if (result.what == dispatch_result::action::close || result.close_after_response) state->closing = true;
    request->result = std::move(result);
    request->order.release();
    state->response_ready.notify();
  }

  static asio::awaitable<send_failure> send(connection_state& state, const dispatch_result& result) {
    if (state.tls) co_return co_await send_response_tls(*state.tls, result);
    co_return co_await send_response(state.socket, result);
  }

  // Writes the responses in request order as their dispatches complete; closes the connection when a result
  // says so, a send fails, or the reader stopped and everything read is answered.
  asio::awaitable<void> write_responses(std::shared_ptr<connection_state> state) {
    while (!state->closed) {
      if (state->requests.empty() || !state->requests.front()->result) {
        if (state->requests.empty() && state->reading_done) break;
        co_await state->response_ready.wait();
        continue;
      }
      const std::shared_ptr<pipelined_request> request = state->requests.front();
      const dispatch_result& result = *request->result;
      if (result.what == dispatch_result::action::close) {
        log->log(result.logged ? spdlog::level::debug : spdlog::level::warn,
                 "closing connection {} from {}: {}", state->info.id, state->info.peer, result.close_reason);
        break;
      }
      if (result.what == dispatch_result::action::respond) {
        send_failure failure;
        if (result.record_send_time) {
          // Charged to the client's request quota: sent on a metered executor (as start_next runs the
          // request), its thread time handed back.
          auto meter = std::make_shared<request_meter>();
          const auto& executor = state->socket.get_executor();
          if (const auto* own = executor.target<asio::io_context::executor_type>()) {
            failure = co_await asio::co_spawn(metered_executor(*own, meter), send(*state, result),
                                              asio::use_awaitable);
          } else {
            failure = co_await asio::co_spawn(metered_executor(executor, meter), send(*state, result),
                                              asio::use_awaitable);
          }
          result.record_send_time(meter->elapsed_ns());
        } else {
          failure = co_await send(*state, result);
        }
        if (failure.what == send_failure::kind::file) {
          log->warn("closing connection {} from {}: response not sent whole: {}", state->info.id,
                    state->info.peer, failure.reason);
        }
        if (failure.failed()) break;
        state->last_activity = std::chrono::steady_clock::now();
        if (result.close_after_response) {
          log->log(result.logged ? spdlog::level::debug : spdlog::level::info,
                   "closing connection {} from {} after its response: {}", state->info.id, state->info.peer,
                   result.close_reason);
          break;
        }
      }
      state->requests.pop_front();
      state->queued_bytes -= request->frame.size();
      state->room_to_read.notify();
    }
    state->close();
    // Requests not started never will be; the ones running hold what they need.
    state->requests.clear();
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
    std::shared_ptr<tls_listener_context> tls;
    if (ep.protocol == security_protocol::ssl || ep.protocol == security_protocol::sasl_ssl) {
      if (!ep.tls) return listener_error("listener " + ep.listener_name + ": SSL without TLS settings");
      auto context = make_tls_listener_context(*ep.tls);
      if (!context.ok()) return context.error();
      tls = std::move(*context);
    } else if (ep.protocol != security_protocol::plaintext &&
               ep.protocol != security_protocol::sasl_plaintext) {
      return listener_error("listener " + ep.listener_name + ": security protocol " +
                            std::string(to_string(ep.protocol)) + " is not supported");
    }
    auto address = listen_address_for(ctx, ep.host, ep.port);
    if (!address.ok()) return listener_error("listener " + ep.listener_name + ": " + address.error().message);
    const tcp::endpoint bind_to = address->endpoint;
    auto acceptor = std::make_unique<tcp::acceptor>(ctx);
    std::error_code ec = open_acceptor(*acceptor, *address);
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
    if (tls) {
      std::lock_guard lock(_impl->tls_mutex);
      _impl->tls_contexts[ep.listener_name] = std::move(tls);
    }
    _impl->idle.push_back(
        {std::move(acceptor), ep.listener_name, ep.protocol, tcp::endpoint(bind_to.address(), port)});
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
    asio::co_spawn(ctx, _impl->accept_loop(*b.acceptor, b.listener_name, b.protocol), asio::detached);
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

status kafka_server::reload_tls(const tls_settings& settings) {
  if (!_impl->current_tls(settings.listener_name)) {
    return listener_error("listener " + settings.listener_name + " is not an SSL listener of this node");
  }
  auto context = make_tls_listener_context(settings);
  if (!context.ok()) return context.error();
  // Kafka's SslFactory.validateReconfiguration: the new certificate keeps the DN and the SANs.
  if (auto current = _impl->current_tls(settings.listener_name)) {
    auto before = listener_certificate_identity(*current);
    auto after = listener_certificate_identity(**context);
    if (before && after) {
      if (auto st = check_certificate_update(*before, *after, settings.allow_dn_changes,
                                             settings.allow_san_changes);
          !st.ok())
        return st;
    }
  }
  {
    std::lock_guard lock(_impl->tls_mutex);
    _impl->tls_contexts[settings.listener_name] = std::move(*context);
  }
  _impl->log->info("listener {}: TLS key and trust stores reloaded; new connections use them",
                   settings.listener_name);
  return status::success();
}

uint16_t kafka_server::bound_port(const std::string& listener_name) const {
  auto it = _impl->bound_ports.find(listener_name);
  return it == _impl->bound_ports.end() ? 0 : it->second;
}

}  // namespace mala::net
