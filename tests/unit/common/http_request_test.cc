// The HTTP request heads the metrics endpoint accepts and refuses (RFC 9112), within its bounds.
#include "mala/common/http_request.h"

#include <gtest/gtest.h>

#include <string>

namespace mala {
namespace {

TEST(http_request_head, a_prometheus_scrape_parses) {
  const std::string text =
      "GET /metrics?x=1 HTTP/1.1\r\nHost: localhost:9644\r\nUser-Agent: Prometheus/2.42.0\r\n"
      "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n"
      "Accept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n";
  ASSERT_EQ(http_head_end(text), text.size());
  auto head = parse_http_request_head(text);
  ASSERT_TRUE(head.ok()) << head.error().message;
  EXPECT_EQ(head->method, "GET");
  EXPECT_EQ(head->path, "/metrics");
  EXPECT_EQ(head->query, "x=1");
  EXPECT_EQ(head->minor_version, 1);
  EXPECT_TRUE(head->keep_alive);
  EXPECT_EQ(head->content_length, 0);
}

TEST(http_request_head, connection_options_decide_keep_alive) {
  auto close = parse_http_request_head("GET / HTTP/1.1\r\nConnection: Keep-Alive, close\r\n\r\n");
  ASSERT_TRUE(close.ok());
  EXPECT_FALSE(close->keep_alive);
  auto old = parse_http_request_head("GET / HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->keep_alive);
  auto old_kept = parse_http_request_head("GET / HTTP/1.0\nconnection: keep-alive\n\n");
  ASSERT_TRUE(old_kept.ok()) << old_kept.error().message;
  EXPECT_TRUE(old_kept->keep_alive);
}

TEST(http_request_head, the_head_ends_at_the_first_empty_line) {
  EXPECT_EQ(http_head_end("GET / HTTP/1.1\r\nHost: x\r\n"), std::string::npos);
  EXPECT_EQ(http_head_end("GET / HTTP/1.1\r\n\r\nGET /next"), 18u);
  EXPECT_EQ(http_head_end("GET / HTTP/1.1\n\n"), 16u);
  EXPECT_EQ(http_head_end(""), std::string::npos);
}

TEST(http_request_head, malformed_heads_are_refused_with_why) {
  const char* bad[] = {
      "",                                                                  // no request line
      "GET /\r\n\r\n",                                                     // no version
      "GET /metrics HTTP/2.0\r\n\r\n",                                     // not 1.x
      "GET metrics HTTP/1.1\r\n\r\n",                                      // not a path
      "G(T / HTTP/1.1\r\n\r\n",                                            // method not a token
      "GET /a\x01 HTTP/1.1\r\n\r\n",                                       // control character in the target
      "GET / HTTP/1.1\r\nHost x\r\n\r\n",                                  // no colon
      "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",                      // obsolete folding
      "GET / HTTP/1.1\r\nBad Name: a\r\n\r\n",                             // name not a token
      "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",                      // not digits
      "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",  // conflicting
      "GET / HTTP/1.1\r\nContent-Length: 9999999999999999999\r\n\r\n",     // too long
      "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",              // a body
      "GET / HTTP/1.1\r\nHost: a\r\n",                                     // no end
      "GET / HTTP/1.1\r\n\r\nextra",                                       // bytes after the head
      "GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n",                                // control character in a value
  };
  for (const char* text : bad) {
    auto head = parse_http_request_head(text);
    EXPECT_FALSE(head.ok()) << text;
    if (!head.ok()) {
      EXPECT_EQ(head.error().code, error_code::invalid_request);
      EXPECT_FALSE(head.error().message.empty());
    }
  }
}

TEST(http_request_head, bounds_on_size_and_field_count) {
  std::string many = "GET / HTTP/1.1\r\n";
  for (size_t i = 0; i <= http_max_header_fields; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  many += "\r\n";
  EXPECT_FALSE(parse_http_request_head(many).ok());
  std::string big = "GET /" + std::string(http_max_head_bytes, 'a') + " HTTP/1.1\r\n\r\n";
  EXPECT_FALSE(parse_http_request_head(big).ok());
  std::string fits = "GET / HTTP/1.1\r\n";
  for (size_t i = 0; i < http_max_header_fields; ++i) fits += "X-" + std::to_string(i) + ": v\r\n";
  fits += "\r\n";
  EXPECT_TRUE(parse_http_request_head(fits).ok());
}

}  // namespace
}  // namespace mala
