// kafka_server's connection pipeline over a real loopback socket, with a dispatcher whose requests say how
// they behave: a request starts only once the one before it released its ordering point (at completion, or
// earlier when the handler says so), responses go out in request order even when a later one finishes
// first, a request without a response or one that closes the connection keeps that order, and the reader
// stops at queued.max.requests and queued.max.request.bytes instead of buffering.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "mala/net/kafka_server.h"
#include "mala/net/request_dispatcher.h"
#include "mala/net/shard_pool.h"

namespace mala::net {
namespace {

using namespace std::chrono_literals;

// How a request behaves, from its first byte.
enum class kind : uint8_t {
  hold = 'H',          // waits `delay`, then completes (the ordering point released at completion)
  early = 'E',         // releases its ordering point at once, then waits `delay` and completes
  late_release = 'L',  // waits `delay`, releases, waits `delay` again, completes
  gated = 'G',         // releases at once, then waits until the test opens the gate
  silent = 'N',        // completes without a response
  closing = 'C',       // completes with a result that closes the connection
};

struct request_spec {
  kind what = kind::hold;
  uint8_t delay_10ms = 0;
  uint8_t id = 0;
  size_t size = 3;  // frame bytes (at least 3)
};

// Answers each request with its id, behaving as its first byte says, and records when each one started,
// released its ordering point and completed.
class behaving_dispatcher final : public request_dispatcher {
 public:
  std::atomic<bool> gate_open{false};
  std::atomic<int> started{0};

  asio::awaitable<dispatch_result> dispatch(connection_info&, std::span<uint8_t> request,
                                            ordering_point& order) override {
    const auto what = static_cast<kind>(request[0]);
    const auto delay = std::chrono::milliseconds(10 * request[1]);
    const std::string id = std::to_string(request[2]);
    ++started;
    record("start " + id);
    auto release = [&] {
      record("release " + id);
      order.release();
    };
    asio::steady_timer timer(co_await asio::this_coro::executor);
    auto sleep = [&timer](std::chrono::milliseconds d) -> asio::awaitable<void> {
      timer.expires_after(d);
      co_await timer.async_wait(asio::use_awaitable);
    };
    switch (what) {
      case kind::early:
        release();
        co_await sleep(delay);
        break;
      case kind::late_release:
        co_await sleep(delay);
        release();
        co_await sleep(delay);
        break;
      case kind::gated:
        release();
        while (!gate_open) co_await sleep(2ms);
        break;
      default:
        co_await sleep(delay);
        break;
    }
    record("end " + id);
    if (what == kind::silent) co_return dispatch_result::nothing();
    if (what == kind::closing) co_return dispatch_result::close("test closes");
    co_return dispatch_result::respond_with(std::vector<uint8_t>{request[2]});
  }

  std::vector<std::string> events() {
    std::lock_guard lock(_mutex);
    return _events;
  }
  // Position of `event` in the record, or -1.
  int position(const std::string& event) {
    const auto all = events();
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i] == event) return static_cast<int>(i);
    }
    return -1;
  }

 private:
  void record(std::string event) {
    std::lock_guard lock(_mutex);
    _events.push_back(std::move(event));
  }
  std::mutex _mutex;
  std::vector<std::string> _events;
};

class pipeline_test : public ::testing::Test {
 protected:
  void start(server_limits limits = {}) {
    _server = std::make_unique<kafka_server>(_shards, _dispatcher, limits);
    ASSERT_TRUE(_server->listen({{"PLAINTEXT", "127.0.0.1", 0}}).ok());
    _port = _server->bound_port("PLAINTEXT");
    _shards.start();
  }
  void TearDown() override {
    _dispatcher.gate_open = true;
    if (_fd >= 0) ::close(_fd);
    _shards.stop();
    _shards.join();
    if (_server) _server->stop();
    _server.reset();
  }

