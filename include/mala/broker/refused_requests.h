// The log of requests Mala refuses because it does not serve what they ask for (an API key or version it does
// not serve, a transaction coordinator): one warning per kind of refusal and client at most every
// `refusal_log_interval`, with the number of repeats left out since the last one, so an operator sees why a
// client fails without a client in a retry loop flooding the log.
//
// Threads: log_refused_request may be called from any shard (one mutex); refusal_rate_limit is a plain value.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace mala::broker {

inline constexpr std::chrono::seconds refusal_log_interval{10};

// Which refusals to log now: the first of a key, then the first after each interval.
class refusal_rate_limit {
 public:
  explicit refusal_rate_limit(std::chrono::steady_clock::duration interval) : _interval(interval) {}
  // nullopt: stay quiet (counted); otherwise log now, with the number of refusals of `key` left out since the
  // last logged one.
  std::optional<uint64_t> admit(const std::string& key, std::chrono::steady_clock::time_point now);

 private:
  struct entry {
    std::chrono::steady_clock::time_point last_logged;
    uint64_t suppressed = 0;
  };
  std::chrono::steady_clock::duration _interval;
  std::map<std::string, entry> _entries;
};

// Logs `message` as a warning of the broker logger unless a refusal of the same `key` was logged within the
// interval (the key names the kind of refusal and the client, e.g. "api 65 v0 client foo").
void log_refused_request(const std::string& key, std::string_view message);

}  // namespace mala::broker
