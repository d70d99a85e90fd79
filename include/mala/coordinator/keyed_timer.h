// Deadlines by key, as Kafka's coordinator timer keeps them (CoordinatorTimer.schedule(key, ...) replaces the
// pending operation of that key; cancel(key) drops it). Time is whatever the owner passes in; nothing here
// sleeps. Used by the group coordinator.
//
// Threads: one thread, the owner's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

namespace mala::coordinator {

class keyed_timer {
 public:
  // `on_earlier_deadline` is told when a newly scheduled deadline comes before every pending one.
  explicit keyed_timer(std::function<void(int64_t)> on_earlier_deadline = {})
      : _on_earlier(std::move(on_earlier_deadline)) {}

  void set_listener(std::function<void(int64_t)> listener) { _on_earlier = std::move(listener); }

  void schedule(const std::string& key, int64_t deadline_ms, std::function<void()> fn) {
    cancel(key);
    const auto before = next_deadline();
    const uint64_t seq = _next_seq++;
    _by_key[key] = entry{deadline_ms, seq, std::move(fn)};
    _by_deadline.emplace(deadline_ms, seq, key);
    if (_on_earlier && (!before || deadline_ms < *before)) _on_earlier(deadline_ms);
  }

  bool cancel(const std::string& key) {
    auto it = _by_key.find(key);
    if (it == _by_key.end()) return false;
    _by_deadline.erase({it->second.deadline, it->second.seq, key});
    _by_key.erase(it);
    return true;
  }

  // Cancels every key starting with `prefix`.
  void cancel_prefix(const std::string& prefix) {
    auto it = _by_key.lower_bound(prefix);
    while (it != _by_key.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
      _by_deadline.erase({it->second.deadline, it->second.seq, it->first});
      it = _by_key.erase(it);
    }
  }

  bool contains(const std::string& key) const { return _by_key.contains(key); }

  std::optional<int64_t> next_deadline() const {
    if (_by_deadline.empty()) return std::nullopt;
    return std::get<0>(*_by_deadline.begin());
  }

  // Runs the operations due at `now_ms`, earliest first. An operation may schedule or cancel others; one
  // scheduled for a time already past runs in the same call.
  void run_due(int64_t now_ms) {
    while (!_by_deadline.empty() && std::get<0>(*_by_deadline.begin()) <= now_ms) {
      const std::string key = std::get<2>(*_by_deadline.begin());
      _by_deadline.erase(_by_deadline.begin());
      auto it = _by_key.find(key);
      std::function<void()> fn = std::move(it->second.fn);
      _by_key.erase(it);
      fn();
    }
  }

  size_t size() const { return _by_key.size(); }

 private:
  struct entry {
    int64_t deadline = 0;
    uint64_t seq = 0;
    std::function<void()> fn;
  };
  std::function<void(int64_t)> _on_earlier;
  std::map<std::string, entry> _by_key;
  std::set<std::tuple<int64_t, uint64_t, std::string>> _by_deadline;
  uint64_t _next_seq = 1;
};

}  // namespace mala::coordinator