  void connect_client() {
    _fd = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval timeout{10, 0};  // a hang fails the test instead of blocking it
    ::setsockopt(_fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(_port);
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    ASSERT_EQ(::connect(_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  }

  // Sends every request in one write, as a client with several requests in flight does.
  void send_all(const std::vector<request_spec>& specs) {
    std::vector<uint8_t> bytes;
    for (const auto& s : specs) {
      const auto n = static_cast<uint32_t>(s.size);
      bytes.insert(bytes.end(), {static_cast<uint8_t>(n >> 24), static_cast<uint8_t>(n >> 16),
                                 static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)});
      std::vector<uint8_t> frame(s.size, 0);
      frame[0] = static_cast<uint8_t>(s.what);
      frame[1] = s.delay_10ms;
      frame[2] = s.id;
      bytes.insert(bytes.end(), frame.begin(), frame.end());
    }
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(_fd, bytes.data() + sent, bytes.size() - sent, 0);
      ASSERT_GT(n, 0) << std::strerror(errno);
      sent += static_cast<size_t>(n);
    }
  }

  // The id a response carries; -1 when the server closed the connection instead.
  int read_id() {
    uint8_t buf[5];
    size_t got = 0;
    while (got < sizeof(buf)) {
      const ssize_t n = ::recv(_fd, buf + got, sizeof(buf) - got, 0);
      if (n <= 0) return -1;
      got += static_cast<size_t>(n);
    }
    EXPECT_EQ(std::vector<uint8_t>(buf, buf + 4), (std::vector<uint8_t>{0, 0, 0, 1}));
    return buf[4];
  }

  static bool eventually(const std::function<bool()>& condition) {
    for (int i = 0; i < 1000; ++i) {
      if (condition()) return true;
      std::this_thread::sleep_for(5ms);
    }
    return condition();
  }

  shard_pool _shards{2};
  behaving_dispatcher _dispatcher;
  std::unique_ptr<kafka_server> _server;
  uint16_t _port = 0;
  int _fd = -1;
};

// A request that released its ordering point lets the next one start; the next one finishes first, yet its
// response waits for the earlier one's.
TEST_F(pipeline_test, responses_keep_request_order_when_a_later_request_finishes_first) {
  start();
  connect_client();
  send_all({{kind::early, 20, 1}, {kind::hold, 0, 2}});
  EXPECT_EQ(read_id(), 1);
  EXPECT_EQ(read_id(), 2);
  EXPECT_LT(_dispatcher.position("end 2"), _dispatcher.position("end 1"))
      << "request 2 ran while request 1 was in flight";
}

// Without an early release a request starts only once the one before it completed: Kafka's one request at a
// time per connection.
TEST_F(pipeline_test, next_request_waits_for_the_completion_by_default) {
  start();
  connect_client();
  send_all({{kind::hold, 10, 1}, {kind::hold, 0, 2}, {kind::hold, 5, 3}});
  EXPECT_EQ(read_id(), 1);
  EXPECT_EQ(read_id(), 2);
  EXPECT_EQ(read_id(), 3);
  EXPECT_EQ(_dispatcher.events(),
            (std::vector<std::string>{"start 1", "end 1", "start 2", "end 2", "start 3", "end 3"}));
}

// A handler releasing in the middle: the next request starts after the release, not before.
TEST_F(pipeline_test, next_request_starts_after_the_release) {
  start();
  connect_client();
  send_all({{kind::late_release, 10, 1}, {kind::hold, 0, 2}});
  EXPECT_EQ(read_id(), 1);
  EXPECT_EQ(read_id(), 2);
  const int release_1 = _dispatcher.position("release 1");
  const int start_2 = _dispatcher.position("start 2");
  ASSERT_GE(release_1, 0);
  EXPECT_GT(start_2, release_1);
  EXPECT_LT(start_2, _dispatcher.position("end 1"));
}

// A request without a response (acks=0 Produce) between two others: the others are answered, in order.
TEST_F(pipeline_test, request_without_response_keeps_the_order) {
  start();
  connect_client();
  send_all({{kind::early, 10, 1}, {kind::silent, 0, 2}, {kind::hold, 0, 3}});
  EXPECT_EQ(read_id(), 1);
  EXPECT_EQ(read_id(), 3);
}

// A result that closes the connection: the responses before it go out, the requests after it never start.
TEST_F(pipeline_test, closing_result_answers_earlier_requests_and_starts_no_later_one) {
  start();
  connect_client();
  send_all({{kind::early, 10, 1}, {kind::closing, 0, 2}, {kind::hold, 0, 3}});
  EXPECT_EQ(read_id(), 1);
  EXPECT_EQ(read_id(), -1) << "the connection is closed";
  EXPECT_EQ(_dispatcher.position("start 3"), -1);
}

// queued.max.requests: with requests that never finish, the connection reads that many and stops; the rest
// stay in the socket until responses go out.
TEST_F(pipeline_test, reading_stops_at_queued_max_requests) {
  server_limits limits;
  limits.queued_max_requests = 3;
  start(limits);
  connect_client();
  std::vector<request_spec> specs;
  for (uint8_t i = 1; i <= 10; ++i) specs.push_back({kind::gated, 0, i});
  send_all(specs);
  ASSERT_TRUE(eventually([&] { return _dispatcher.started == 3; }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(_dispatcher.started, 3) << "the reader went past queued.max.requests";
  _dispatcher.gate_open = true;
  for (int i = 1; i <= 10; ++i) EXPECT_EQ(read_id(), i);
  EXPECT_EQ(_dispatcher.started, 10);
}

// queued.max.request.bytes: requests of 40 bytes under a bound of 100 are read two at a time; a request
// larger than the bound is still read once nothing else is in flight.
TEST_F(pipeline_test, reading_stops_at_queued_max_request_bytes) {
  server_limits limits;
  limits.queued_max_request_bytes = 100;
  start(limits);
  connect_client();
  std::vector<request_spec> specs;
  for (uint8_t i = 1; i <= 5; ++i) specs.push_back({kind::gated, 0, i, 40});
  specs.push_back({kind::gated, 0, 6, 500});
  send_all(specs);
  ASSERT_TRUE(eventually([&] { return _dispatcher.started == 2; }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(_dispatcher.started, 2) << "the reader went past queued.max.request.bytes";
  _dispatcher.gate_open = true;
  for (int i = 1; i <= 6; ++i) EXPECT_EQ(read_id(), i);
}

// The peer closing its side after its requests: the requests read are still answered.
TEST_F(pipeline_test, requests_read_before_the_peer_shuts_down_writing_are_answered) {
  start();
  connect_client();
  send_all({{kind::early, 10, 1}, {kind::hold, 0, 2}});
  ASSERT_EQ(::shutdown(_fd, SHUT_WR), 0);
  EXPECT_EQ(read_id(), 1);
  EXPECT_EQ(read_id(), 2);
  EXPECT_EQ(read_id(), -1);
}

}  // namespace
}  // namespace mala::net
