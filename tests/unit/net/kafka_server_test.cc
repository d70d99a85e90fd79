// kafka_server over a real loopback socket with a scripted dispatcher: size-prefixed framing, responses made
// of memory and file pieces (file ranges go out with sendfile), a file truncated before or during the send
// (the connection closes instead of hanging or sending garbage), and dispatch_result::materialize (the copy
// path).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "mala/net/kafka_server.h"
#include "mala/net/request_dispatcher.h"
#include "mala/net/shard_pool.h"

namespace mala::net {
namespace {

// Answers every request with what `respond` returns; remembers the connection's zero_copy flag.
class scripted_dispatcher final : public request_dispatcher {
 public:
  std::function<dispatch_result()> respond;
  std::atomic<bool> saw_zero_copy{false};

  asio::awaitable<dispatch_result> dispatch(connection_info& connection, std::span<uint8_t>,
                                            ordering_point&) override {
    saw_zero_copy = connection.zero_copy;
    co_return respond();
  }
};

// A temporary file with known contents; the descriptor stays open until the last owner goes (like a segment
// file held by an in-flight response).
struct temp_file {
  std::filesystem::path path;
  int fd = -1;
  std::vector<uint8_t> contents;

  explicit temp_file(size_t size) {
    std::string name = (std::filesystem::temp_directory_path() / "mala-net-test-XXXXXX").string();
    fd = ::mkstemp(name.data());
    path = name;
    contents.resize(size);
    for (size_t i = 0; i < size; ++i) contents[i] = static_cast<uint8_t>((i * 131 + i / 4096) & 0xff);
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd, contents.data() + done, size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }
  ~temp_file() {
    if (fd >= 0) ::close(fd);
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  std::vector<uint8_t> bytes(size_t offset, size_t size) const {
    return {contents.begin() + static_cast<std::ptrdiff_t>(offset),
            contents.begin() + static_cast<std::ptrdiff_t>(offset + size)};
  }
};

file_range range_of(const std::shared_ptr<temp_file>& file, int64_t offset, uint32_t size) {
  return {file->fd, offset, size, file};
}

std::vector<uint8_t> text(std::string_view s) {
  return {s.begin(), s.end()};
}

// What a client read back for one request.
struct client_read {
  int64_t declared_size = -1;    // the response's size prefix (-1: not even that arrived)
  std::vector<uint8_t> payload;  // bytes after the prefix, up to declared_size
  bool closed_early = false;     // the server closed before declared_size bytes arrived
};

class server_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _server = std::make_unique<kafka_server>(_shards, _dispatcher, server_limits{});
    ASSERT_TRUE(_server->listen({{"PLAINTEXT", "127.0.0.1", 0}}).ok());
    _port = _server->bound_port("PLAINTEXT");
    _shards.start();
  }
  void TearDown() override {
    _shards.stop();
    _shards.join();
    _server->stop();
    _server.reset();
  }

  // A connected blocking client socket; a small receive buffer makes the server's sends hit EAGAIN.
  int connect_client(int receive_buffer = 0) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (receive_buffer > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    timeval timeout{10, 0};  // a hang fails the test instead of blocking it
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(_port);
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
    return fd;
  }

  static void send_request(int fd) {
    const uint8_t frame[] = {0, 0, 0, 4, 0, 1, 2, 3};
    ASSERT_EQ(::send(fd, frame, sizeof(frame), 0), static_cast<ssize_t>(sizeof(frame)));
  }

  // Reads one response; stops early at EOF. `after_bytes` runs once when that many payload bytes arrived.
  static client_read read_response(int fd, size_t chunk = 65536, size_t after_bytes = 0,
                                   const std::function<void()>& after = {}) {
    client_read out;
    uint8_t prefix[4];
    size_t got = 0;
    while (got < 4) {
      const ssize_t n = ::recv(fd, prefix + got, 4 - got, 0);
      if (n <= 0) {
        out.closed_early = true;
        return out;
      }
      got += static_cast<size_t>(n);
    }
    out.declared_size = static_cast<int64_t>((uint32_t{prefix[0]} << 24) | (uint32_t{prefix[1]} << 16) |
                                             (uint32_t{prefix[2]} << 8) | uint32_t{prefix[3]});
    std::vector<uint8_t> buf(chunk);
    bool fired = false;
    while (static_cast<int64_t>(out.payload.size()) < out.declared_size) {
      const size_t want =
          std::min(chunk, static_cast<size_t>(out.declared_size - static_cast<int64_t>(out.payload.size())));
      const ssize_t n = ::recv(fd, buf.data(), want, 0);
      if (n <= 0) {
        out.closed_early = true;
        break;
      }
      out.payload.insert(out.payload.end(), buf.begin(), buf.begin() + n);
      if (after && !fired && out.payload.size() >= after_bytes) {
        fired = true;
        after();
      }
    }
    return out;
  }

