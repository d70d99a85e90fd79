#include "mala/replication/delayed_operation.h"

#include <system_error>

#include <asio/dispatch.hpp>
#include <asio/redirect_error.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace mala::replication {

namespace {

// Sleeps until `deadline` or until a callback cancels *timer_slot (which points at the sleeping timer while
// it sleeps): the wait of both waiter groups.
asio::awaitable<void> sleep_until_woken(asio::steady_timer*& timer_slot,
                                        std::chrono::steady_clock::time_point deadline) {
  asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
  timer_slot = &timer;
  // Also when the coroutine is destroyed mid-wait (its shard shutting down): no callback may touch the timer.
  struct forget_timer {
    asio::steady_timer*& slot;
    ~forget_timer() { slot = nullptr; }
  } guard{timer_slot};
  std::error_code ec;  // operation_aborted when woken, success at the deadline: both just end the wait
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

}  // namespace

waiter_group::waiter_group(size_t count, size_t wake_after) : _state(std::make_shared<state>()) {
  _state->fired.assign(count, false);
  _state->errors.assign(count, error_code::none);
  _state->wake_after = wake_after;
  _handles.resize(count);
}

waiter_callback waiter_group::callback(size_t i) {
  return [s = _state, i](error_code error) {
    if (s->fired[i]) return;
    s->fired[i] = true;
    s->errors[i] = error;
    ++s->fired_count;
    if (s->fired_count >= s->wake_after && s->timer) s->timer->cancel();
  };
}

void waiter_group::track(size_t i, partition* p, waiter_handle handle) {
  _handles[i] = {p, handle};
}

asio::awaitable<void> waiter_group::wait_until(std::chrono::steady_clock::time_point deadline) {
  if (woken()) co_return;
  auto keep = _state;  // the slot lives in the shared state
  co_await sleep_until_woken(keep->timer, deadline);
}

void waiter_group::cancel_unfired() {
  for (size_t i = 0; i < _handles.size(); ++i) {
    auto& [p, handle] = _handles[i];
    if (p && handle.valid() && !_state->fired[i]) p->cancel_waiter(handle);
    p = nullptr;
    handle = {};
  }
}

spanning_waiter_group::spanning_waiter_group(asio::any_io_executor home, size_t count, size_t wake_after)
    : _state(std::make_shared<state>()) {
  _state->home = std::move(home);
  _state->fired.assign(count, 0);
  _state->errors.assign(count, error_code::none);
  _state->wake_after = wake_after;
  _state->fired_on_shard.assign(count, 0);
  _state->handles.resize(count);
}

waiter_callback spanning_waiter_group::callback(size_t i) {
  return [s = _state, i](error_code error) {
    s->fired_on_shard[i] = 1;
    // In place when the waiter's shard is home, else posted there.
    asio::dispatch(s->home, [s, i, error] {
      if (s->fired[i]) return;
      s->fired[i] = 1;
      s->errors[i] = error;
      ++s->fired_count;
      if (s->fired_count >= s->wake_after && s->timer) s->timer->cancel();
    });
  };
}

void spanning_waiter_group::track(size_t i, partition* p, waiter_handle handle) {
  _state->handles[i] = {p, handle};
}

void spanning_waiter_group::cancel_unfired(const std::vector<size_t>& indices) {
  for (size_t i : indices) {
    auto& [p, handle] = _state->handles[i];
    if (p && handle.valid() && !_state->fired_on_shard[i]) p->cancel_waiter(handle);
    p = nullptr;
    handle = {};
  }
}

asio::awaitable<void> spanning_waiter_group::wait_until(std::chrono::steady_clock::time_point deadline) {
  if (woken()) co_return;
  auto keep = _state;  // the slot lives in the shared state
  co_await sleep_until_woken(keep->timer, deadline);
}

}  // namespace mala::replication
