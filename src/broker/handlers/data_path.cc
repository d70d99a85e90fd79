#include "handlers/data_path.h"

#include <system_error>

#include <asio/redirect_error.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace mala::broker::handlers {

int64_t now_ms(const broker_services& services) {
  if (services.clock_ms) return services.clock_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const metadata::partition_state* find_partition(const metadata::metadata_image& image,
                                                const std::string& topic, int32_t partition) {
  const auto* t = image.find_topic(topic);
  if (!t || partition < 0) return nullptr;
  for (const auto& p : t->partitions) {
    if (p.partition == partition) return &p;
  }
  return nullptr;
}

result<replication::partition*> hosted_partition(const broker_services& services, const std::string& topic,
                                                 int32_t partition) {
  const std::string name = topic + "-" + std::to_string(partition);
  if (services.local_replica_offline && services.local_replica_offline(topic, partition)) {
    return status::error(error_code::kafka_storage_error, name + ": the log dir of this replica is offline");
  }
  replication::partition* p = services.replicas ? services.replicas->get({topic, partition}) : nullptr;
  if (!p) {
    return status::error(error_code::not_leader_or_follower,
                         name + ": not hosted on node " + std::to_string(services.node_id));
  }
  return p;
}

current_leader find_current_leader(const metadata::metadata_image& image, const std::string& topic,
                                   int32_t partition, const std::string& listener_name) {
  current_leader out;
  const auto* p = find_partition(image, topic, partition);
  if (!p) return out;
  out.leader_id = p->leader;
  out.leader_epoch = p->leader_epoch;
  auto broker = image.brokers.find(p->leader);
  if (broker != image.brokers.end()) {
    if (const auto* e = broker->second.endpoint_for(listener_name)) {
      out.endpoint = *e;
      out.rack = broker->second.rack;
    }
  }
  return out;
}

waiter_group::waiter_group(size_t count, size_t wake_after) : _state(std::make_shared<state>()) {
  _state->fired.assign(count, false);
  _state->errors.assign(count, error_code::none);
  _state->wake_after = wake_after;
  _handles.resize(count);
}

replication::waiter_callback waiter_group::callback(size_t i) {
  return [s = _state, i](error_code error) {
    if (s->fired[i]) return;
    s->fired[i] = true;
    s->errors[i] = error;
    ++s->fired_count;
    if (s->fired_count >= s->wake_after && s->timer) s->timer->cancel();
  };
}

void waiter_group::track(size_t i, replication::partition* p, replication::waiter_handle handle) {
  _handles[i] = {p, handle};
}

asio::awaitable<void> waiter_group::wait_until(std::chrono::steady_clock::time_point deadline) {
  if (woken()) co_return;
  asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
  _state->timer = &timer;
  // Also when the coroutine is destroyed mid-wait (its shard shutting down): no callback may touch the timer.
  struct forget_timer {
    state* s;
    ~forget_timer() { s->timer = nullptr; }
  } guard{_state.get()};
  std::error_code ec;  // operation_aborted when woken, success at the deadline: both just end the wait
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

void waiter_group::cancel_unfired() {
  for (size_t i = 0; i < _handles.size(); ++i) {
    auto& [p, handle] = _handles[i];
    if (p && handle.valid() && !_state->fired[i]) p->cancel_waiter(handle);
    p = nullptr;
    handle = {};
  }
}

result<std::vector<uint8_t>> read_slice(const storage::file_slice& slice) {
  if (!slice.file || slice.size <= 0) return std::vector<uint8_t>{};
  return slice.file->read(slice.position, slice.size);
}

}  // namespace mala::broker::handlers
