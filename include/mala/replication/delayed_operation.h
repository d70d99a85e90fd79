// Kafka's delayed-operation purgatories, for requests that wait on partitions: waiter_group parks a request
// (acks=all Produce, Fetch short of fetch.min.bytes, DeleteRecords) on waiters of one or more partitions
// until they fire or a deadline passes, and run_on_shard_async takes the work to the shard that owns the
// partitions (replica_placement::shard_of) and back; run_on_shards_async does so for a request's partitions
// on several shards at once and joins the answers.
//
// Threads: a waiter_group lives on the shard owning the partitions it waits on; run_on_shard_async and
// run_on_shards_async are called from any shard.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "mala/common/current_shard.h"
#include "mala/common/error_code.h"
#include "mala/net/shard_pool.h"
#include "mala/replication/partition.h"

// Every file that includes this header runs asio coroutines (run_on_shard_async, waiter_group).
#include "mala/net/coroutine_frame_warning.h"

namespace mala::replication {

// Runs the coroutine fn() returns on `shard` and resumes the caller on its own shard with its result
// (net::shard_pool::invoke_on_async); on that shard already, or without a shard pool (single-threaded
// tests), it runs in place. fn owns
// what the coroutine needs (captures or by-value parameters of the coroutine it calls). Pass it as a named
// variable (std::move(fn)), never as a lambda expression: GCC 12 destroys a prvalue argument of a coroutine
// twice (GCC bug 100611).
template <typename Fn>
auto run_on_shard_async(net::shard_pool* shards, size_t shard, Fn fn) -> decltype(fn()) {
  // Already there (the connection lives on the partition's shard): no hop.
  if (!shards || current_shard() == static_cast<int>(shard)) co_return co_await fn();
  co_return co_await shards->invoke_on_async(shard, std::move(fn));
}

namespace detail {

template <typename Awaitable>
struct awaitable_value;
template <typename T, typename Executor>
struct awaitable_value<asio::awaitable<T, Executor>> {
  using type = T;
};

// The join of run_on_shards_async: what each group's coroutine gave, touched only on the caller's shard (the
// coroutines' completions are posted there), and the caller's timer while it sleeps.
template <typename T>
struct shard_join {
  std::vector<T> results;
  std::vector<std::exception_ptr> errors;
  size_t running = 0;
  asio::steady_timer* timer = nullptr;
};

}  // namespace detail

// The fan-out of a request whose partitions are on several shards: for each (shard, work) of `groups`, runs
// the coroutine make(work) returns on that shard (make is called there, with the group's work by reference),
// all of them at once, and resumes the caller on its own shard once every one finished, with their results in
// group order. A group on the caller's shard, or every group without a shard pool (single-threaded tests),
// runs in place, after the others were started. make is shared by the groups' shards, which call it at the
// same time: it must not change its captures; the work and make live until all finished, so the coroutines
// may keep references to them. A coroutine that throws does not stop the others: once all finished, the
// first group's exception (in group order) is rethrown to the caller. Pass make as a named variable, never
// as a lambda expression (GCC bug 100611, see run_on_shard_async).
template <typename Work, typename Make>
auto run_on_shards_async(net::shard_pool* shards, std::vector<std::pair<size_t, Work>> groups, Make make)
    -> asio::awaitable<
        std::vector<typename detail::awaitable_value<std::invoke_result_t<Make&, Work&>>::type>> {
  using value = typename detail::awaitable_value<std::invoke_result_t<Make&, Work&>>::type;
  static_assert(std::is_default_constructible_v<value>, "co_spawn hands a failed coroutine's caller a T()");
  const asio::any_io_executor home = co_await asio::this_coro::executor;
  auto join = std::make_shared<detail::shard_join<value>>();
  join->results.resize(groups.size());
  join->errors.resize(groups.size());
  std::vector<size_t> in_place;
  for (size_t i = 0; i < groups.size(); ++i) {
    const size_t shard = groups[i].first;
    if (!shards || current_shard() == static_cast<int>(shard)) {
      in_place.push_back(i);
      continue;
    }
    auto start = [&make, &work = groups[i].second] { return make(work); };
    // Bound to home: co_spawn posts the completion there, so only home touches the join.
    auto finished = [join, i](std::exception_ptr error, value result) {
      if (error) {
        join->errors[i] = std::move(error);
      } else {
        join->results[i] = std::move(result);
      }
      if (--join->running == 0 && join->timer) join->timer->cancel();
    };
    ++join->running;
    asio::co_spawn(shards->context(shard), std::move(start), asio::bind_executor(home, std::move(finished)));
  }
  for (size_t i : in_place) {
    try {
      join->results[i] = co_await make(groups[i].second);
    } catch (...) {
      join->errors[i] = std::current_exception();
    }
  }
  if (join->running > 0) {
    asio::steady_timer timer(home, asio::steady_timer::time_point::max());
    // A completion that comes while the caller runs (between two waits) finds no timer and only counts: the
    // count is checked before each wait, on this same shard, so no completion goes unseen.
    struct forget_timer {
      detail::shard_join<value>* join;
      ~forget_timer() { join->timer = nullptr; }
    } forget{join.get()};
    join->timer = &timer;
    while (join->running > 0) {
      std::error_code cancelled;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, cancelled));
    }
  }
  for (auto& error : join->errors) {
    if (error) std::rethrow_exception(error);
  }
  co_return std::move(join->results);
}

