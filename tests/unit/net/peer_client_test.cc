// peer_client against a real kafka_server on loopback with a small scripted dispatcher: ApiVersions decoded
// with the generated struct, response header v1, connection refused, timeout, a wrong correlation id, the
// response size bound, and two concurrent calls to one address on separate connections (a slow call does not
// hold up a fast one).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include "mala/net/kafka_server.h"
#include "mala/net/peer_client.h"
#include "mala/net/request_dispatcher.h"
#include "mala/net/shard_pool.h"
#include "mala/protocol/messages/api_versions_request.h"
#include "mala/protocol/messages/api_versions_response.h"
#include "mala/protocol/request_header.h"
#include "mala/protocol/wire.h"

namespace mala::net {
namespace {

constexpr int16_t api_versions_key = 18;
constexpr int16_t echo_key = 1000;  // body: int32 delay ms, then anything; echoed after the delay
constexpr int16_t wrong_correlation_key = 1001;

// Serves ApiVersions (response header v0), an echo with a delay (response header v1) and a response with a
// wrong correlation id.
class test_dispatcher final : public request_dispatcher {
 public:
  asio::awaitable<dispatch_result> dispatch(connection_info&, std::span<uint8_t> request,
                                            ordering_point&) override {
    protocol::wire_reader r(request);
    protocol::request_header header;
    protocol::decode_request_header_prefix(r, header);
    const int16_t header_version = header.api_key == wrong_correlation_key ? 1 : 2;
    protocol::decode_request_header_rest(r, header, header_version);
    if (!r.ok()) co_return dispatch_result::close("bad header");
    last_client_id = header.client_id.value_or("");
    std::vector<uint8_t> out;
    protocol::wire_writer w(out);
    if (header.api_key == api_versions_key) {
      protocol::api_versions_request req;
      if (req.decode(r, header.api_version) != protocol::decode_status::ok)
        co_return dispatch_result::close("bad body");
      protocol::encode_response_header(w, header.correlation_id, 0);
      protocol::api_versions_response resp;
      resp.api_keys.push_back({api_versions_key, 0, 4});
      resp.api_keys.push_back({52, 0, 1});
      resp.encode(w, header.api_version);
      co_return dispatch_result::respond_with(std::move(out));
    }
    if (header.api_key == echo_key) {
      const int32_t delay_ms = r.read_int32();
      if (delay_ms > 0) {
        asio::steady_timer timer(co_await asio::this_coro::executor);
        timer.expires_after(std::chrono::milliseconds(delay_ms));
        std::error_code ec;
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      protocol::encode_response_header(w, header.correlation_id, 1);
      const auto body = request.subspan(r.position() - 4);
      w.write_raw(body);
      co_return dispatch_result::respond_with(std::move(out));
    }
    if (header.api_key == wrong_correlation_key) {
      protocol::encode_response_header(w, header.correlation_id + 1, 0);
      co_return dispatch_result::respond_with(std::move(out));
    }
    co_return dispatch_result::close("unknown api");
  }

  std::string last_client_id;  // written on the server's shard; read after the calls completed
};

std::vector<uint8_t> echo_body(int32_t delay_ms, std::string_view tail = "payload") {
  std::vector<uint8_t> out;
  protocol::wire_writer w(out);
  w.write_int32(delay_ms);
  w.write_raw(std::span(reinterpret_cast<const uint8_t*>(tail.data()), tail.size()));
  return out;
}

class peer_client_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _server = std::make_unique<kafka_server>(_shards, _dispatcher, server_limits{});
    ASSERT_TRUE(_server->listen({{"CONTROLLER", "127.0.0.1", 0}}).ok());
    _port = _server->bound_port("CONTROLLER");
    _shards.start();
  }
  void TearDown() override {
    _client.close_all();
    _shards.stop();
    _shards.join();
    _server->stop();
    _server.reset();
  }

  // Runs the client's context until every spawned coroutine finished.
  template <typename Fn>
  void run(Fn fn) {
    asio::co_spawn(_io, std::move(fn), [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
    });
    _io.restart();
    _io.run();
  }

  peer_address here() const { return {"127.0.0.1", _port}; }

  shard_pool _shards{1};
  test_dispatcher _dispatcher;
  std::unique_ptr<kafka_server> _server;
  int32_t _port = 0;
  asio::io_context _io{1};
  peer_client _client{_io, "mala-test-node-1"};
};

TEST_F(peer_client_test, api_versions_round_trip) {
  std::optional<result<std::vector<uint8_t>>> got;
  run([&]() -> asio::awaitable<void> {
    protocol::api_versions_request req;
    req.client_software_name = "mala";
    req.client_software_version = "test";
    std::vector<uint8_t> body;
    protocol::wire_writer w(body);
    req.encode(w, 3);
    got = co_await _client.call(here(), api_versions_key, 3, 2, 0, std::move(body), 5000);
  });
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok()) << got->error().message;
  protocol::api_versions_response resp;
  protocol::wire_reader r(got->value());
  ASSERT_EQ(resp.decode(r, 3), protocol::decode_status::ok);
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(resp.error_code, 0);
  ASSERT_EQ(resp.api_keys.size(), 2u);
  EXPECT_EQ(resp.api_keys[0].api_key, api_versions_key);
  EXPECT_EQ(resp.api_keys[0].max_version, 4);
  EXPECT_EQ(resp.api_keys[1].api_key, 52);
  EXPECT_EQ(_dispatcher.last_client_id, "mala-test-node-1");
  EXPECT_EQ(_client.idle_connections(here()), 1u) << "the connection goes back to the pool";
}

