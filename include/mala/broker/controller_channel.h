// How the broker side reaches the active controller (Kafka's ForwardingManager and
// NodeToControllerChannelManager in one): controller-bound work (CreateTopics, DeleteTopics,
// CreatePartitions, AlterConfigs, IncrementalAlterConfigs, AllocateProducerIds, BrokerRegistration,
// BrokerHeartbeat, and the internal topic creation of Metadata and FindCoordinator) runs on this node's
// controller when it is the active one, and is otherwise sent as the same request to the active
// controller's CONTROLLER listener (the quorum leader's address from controller.quorum.voters), whose answer
// is relayed. Kafka wraps forwarded requests in an Envelope; Mala sends the request itself, so the answer is
// the controller's own.
//
// A local write is answered only once the metadata log has committed it (on a Raft quorum the controller
// applies its writes at once and the high watermark catches up later); a write that is not committed within
// the request timeout is timed_out (handlers answer REQUEST_TIMED_OUT, as Kafka's controller does); one whose
// controller lost the leadership meanwhile is not_committed (NOT_CONTROLLER, Kafka's NotControllerException,
// answered only to requests that cannot be forwarded; see below).
//
// A request that arrived on a controller listener is never forwarded again (a standby answers
// NOT_CONTROLLER): that keeps two nodes with different views of the leader from bouncing a request.
//
// Like Kafka's NodeToControllerChannelManager, a request that found no active controller (none elected yet,
// this node elected but not yet active, the leader unreachable, or its answer NOT_CONTROLLER because the
// leadership moved on) is tried again every `forward_retry_backoff` until the timeout, then answered
// REQUEST_TIMED_OUT: a client never sees NOT_CONTROLLER from a broker, whatever id Metadata named. So is a
// client's request whose local write lost the leadership before it committed.
//
// Threads: call() from any shard; the rest is the home shard's (shard 0), where the controller, the raft
// node and the peer client live.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "mala/common/error_code.h"
#include "mala/controller/quorum_controller.h"
#include "mala/net/peer_client.h"
#include "mala/net/shard_pool.h"
#include "mala/protocol/request_header.h"
#include "mala/protocol/wire.h"
#include "mala/raft/raft_node.h"
#include "mala/replication/alter_partition_manager.h"

namespace mala::broker {

// Whether a write's answer also waits for the other brokers to apply it (CreateTopics and the like: a client
// that creates a topic through one broker and then asks another must find it there).
enum class broker_propagation : int8_t { commit_only, every_live_broker };

enum class controller_outcome : int8_t {
  answered,       // the response is the controller's answer
  no_controller,  // no active controller could be reached (not this node, none known, or unreachable)
  not_committed,  // this node's controller wrote but lost leadership before the commit
  timed_out,      // this node's controller wrote, and the commit did not come within the timeout
};

// Whether an answer from the node believed to be the active controller says it is not (any top-level or
// per-entry error code NOT_CONTROLLER): the request goes to the new active controller.
template <typename Response>
bool answers_not_controller(const Response& r) {
  const int16_t code = to_wire(error_code::not_controller);
  const auto any_entry = [code](const auto& entries) {
    for (const auto& e : entries) {
      if constexpr (requires { e.error_code; }) {
        if (e.error_code == code) return true;
      }
    }
    return false;
  };
  if constexpr (requires { r.error_code; }) {
    if (r.error_code == code) return true;
  }
  if constexpr (requires { r.topics.begin(); }) {
    if (any_entry(r.topics)) return true;
  }
  if constexpr (requires { r.results.begin(); }) {
    if (any_entry(r.results)) return true;
  }
  if constexpr (requires { r.responses.begin(); }) {
    if (any_entry(r.responses)) return true;
  }
  if constexpr (requires { r.filter_results.begin(); }) {
    if (any_entry(r.filter_results)) return true;
  }
  return false;
}

template <typename Response>
struct controller_answer {
  controller_outcome outcome = controller_outcome::no_controller;
  std::optional<Response> response;
  bool forwarded = false;  // answered by the active controller on another node
  bool ok() const { return outcome == controller_outcome::answered; }
  // The error a handler answers when !ok(): REQUEST_TIMED_OUT for a commit that did not come in time,
  // NOT_CONTROLLER otherwise.
  error_code failure() const {
    return outcome == controller_outcome::timed_out ? error_code::request_timed_out
                                                    : error_code::not_controller;
  }
};

class controller_channel {
 public:
  // `controller` null: no controller role here. `node` is this node's replica of the metadata quorum (a
  // single voter is its own leader); `client` carries forwarded requests (null: nothing is forwarded).
  controller_channel(net::shard_pool* shards, size_t home_shard, controller::quorum_controller* controller,
                     raft::raft_node& node, net::peer_client* client, int32_t request_timeout_ms);
  controller_channel(const controller_channel&) = delete;
  controller_channel& operator=(const controller_channel&) = delete;

  // Runs local(controller) on the active local controller and waits for its writes to commit; otherwise,
  // when `may_forward`, sends `request` at `version` to the active controller.
  // `timeout_ms` bounds the wait for the commit and for a forwarded answer (-1: the channel's request
  // timeout).
  // With broker_propagation::every_live_broker a local write is answered once every unfenced broker of the
  // quorum has applied it too (the Raft leader sees that in their Fetch requests, raft::replica_progress::
  // seen_high_watermark), waiting at most `max_propagation_wait` and never past the timeout: a broker that is
  // unreachable but not yet fenced delays the answer, it does not fail it. Kafka answers at the commit and
  // lets brokers learn the change afterwards; clients then see UNKNOWN_TOPIC_OR_PARTITION from a broker that
  // has not yet, and librdkafka keeps that answer until its next metadata refresh.
  template <typename Response, typename Request, typename Local>
  asio::awaitable<controller_answer<Response>> call(
      const Request& request, int16_t version, bool may_forward, Local local, int32_t timeout_ms = -1,
      broker_propagation propagation = broker_propagation::commit_only);