// A request parked on waiters of one or more partitions. callback(i) is what waiter i registers; once
// `wake_after` of them have fired, wait_until() returns (Produce acks=all waits for all of its partitions,
// Fetch for any one). The group lives in the waiting coroutine's frame; the callbacks share its state, so one
// that fires after the wait ended (or after the frame is gone) does no harm. Owning shard only.
class waiter_group {
 public:
  waiter_group(size_t count, size_t wake_after);
  waiter_group(const waiter_group&) = delete;
  waiter_group& operator=(const waiter_group&) = delete;

  waiter_callback callback(size_t i);
  // Remembers where waiter i was registered, for cancel_unfired.
  void track(size_t i, partition* p, waiter_handle handle);
  bool fired(size_t i) const { return _state->fired[i]; }
  error_code error(size_t i) const { return _state->errors[i]; }
  bool woken() const { return _state->fired_count >= _state->wake_after; }

  // Sleeps until enough waiters fired or `deadline`; returns at once if they already have.
  asio::awaitable<void> wait_until(std::chrono::steady_clock::time_point deadline);
  // Withdraws the waiters that did not fire. Their partitions still exist: a partition that stops serving
  // (removal, role change) fires all of its waiters first.
  void cancel_unfired();

 private:
  struct state {
    std::vector<bool> fired;
    std::vector<error_code> errors;
    size_t fired_count = 0;
    size_t wake_after = 1;
    asio::steady_timer* timer = nullptr;  // the sleeping coroutine's timer, null while nobody sleeps
  };
  std::shared_ptr<state> _state;
  std::vector<std::pair<partition*, waiter_handle>> _handles;
};

// A waiter_group whose partitions live on several shards (a Produce or Fetch spanning shards): the request
// sleeps on its own shard (`home`) while its waiters are registered on the partitions' shards; a waiter that
// fires there posts the news home. Register (callback + track) on the partition's shard, in the same turn
// as the read or append it waits after, so nothing can slip in between; wait_until, fired and error on home;
// withdraw the waiters that did not fire on each shard with cancel_unfired(indices) (a partition that stops
// serving fires its waiters first, so no withdrawn waiter names a partition that is gone). The state is
// shared with the callbacks: the group may go before late callbacks run.
class spanning_waiter_group {
 public:
  spanning_waiter_group(asio::any_io_executor home, size_t count, size_t wake_after);
  spanning_waiter_group(const spanning_waiter_group&) = delete;
  spanning_waiter_group& operator=(const spanning_waiter_group&) = delete;

  // On waiter i's shard.
  waiter_callback callback(size_t i);
  void track(size_t i, partition* p, waiter_handle handle);
  // On waiter i's shard, for the indices registered there.
  void cancel_unfired(const std::vector<size_t>& indices);

  // On home.
  bool fired(size_t i) const { return _state->fired[i] != 0; }
  error_code error(size_t i) const { return _state->errors[i]; }
  bool woken() const { return _state->fired_count >= _state->wake_after; }
  // How many must fire (known once every shard registered its waiters; more than `count` until then).
  void set_wake_after(size_t n) { _state->wake_after = n; }
  asio::awaitable<void> wait_until(std::chrono::steady_clock::time_point deadline);

 private:
  struct state {
    asio::any_io_executor home;
    // Home's view.
    std::vector<uint8_t> fired;
    std::vector<error_code> errors;
    size_t fired_count = 0;
    size_t wake_after = 1;
    asio::steady_timer* timer = nullptr;
    // Each element touched only on its waiter's shard (distinct elements: no race between shards).
    std::vector<uint8_t> fired_on_shard;
    std::vector<std::pair<partition*, waiter_handle>> handles;
  };
  std::shared_ptr<state> _state;
};

}  // namespace mala::replication
