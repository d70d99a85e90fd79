#include "mala/broker/controller_channel.h"

#include <algorithm>
#include <utility>

#include <asio/redirect_error.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "mala/common/logging.h"

namespace mala::broker {

controller_channel::controller_channel(net::shard_pool* shards, size_t home_shard,
                                       controller::quorum_controller* controller, raft::raft_node& node,
                                       net::peer_client* client, int32_t request_timeout_ms)
    : _shards(shards),
      _home_shard(home_shard),
      _controller(controller),
      _node(node),
      _client(client),
      _request_timeout_ms(request_timeout_ms) {}

asio::awaitable<controller_outcome> controller_channel::wait_committed(int64_t offset, int32_t timeout_ms) {
  if (_node.state().high_watermark() > offset) co_return controller_outcome::answered;
  auto wait = std::make_shared<commit_wait>();
  wait->offset = offset;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(std::chrono::milliseconds(timeout_ms));
  wait->timer = &timer;
  _waits.push_back(wait);
  std::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  wait->timer = nullptr;
  std::erase(_waits, wait);
  if (!wait->done) co_return controller_outcome::timed_out;
  co_return wait->committed ? controller_outcome::answered : controller_outcome::not_committed;
}

bool controller_channel::brokers_applied(int64_t offset) const {
  if (!_controller) return true;
  const auto progress = _node.state().progress();
  const auto image = _controller->image();
  for (const auto& [broker_id, broker] : image->brokers) {
    if (broker.fenced || broker_id == _node.state().node_id()) continue;  // this node applies as it commits
    const int32_t id = broker_id;  // a structured binding cannot be captured before C++20 in clang 14
    const auto it = std::find_if(progress.begin(), progress.end(),
                                 [id](const raft::replica_progress& p) { return p.replica_id == id; });
    if (it == progress.end() || it->seen_high_watermark <= offset) return false;
  }
  return true;
}

asio::awaitable<void> controller_channel::wait_brokers_applied(int64_t offset, int32_t timeout_ms) {
  // Followers fetch again as soon as they have applied an answer, so this is a few milliseconds on a healthy
  // quorum; a short poll keeps the raft node free of a second kind of waiter.
  constexpr auto poll = std::chrono::milliseconds(2);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!brokers_applied(offset) && std::chrono::steady_clock::now() < deadline) {
    timer.expires_after(poll);
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

void controller_channel::on_commit(int64_t high_watermark) {
  for (auto& w : _waits) {
    if (w->done || w->offset >= high_watermark) continue;
    w->done = true;
    w->committed = true;
    if (w->timer) w->timer->cancel();
  }
}

void controller_channel::on_deactivated() {
  for (auto& w : _waits) {
    if (w->done) continue;
    w->done = true;
    w->committed = false;
    if (w->timer) w->timer->cancel();
  }
}

asio::awaitable<result<std::vector<uint8_t>>> controller_channel::forward(int16_t api_key, int16_t version,
                                                                          std::vector<uint8_t> body,
                                                                          bool flexible, int32_t timeout_ms) {
  const int32_t leader = _node.state().leader_id();
  if (leader < 0 || leader == _node.state().node_id() || !_client) {
    co_return status::error(error_code::not_controller, "no active controller known");
  }
  auto endpoint = _node.endpoint_of(leader);
  if (!endpoint) co_return status::error(error_code::not_controller, "the active controller has no address");
  // A named address: GCC 12 mishandles a braced temporary passed to a coroutine.
  net::peer_address to{endpoint->host, endpoint->port};
  auto answer = co_await _client->call(to, api_key, version, protocol::request_header_version(flexible),
                                       flexible ? 1 : 0, std::move(body), timeout_ms);
  if (!answer.ok()) {
    subsystem_logger("broker")->debug("forwarding API {} to controller {} failed: {}", api_key, leader,
                                      answer.error().message);
  }
  co_return answer;
}

replication::alter_partition_sender alter_partition_sender(controller_channel& channel) {
  return [&channel](const protocol::alter_partition_request& request)
             -> asio::awaitable<std::optional<protocol::alter_partition_response>> {
    // A named callable (GCC bug 100611: a prvalue argument of a coroutine may be destroyed twice).
    auto local = [&request](controller::quorum_controller& c) {
      return c.alter_partition(request, replication::alter_partition_version);
    };
    auto answer = co_await channel.call<protocol::alter_partition_response>(
        request, replication::alter_partition_version, /*may_forward=*/true, local);
    if (!answer.ok()) co_return std::nullopt;
    co_return std::move(answer.response);
  };
}

}  // namespace mala::broker
