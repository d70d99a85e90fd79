// Kafka's delayed-operation purgatories, for requests that wait on partitions: waiter_group parks a request
// (acks=all Produce, Fetch short of fetch.min.bytes, DeleteRecords) on waiters of one or more partitions
// until they fire or a deadline passes, and run_on_shard_async takes the work to the shard that owns the
// partitions (replica_placement::shard_of) and back.
//
// Threads: a waiter_group lives on the shard owning the partitions it waits on; run_on_shard_async is called
// from any shard.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>

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