  static constexpr std::chrono::milliseconds max_propagation_wait{3000};
  static constexpr std::chrono::milliseconds forward_retry_backoff{100};

  // Home shard: the metadata log committed everything below `high_watermark`.
  void on_commit(int64_t high_watermark);
  // Home shard: the local controller became standby; waiting writes are not_committed.
  void on_deactivated();

 private:
  struct commit_wait {
    int64_t offset;
    bool done = false;
    bool committed = false;
    asio::steady_timer* timer = nullptr;
  };

  bool local_active() const { return _controller && _controller->active(); }
  // The outcome of waiting for `offset` to commit: answered (committed), not_committed (leadership lost) or
  // timed_out.
  asio::awaitable<controller_outcome> wait_committed(int64_t offset, int32_t timeout_ms);
  // Waits until every unfenced broker other than this node has seen the high watermark pass `offset`, or
  // `timeout_ms` passed; polls the Raft leader's view of its followers.
  asio::awaitable<void> wait_brokers_applied(int64_t offset, int32_t timeout_ms);
  bool brokers_applied(int64_t offset) const;
  asio::awaitable<result<std::vector<uint8_t>>> forward(int16_t api_key, int16_t version,
                                                        std::vector<uint8_t> body, bool flexible,
                                                        int32_t timeout_ms);
  template <typename Response, typename Request, typename Local>
  asio::awaitable<controller_answer<Response>> call_on_home_shard(const Request& request, int16_t version,
                                                                  bool may_forward, Local& local,
                                                                  int32_t timeout_ms,
                                                                  broker_propagation propagation);

  net::shard_pool* _shards;
  size_t _home_shard;
  controller::quorum_controller* _controller;
  raft::raft_node& _node;
  net::peer_client* _client;
  int32_t _request_timeout_ms;
  std::vector<std::shared_ptr<commit_wait>> _waits;
};

// How this node's ISR changes reach the active controller (replication::alter_partition_manager):
// AlterPartition through `channel`, forwarded when another node is the active controller. `channel` outlives
// the sender.
replication::alter_partition_sender alter_partition_sender(controller_channel& channel);

template <typename Response, typename Request, typename Local>
asio::awaitable<controller_answer<Response>> controller_channel::call_on_home_shard(
    const Request& request, int16_t version, bool may_forward, Local& local, int32_t timeout_ms,
    broker_propagation propagation) {
  if (timeout_ms < 0) timeout_ms = _request_timeout_ms;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  const auto left_ms = [&deadline] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
        .count();
  };
  controller_answer<Response> answer;
  std::vector<uint8_t> encoded;
  for (;;) {
    if (local_active()) {
      answer.response = local(*_controller);
      const int64_t written = _controller->last_written_offset();
      answer.outcome = written < 0 ? controller_outcome::answered
                                   : co_await wait_committed(
                                         written, static_cast<int32_t>(std::max<int64_t>(left_ms(), 0)));
      if (answer.ok() && written >= 0 && propagation == broker_propagation::every_live_broker) {
        const auto left = std::min<int64_t>(left_ms(), max_propagation_wait.count());
        if (left > 0) co_await wait_brokers_applied(written, static_cast<int32_t>(left));
      }
      if (answer.outcome != controller_outcome::not_committed || !may_forward) co_return answer;
      // The leadership moved before the commit: like a Kafka broker, try the new active controller (the write
      // may have committed there after all; then the retry gets that answer, e.g. TOPIC_ALREADY_EXISTS).
      answer = {};
    }
    if (!may_forward) co_return answer;
    if (encoded.empty()) {
      protocol::wire_writer w(encoded);
      request.encode(w, version);
    }
    if (const int64_t left = left_ms(); left > 0) {
      auto bytes = co_await forward(Request::api_key, version, encoded, Request::is_flexible(version),
                                    static_cast<int32_t>(left));
      if (bytes.ok()) {
        protocol::wire_reader r(*bytes);
        Response response;
        if (response.decode(r, version) == protocol::decode_status::ok && !answers_not_controller(response)) {
          answer.response = std::move(response);
          answer.outcome = controller_outcome::answered;
          answer.forwarded = true;
          co_return answer;
        }
      }
    }
    const int64_t left = left_ms();
    if (left <= 0) {
      answer.outcome = controller_outcome::timed_out;
      co_return answer;
    }
    asio::steady_timer backoff(co_await asio::this_coro::executor);
    backoff.expires_after(std::min(forward_retry_backoff, std::chrono::milliseconds(left)));
    std::error_code ec;
    co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

template <typename Response, typename Request, typename Local>
asio::awaitable<controller_answer<Response>> controller_channel::call(const Request& request, int16_t version,
                                                                      bool may_forward, Local local,
                                                                      int32_t timeout_ms,
                                                                      broker_propagation propagation) {
  if (!_shards) {
    co_return co_await call_on_home_shard<Response>(request, version, may_forward, local, timeout_ms,
                                                    propagation);
  }
  // A named callable (GCC bug 100611: a prvalue argument of a coroutine may be destroyed twice).
  auto on_home = [this, &request, version, may_forward, &local, timeout_ms,
                  propagation]() -> asio::awaitable<controller_answer<Response>> {
    co_return co_await call_on_home_shard<Response>(request, version, may_forward, local, timeout_ms,
                                                    propagation);
  };
  co_return co_await _shards->invoke_on_async(_home_shard, std::move(on_home));
}

}  // namespace mala::broker
