// A doubling retry delay, as Kafka's clients and managers retry a failed call without jitter: `initial_ms`
// (at least 1 ms) after the first failure, twice the previous delay after each further one, never more than
// `max_ms`, and back to `initial_ms` once a call succeeds.
//
// Threads: a plain value; its owner's thread only.
#pragma once

#include <algorithm>
#include <cstdint>

namespace mala {

class exponential_backoff {
 public:
  exponential_backoff(int64_t initial_ms, int64_t max_ms)
      : _initial_ms(std::max<int64_t>(initial_ms, 1)),
        _max_ms(std::max(_initial_ms, max_ms)),
        _next_ms(_initial_ms) {}

  // The delay before retrying after a failure; the next failure waits twice as long (up to the maximum).
  int64_t after_failure() {
    const int64_t wait = _next_ms;
    _next_ms = _next_ms > _max_ms / 2 ? _max_ms : _next_ms * 2;
    return wait;
  }

  // A success: the next failure waits the initial delay again.
  void reset() { _next_ms = _initial_ms; }

 private:
  int64_t _initial_ms;
  int64_t _max_ms;
  int64_t _next_ms;
};

}  // namespace mala
