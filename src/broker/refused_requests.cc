#include "mala/broker/refused_requests.h"

#include <mutex>

#include "mala/common/logging.h"

namespace mala::broker {

std::optional<uint64_t> refusal_rate_limit::admit(const std::string& key,
                                                  std::chrono::steady_clock::time_point now) {
  auto [it, first] = _entries.try_emplace(key);
  entry& e = it->second;
  if (!first && now - e.last_logged < _interval) {
    ++e.suppressed;
    return std::nullopt;
  }
  const uint64_t left_out = e.suppressed;
  e.last_logged = now;
  e.suppressed = 0;
  // Bound the memory a client inventing keys could take: forget everything past a few thousand kinds.
  if (_entries.size() > 4096) _entries.clear();
  return left_out;
}

void log_refused_request(const std::string& key, std::string_view message) {
  static std::mutex mutex;
  static refusal_rate_limit limit(refusal_log_interval);
  std::optional<uint64_t> left_out;
  {
    std::lock_guard lock(mutex);
    left_out = limit.admit(key, std::chrono::steady_clock::now());
  }
  if (!left_out) return;
  if (*left_out == 0) {
    subsystem_logger("broker")->warn("{}", message);
  } else {
    subsystem_logger("broker")->warn("{} ({} more like it in the last {} s not logged)", message, *left_out,
                                     refusal_log_interval.count());
  }
}

}  // namespace mala::broker