  // True when the server closed the connection (EOF) rather than leaving it open.
  static bool closed_by_server(int fd) {
    uint8_t b;
    return ::recv(fd, &b, 1, 0) == 0;
  }

  shard_pool _shards{2};
  scripted_dispatcher _dispatcher;
  std::unique_ptr<kafka_server> _server;
  uint16_t _port = 0;
};

TEST_F(server_test, plain_response_is_size_prefixed) {
  _dispatcher.respond = [] { return dispatch_result::respond_with(text("hello")); };
  const int fd = connect_client();
  send_request(fd);
  auto read = read_response(fd);
  ::close(fd);
  EXPECT_EQ(read.declared_size, 5);
  EXPECT_EQ(read.payload, text("hello"));
  EXPECT_TRUE(_dispatcher.saw_zero_copy) << "plaintext connections send file ranges themselves";
}

// A response whose send counts toward a request quota (Kafka's network-thread time): sent whole on a metered
// executor, and its thread time handed back once it is out.
TEST_F(server_test, a_metered_send_reports_its_thread_time) {
  std::atomic<int64_t> recorded{-1};
  auto file = std::make_shared<temp_file>(300'000);
  _dispatcher.respond = [&recorded, &file] {
    std::vector<response_piece> pieces;
    pieces.emplace_back(std::vector<uint8_t>(1 << 20, 7));
    pieces.emplace_back(range_of(file, 0, 300'000));
    auto result = dispatch_result::respond_with(std::move(pieces));
    result.record_send_time = [&recorded](int64_t ns) { recorded = ns; };
    return result;
  };
  const int fd = connect_client(16 * 1024);  // a small buffer: the send waits on the socket, uncharged
  send_request(fd);
  auto read = read_response(fd, 4096);
  ASSERT_EQ(read.declared_size, (1 << 20) + 300'000);
  ASSERT_FALSE(read.closed_early);
  EXPECT_EQ(std::vector<uint8_t>(read.payload.begin(), read.payload.begin() + (1 << 20)),
            std::vector<uint8_t>(1 << 20, 7));
  EXPECT_EQ(std::vector<uint8_t>(read.payload.begin() + (1 << 20), read.payload.end()),
            file->bytes(0, 300'000));
  for (int i = 0; i < 500 && recorded < 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GT(recorded.load(), 0);
  // The connection still serves: a second request is answered.
  _dispatcher.respond = [] { return dispatch_result::respond_with(text("again")); };
  send_request(fd);
  EXPECT_EQ(read_response(fd).payload, text("again"));
  ::close(fd);
}

// A bound endpoint refuses connections until start() (a broker's listeners before it has caught up with the
// metadata); after stop(), start() opens nothing.
TEST(server_bind_test, bound_endpoint_refuses_until_started) {
  shard_pool shards{1};
  scripted_dispatcher dispatcher;
  dispatcher.respond = [] { return dispatch_result::respond_with(text("hello")); };
  kafka_server server(shards, dispatcher, server_limits{});
  ASSERT_TRUE(server.bind({{"PLAINTEXT", "127.0.0.1", 0}}).ok());
  const uint16_t port = server.bound_port("PLAINTEXT");
  ASSERT_NE(port, 0);
  shards.start();
  auto try_connect = [port] {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    return ok;
  };
  EXPECT_FALSE(try_connect()) << "connected to a bound endpoint that was not started";
  ASSERT_TRUE(server.start().ok());
  EXPECT_TRUE(try_connect());
  shards.stop();
  shards.join();
  server.stop();
  EXPECT_TRUE(server.start().ok());
  EXPECT_FALSE(try_connect()) << "start() after stop() opened the endpoint again";
}

TEST_F(server_test, memory_and_file_pieces_arrive_in_order) {
  auto file = std::make_shared<temp_file>(100'000);
  std::weak_ptr<temp_file> watch = file;
  _dispatcher.respond = [&file] {
    std::vector<response_piece> pieces;
    pieces.emplace_back(text("head"));
    pieces.emplace_back(range_of(file, 10, 5000));
    pieces.emplace_back(text("mid"));
    pieces.emplace_back(range_of(file, 60'000, 40'000));  // to the end of the file
    pieces.emplace_back(range_of(file, 0, 0));            // an empty range sends nothing
    pieces.emplace_back(text("tail"));
    return dispatch_result::respond_with(std::move(pieces));
  };
  std::vector<uint8_t> expected = text("head");
  for (auto b : file->bytes(10, 5000)) expected.push_back(b);
  for (auto b : text("mid")) expected.push_back(b);
  for (auto b : file->bytes(60'000, 40'000)) expected.push_back(b);
  for (auto b : text("tail")) expected.push_back(b);

  const int fd = connect_client();
  send_request(fd);
  // Like a segment deleted by retention while its records are on their way: the descriptor still reads.
  std::filesystem::remove(file->path);
  auto first = read_response(fd);
  EXPECT_EQ(first.declared_size, static_cast<int64_t>(expected.size()));
  EXPECT_EQ(first.payload, expected);
  // The connection stays usable for the next request.
  send_request(fd);
  auto second = read_response(fd);
  EXPECT_EQ(second.payload, expected);
  ::close(fd);
  file.reset();
  // The response was the last owner of the file: it is released once sent.
  for (int i = 0; i < 200 && !watch.expired(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(watch.expired());
}

TEST_F(server_test, large_file_range_survives_a_slow_reader) {
  // 16 MiB against a 16 KiB receive buffer read with a delay: sendfile sends part, then EAGAIN, many times.
  auto file = std::make_shared<temp_file>(16u << 20);
  _dispatcher.respond = [&file] {
    std::vector<response_piece> pieces;
    pieces.emplace_back(text("x"));
    pieces.emplace_back(range_of(file, 1, static_cast<uint32_t>(file->contents.size() - 1)));
    return dispatch_result::respond_with(std::move(pieces));
  };
  const int fd = connect_client(16 * 1024);
  send_request(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto read = read_response(fd, 4096);
  ::close(fd);
  ASSERT_FALSE(read.closed_early);
  std::vector<uint8_t> expected = text("x");
  for (auto b : file->bytes(1, file->contents.size() - 1)) expected.push_back(b);
  EXPECT_EQ(read.payload.size(), expected.size());
  EXPECT_TRUE(read.payload == expected);
}

TEST_F(server_test, file_shorter_than_its_range_closes_the_connection) {
  auto file = std::make_shared<temp_file>(1000);
  _dispatcher.respond = [&file] {
    std::vector<response_piece> pieces;
    pieces.emplace_back(text("head"));
    pieces.emplace_back(range_of(file, 500, 1000));  // 500 bytes past the end: truncated since it was read
    pieces.emplace_back(text("tail"));
    return dispatch_result::respond_with(std::move(pieces));
  };
  const int fd = connect_client();
  send_request(fd);
  auto read = read_response(fd);
  EXPECT_EQ(read.declared_size, 4 + 1000 + 4);
  EXPECT_TRUE(read.closed_early);
  EXPECT_EQ(read.payload, text("head")) << "nothing of the short file and nothing after it is sent";
  ::close(fd);
}

TEST_F(server_test, file_truncated_during_the_send_closes_the_connection) {
  auto file = std::make_shared<temp_file>(24u << 20);
  _dispatcher.respond = [&file] {
    std::vector<response_piece> pieces;
    pieces.emplace_back(range_of(file, 0, static_cast<uint32_t>(file->contents.size())));
    return dispatch_result::respond_with(std::move(pieces));
  };
  const int fd = connect_client(16 * 1024);
  send_request(fd);
  // Once 1 MiB arrived the server is parked on a full socket; the log is truncated under it.
  auto read = read_response(fd, 4096, 1u << 20, [&file] { ASSERT_EQ(::ftruncate(file->fd, 0), 0); });
  EXPECT_EQ(read.declared_size, static_cast<int64_t>(file->contents.size()));
  EXPECT_TRUE(read.closed_early);
  EXPECT_LT(read.payload.size(), file->contents.size());
  ::close(fd);
}

TEST_F(server_test, closing_result_closes_the_connection) {
  _dispatcher.respond = [] { return dispatch_result::close("test"); };
  const int fd = connect_client();
  send_request(fd);
  EXPECT_TRUE(closed_by_server(fd));
  ::close(fd);
}

TEST(dispatch_result_test, materialize_joins_the_pieces) {
  auto file = std::make_shared<temp_file>(4096);
  std::vector<response_piece> pieces;
  pieces.emplace_back(text("ab"));
  pieces.emplace_back(range_of(file, 100, 300));
  pieces.emplace_back(text("cd"));
  auto result = dispatch_result::respond_with(std::move(pieces));
  EXPECT_EQ(result.response_size(), 304u);
  ASSERT_TRUE(result.materialize().ok());
  EXPECT_TRUE(result.pieces.empty());
  std::vector<uint8_t> expected = text("ab");
  for (auto b : file->bytes(100, 300)) expected.push_back(b);
  for (auto b : text("cd")) expected.push_back(b);
  EXPECT_EQ(result.response, expected);
  EXPECT_EQ(result.response_size(), 304u);
}

TEST(dispatch_result_test, materialize_fails_on_a_truncated_file) {
  auto file = std::make_shared<temp_file>(4096);
  std::vector<response_piece> pieces;
  pieces.emplace_back(range_of(file, 4000, 200));
  auto result = dispatch_result::respond_with(std::move(pieces));
  auto st = result.materialize();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message.find("truncated"), std::string::npos) << st.message;
}

TEST(dispatch_result_test, materialize_leaves_a_plain_response_alone) {
  auto result = dispatch_result::respond_with(text("abc"));
  ASSERT_TRUE(result.materialize().ok());
  EXPECT_EQ(result.response, text("abc"));
}

}  // namespace
}  // namespace mala::net
