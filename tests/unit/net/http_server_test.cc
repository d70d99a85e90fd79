// The metrics endpoint's HTTP server over real sockets: answers, keep-alive, HEAD, and what it refuses.
#include "mala/net/http_server.h"

#include <gtest/gtest.h>

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <string>
#include <thread>

namespace mala::net {
namespace {

using asio::ip::tcp;

class http_server_test : public ::testing::Test {
 protected:
  void SetUp() override {
    server =
        std::make_unique<http_server>(io, [](const http_request_head& r) -> asio::awaitable<http_response> {
          co_return http_response{r.path == "/missing" ? 404 : 200, "text/plain", "path " + r.path + "\n"};
        });
    ASSERT_TRUE(server->listen({{"127.0.0.1", 0}}).ok());
    port = server->bound_port(0);
    ASSERT_NE(port, 0);
    thread = std::thread([this] { io.run(); });
  }
  void TearDown() override {
    asio::post(io, [this] { server->stop(); });
    io.stop();
    thread.join();
  }

  tcp::socket connect() {
    tcp::socket s(client_io);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    return s;
  }
  // Everything the server sends until it closes the connection.
  static std::string read_all(tcp::socket& s) {
    std::string out;
    std::error_code ec;
    char buf[4096];
    while (true) {
      const size_t n = s.read_some(asio::buffer(buf), ec);
      if (ec) break;
      out.append(buf, n);
    }
    return out;
  }
  // One response with a Content-Length body.
  static std::string read_response(tcp::socket& s) {
    std::string out;
    char c;
    while (out.find("\r\n\r\n") == std::string::npos) {
      asio::read(s, asio::buffer(&c, 1));
      out += c;
    }
    const size_t at = out.find("Content-Length: ");
    const size_t length = std::stoul(out.substr(at + 16));
    std::string body(length, '\0');
    if (length > 0) asio::read(s, asio::buffer(body));
    return out + body;
  }

  asio::io_context io;
  asio::io_context client_io;
  std::unique_ptr<http_server> server;
  uint16_t port = 0;
  std::thread thread;
};

TEST_F(http_server_test, answers_get_and_keeps_the_connection_for_the_next_request) {
  auto s = connect();
  asio::write(s, asio::buffer(std::string("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")));
  const auto first = read_response(s);
  EXPECT_NE(first.find("HTTP/1.1 200 OK\r\n"), std::string::npos) << first;
  EXPECT_NE(first.find("Connection: keep-alive"), std::string::npos) << first;
  EXPECT_TRUE(first.ends_with("path /metrics\n")) << first;
  // Two pipelined requests on the same connection, answered in order.
  asio::write(s, asio::buffer(std::string("GET /a HTTP/1.1\r\n\r\nGET /missing HTTP/1.1\r\n\r\n")));
  EXPECT_TRUE(read_response(s).ends_with("path /a\n"));
  const auto missing = read_response(s);
  EXPECT_NE(missing.find("HTTP/1.1 404 Not Found"), std::string::npos) << missing;
}

TEST_F(http_server_test, head_gets_the_length_without_the_body_and_close_is_honoured) {
  auto s = connect();
  asio::write(s, asio::buffer(std::string("HEAD /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")));
  const auto all = read_all(s);
  EXPECT_NE(all.find("Content-Length: 14\r\n"), std::string::npos) << all;
  EXPECT_NE(all.find("Connection: close"), std::string::npos) << all;
  EXPECT_TRUE(all.ends_with("\r\n\r\n")) << all;
}

TEST_F(http_server_test, other_methods_are_refused_with_405_and_the_connection_closed) {
  auto s = connect();
  asio::write(s, asio::buffer(std::string("POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc")));
  const auto all = read_all(s);
  EXPECT_NE(all.find("HTTP/1.1 405 Method Not Allowed"), std::string::npos) << all;
  EXPECT_NE(all.find("Allow: GET, HEAD"), std::string::npos) << all;
}

TEST_F(http_server_test, a_malformed_head_gets_400_and_an_endless_one_431) {
  {
    auto s = connect();
    asio::write(s, asio::buffer(std::string("GET /metrics SPDY/3\r\n\r\n")));
    EXPECT_NE(read_all(s).find("HTTP/1.1 400 Bad Request"), std::string::npos);
  }
  {
    auto s = connect();
    const std::string endless = "GET /" + std::string(3 * http_max_head_bytes, 'a');
    std::error_code ec;
    asio::write(s, asio::buffer(endless), ec);  // the server may close before reading it all
    EXPECT_NE(read_all(s).find("HTTP/1.1 431"), std::string::npos);
  }
  // The server still serves.
  auto s = connect();
  asio::write(s, asio::buffer(std::string("GET /ok HTTP/1.0\r\n\r\n")));
  EXPECT_TRUE(read_all(s).ends_with("path /ok\n"));
}

TEST(http_server, a_port_in_use_is_an_error_naming_it) {
  asio::io_context io;
  http_server first(
      io, [](const http_request_head&) -> asio::awaitable<http_response> { co_return http_response{}; });
  ASSERT_TRUE(first.listen({{"127.0.0.1", 0}}).ok());
  http_server second(
      io, [](const http_request_head&) -> asio::awaitable<http_response> { co_return http_response{}; });
  auto st = second.listen({{"127.0.0.1", first.bound_port(0)}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message.find(std::to_string(first.bound_port(0))), std::string::npos) << st.message;
}

}  // namespace
}  // namespace mala::net
