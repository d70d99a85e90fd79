// The time a request's own work runs on a shard thread: what Kafka's request quotas charge
// (ClientRequestQuotaManager: the request's thread time as a percentage of one thread, `request_percentage`).
//
// A connection runs each request as a coroutine spawned on a `metered_executor`, which wraps the connection's
// executor: every function it runs (the coroutine's start and each resumption after a wait) runs with the
// request's meter active on the thread and adds its duration. Time spent waiting (a long-poll Fetch, acks=all
// replication, a rebalance) is not charged, nor is other requests' work: when one meter's function runs
// another's inline (asio's dispatch on the same thread), the outer one pauses. The cost is two clock reads
// per resumption.
//
// Threads: a meter is used from the threads its request runs on, one at a time (a coroutine is never resumed
// on two threads at once); current_request_meter() is per thread.
#pragma once

#include <asio/execution.hpp>
#include <asio/prefer.hpp>
#include <asio/query.hpp>
#include <asio/require.hpp>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace mala::net {

class request_meter {
 public:
  // The time charged so far, the function running now included.
  int64_t elapsed_ns() const;

 private:
  friend class request_meter_scope;
  int64_t _charged_ns = 0;
};

// The meter whose function runs on this thread now; null outside any.
request_meter* current_request_meter();

// Makes `meter` the thread's active meter while it lives (pausing the one active before, which resumes when
// it ends).
class request_meter_scope {
 public:
  explicit request_meter_scope(request_meter* meter);
  ~request_meter_scope();
  request_meter_scope(const request_meter_scope&) = delete;
  request_meter_scope& operator=(const request_meter_scope&) = delete;

 private:
  request_meter* _previous;
};

// An executor that runs each function of `Inner` under a meter (asio's standard executor requirements: every
// property is queried, required and preferred through the inner executor).
template <typename Inner>
class metered_executor {
 public:
  metered_executor(Inner inner, std::shared_ptr<request_meter> meter)
      : _inner(std::move(inner)), _meter(std::move(meter)) {}

  template <typename Property>
  auto query(const Property& p) const -> decltype(asio::query(std::declval<const Inner&>(), p)) {
    return asio::query(_inner, p);
  }
  template <typename Property>
  auto require(const Property& p) const
      -> metered_executor<std::decay_t<decltype(asio::require(std::declval<const Inner&>(), p))>> {
    return {asio::require(_inner, p), _meter};
  }
  template <typename Property>
  auto prefer(const Property& p) const
      -> metered_executor<std::decay_t<decltype(asio::prefer(std::declval<const Inner&>(), p))>> {
    return {asio::prefer(_inner, p), _meter};
  }

  template <typename Function>
  void execute(Function&& f) const {
    asio::execution::execute(_inner,
                             metered_function<std::decay_t<Function>>{std::forward<Function>(f), _meter});
  }

  friend bool operator==(const metered_executor& a, const metered_executor& b) noexcept {
    return a._inner == b._inner && a._meter == b._meter;
  }
  friend bool operator!=(const metered_executor& a, const metered_executor& b) noexcept { return !(a == b); }

  const std::shared_ptr<request_meter>& meter() const { return _meter; }

 private:
  template <typename>
  friend class metered_executor;

  template <typename Function>
  struct metered_function {
    Function f;
    std::shared_ptr<request_meter> meter;
    void operator()() {
      request_meter_scope scope(meter.get());
      f();
    }
  };

  Inner _inner;
  std::shared_ptr<request_meter> _meter;
};

}  // namespace mala::net
