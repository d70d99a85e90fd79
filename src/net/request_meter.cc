#include "mala/net/request_meter.h"

#include <chrono>

namespace mala::net {

namespace {

struct thread_meter {
  request_meter* active = nullptr;
  int64_t since_ns = 0;  // when the active meter's current stretch began
};
thread_local thread_meter current;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int64_t request_meter::elapsed_ns() const {
  if (current.active == this) return _charged_ns + (now_ns() - current.since_ns);
  return _charged_ns;
}

request_meter* current_request_meter() {
  return current.active;
}

request_meter_scope::request_meter_scope(request_meter* meter) : _previous(current.active) {
  const int64_t now = now_ns();
  if (_previous) _previous->_charged_ns += now - current.since_ns;
  current.active = meter;
  current.since_ns = now;
}

request_meter_scope::~request_meter_scope() {
  const int64_t now = now_ns();
  if (current.active) current.active->_charged_ns += now - current.since_ns;
  current.active = _previous;
  current.since_ns = now;
}

}  // namespace mala::net