TEST_F(peer_client_test, localhost_is_resolved_and_connection_reused) {
  std::vector<result<std::vector<uint8_t>>> got;
  run([&]() -> asio::awaitable<void> {
    for (int i = 0; i < 3; ++i) {
      const peer_address to{"localhost", _port};
      auto r = co_await _client.call(to, echo_key, 0, 2, 1, echo_body(0), 5000);
      got.push_back(std::move(r));
    }
  });
  ASSERT_EQ(got.size(), 3u);
  for (auto& g : got) {
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(g.value(), echo_body(0)) << "response header v1 (tagged fields) is skipped";
  }
  EXPECT_EQ(_client.idle_connections({"localhost", _port}), 1u);
}

TEST_F(peer_client_test, connection_refused_is_network_exception) {
  int32_t closed_port = 0;
  {
    asio::io_context io;
    asio::ip::tcp::acceptor a(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    closed_port = a.local_endpoint().port();
  }
  std::optional<result<std::vector<uint8_t>>> got;
  run([&]() -> asio::awaitable<void> {
    const peer_address to{"127.0.0.1", closed_port};
    got = co_await _client.call(to, echo_key, 0, 2, 1, echo_body(0), 5000);
  });
  ASSERT_TRUE(got.has_value());
  ASSERT_FALSE(got->ok());
  EXPECT_EQ(got->error().code, error_code::network_exception) << got->error().message;
}

TEST_F(peer_client_test, unresolvable_host_is_network_exception) {
  std::optional<result<std::vector<uint8_t>>> got;
  run([&]() -> asio::awaitable<void> {
    const peer_address to{"no-such-host.invalid", _port};
    got = co_await _client.call(to, echo_key, 0, 2, 1, echo_body(0), 5000);
  });
  ASSERT_FALSE(got->ok());
  EXPECT_TRUE(got->error().code == error_code::network_exception ||
              got->error().code == error_code::request_timed_out)
      << got->error().message;
}

TEST_F(peer_client_test, slow_response_times_out_and_drops_the_connection) {
  std::optional<result<std::vector<uint8_t>>> got;
  const auto start = std::chrono::steady_clock::now();
  run([&]() -> asio::awaitable<void> {
    got = co_await _client.call(here(), echo_key, 0, 2, 1, echo_body(3000), 200);
  });
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(got->ok());
  EXPECT_EQ(got->error().code, error_code::request_timed_out) << got->error().message;
  EXPECT_LT(took, std::chrono::milliseconds(2000));
  EXPECT_EQ(_client.idle_connections(here()), 0u);
}

TEST_F(peer_client_test, concurrent_calls_use_separate_connections) {
  std::optional<result<std::vector<uint8_t>>> slow, fast;
  std::chrono::steady_clock::time_point slow_done, fast_done;
  auto slow_call = [&]() -> asio::awaitable<void> {
    slow = co_await _client.call(here(), echo_key, 0, 2, 1, echo_body(500, "slow"), 5000);
    slow_done = std::chrono::steady_clock::now();
  };
  auto fast_call = [&]() -> asio::awaitable<void> {
    fast = co_await _client.call(here(), echo_key, 0, 2, 1, echo_body(0, "fast"), 5000);
    fast_done = std::chrono::steady_clock::now();
  };
  asio::co_spawn(_io, slow_call, asio::detached);
  asio::co_spawn(_io, fast_call, asio::detached);
  _io.run();
  ASSERT_TRUE(slow.has_value() && fast.has_value());
  ASSERT_TRUE(slow->ok()) << slow->error().message;
  ASSERT_TRUE(fast->ok()) << fast->error().message;
  EXPECT_EQ(slow->value(), echo_body(500, "slow"));
  EXPECT_EQ(fast->value(), echo_body(0, "fast"));
  EXPECT_LT(fast_done, slow_done) << "the fast call did not wait behind the slow one";
  EXPECT_EQ(_client.idle_connections(here()), 2u);
}

TEST_F(peer_client_test, wrong_correlation_id_is_refused) {
  std::optional<result<std::vector<uint8_t>>> got;
  run([&]() -> asio::awaitable<void> {
    got = co_await _client.call(here(), wrong_correlation_key, 0, 1, 0, {}, 5000);
  });
  ASSERT_FALSE(got->ok());
  EXPECT_EQ(got->error().code, error_code::network_exception);
  EXPECT_EQ(_client.idle_connections(here()), 0u);
}

TEST_F(peer_client_test, response_larger_than_the_bound_is_refused) {
  asio::io_context io{1};
  peer_client small(io, "small", peer_client_options{.max_response_bytes = 16});
  std::optional<result<std::vector<uint8_t>>> got;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        got = co_await small.call(here(), echo_key, 0, 2, 1, echo_body(0, std::string(100, 'x')), 5000);
      },
      asio::detached);
  io.run();
  ASSERT_TRUE(got.has_value());
  ASSERT_FALSE(got->ok());
  EXPECT_EQ(got->error().code, error_code::network_exception);
}

TEST_F(peer_client_test, close_all_fails_calls_in_flight) {
  std::optional<result<std::vector<uint8_t>>> got;
  asio::co_spawn(
      _io,
      [&]() -> asio::awaitable<void> {
        got = co_await _client.call(here(), echo_key, 0, 2, 1, echo_body(2000), 5000);
      },
      asio::detached);
  asio::steady_timer timer(_io);
  timer.expires_after(std::chrono::milliseconds(100));
  timer.async_wait([&](std::error_code) { _client.close_all(); });
  const auto start = std::chrono::steady_clock::now();
  _io.run();
  ASSERT_TRUE(got.has_value());
  ASSERT_FALSE(got->ok());
  EXPECT_EQ(got->error().code, error_code::network_exception) << got->error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
}

}  // namespace
}  // namespace mala::net
