// A small HTTP/1.1 server for the metrics and health endpoint (metrics.listeners): GET and HEAD of a few
// paths, answered by one handler. It runs on one io_context (the home shard); the handler may hop to other
// shards inside its coroutine. Bounded: a request head over common/http_request.h's bound or not complete
// within 30 s, a response not written within 30 s, or more than 64 connections at once close the connection,
// with a debug log line; nothing grows with what a client sends.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>

#include "mala/common/http_request.h"
#include "mala/common/result.h"

namespace mala::net {

struct http_endpoint {
  std::string host;  // empty: every interface, IPv4 and IPv6
  uint16_t port = 0;
};

struct http_response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Runs on the server's io_context for each well-formed GET or HEAD request (the server answers HEAD without
// the body). Other methods are answered 405 without calling it.
using http_handler = std::function<asio::awaitable<http_response>(const http_request_head& request)>;

class http_server {
 public:
  http_server(asio::io_context& context, http_handler handler);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  // Binds, listens and starts accepting on every endpoint. Call on the context's thread or before it runs.
  // Errors (unknown_server_error) name the endpoint that cannot be bound.
  status listen(const std::vector<http_endpoint>& endpoints);
  // The port bound for the endpoint at `index` of listen()'s list (useful when it asked for port 0).
  uint16_t bound_port(size_t index) const;
  // Stops accepting and closes every connection. Call on the context's thread or before it runs. A handler
  // already running finishes (its answer is not sent): see answering().
  void stop();
  // Whether a handler runs (a scrape hopping over the shards): the owner waits for it to finish after stop()
  // before the shards' event loops end. The context's thread.
  bool answering() const;

 private:
  struct impl;
  std::shared_ptr<impl> _impl;
};

}  // namespace mala::net
