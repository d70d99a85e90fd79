#include "mala/replication/replication_quota.h"

#include <algorithm>
#include <charconv>
#include <limits>

namespace mala::replication {

replication_quota::replication_quota(int32_t samples, int32_t window_ms)
    : _samples(std::clamp(samples, 2, max_samples)), _window_ms(std::max(window_ms, 1)) {}

void replication_quota::set_bound(std::optional<int64_t> bytes_per_second) {
  const bool none =
      !bytes_per_second || *bytes_per_second < 0 || *bytes_per_second == std::numeric_limits<int64_t>::max();
  _bound.store(none ? -1 : *bytes_per_second, std::memory_order_relaxed);
}

std::optional<int64_t> replication_quota::bound() const {
  const int64_t b = _bound.load(std::memory_order_relaxed);
  if (b < 0) return std::nullopt;
  return b;
}

namespace {

constexpr uint64_t low_bits(int bits) {
  return (uint64_t{1} << bits) - 1;
}

}  // namespace

void replication_quota::record(int64_t bytes, int64_t now_ms) {
  if (bytes <= 0) return;
  const int64_t window = now_ms / _window_ms;
  const uint64_t tag = (static_cast<uint64_t>(window) + 1) & low_bits(window_bits);
  auto& slot = _slots[static_cast<size_t>(window % _samples)];
  const uint64_t add = std::min<uint64_t>(static_cast<uint64_t>(bytes), low_bits(byte_bits));
  uint64_t seen = slot.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t seen_tag = seen >> byte_bits;
    // The slot's window is this one: add to it (saturating); an older one: this window starts it afresh.
    uint64_t next = 0;
    if (seen_tag == tag) {
      next = (tag << byte_bits) | std::min(low_bits(byte_bits), (seen & low_bits(byte_bits)) + add);
    } else {
      next = (tag << byte_bits) | add;
    }
    if (slot.compare_exchange_weak(seen, next, std::memory_order_relaxed)) return;
  }
}

double replication_quota::rate(int64_t now_ms) const {
  const int64_t window = now_ms / _window_ms;
  int64_t total = 0;
  int64_t oldest = window;
  bool any = false;
  for (int32_t i = 0; i < _samples; ++i) {
    const uint64_t v = _slots[static_cast<size_t>(i)].load(std::memory_order_relaxed);
    if (v == 0) continue;
    // How many windows ago the sample's window was (its tag holds the low bits of the window number + 1).
    const uint64_t now_tag = (static_cast<uint64_t>(window) + 1) & low_bits(window_bits);
    const uint64_t age = (now_tag - (v >> byte_bits)) & low_bits(window_bits);
    if (age >= static_cast<uint64_t>(_samples)) continue;  // out of the window (or from a clock step back)
    total += static_cast<int64_t>(v & low_bits(byte_bits));
    oldest = std::min(oldest, window - static_cast<int64_t>(age));
    any = true;
  }
  if (!any) return 0;
  // Kafka's SimpleRate.windowSize: the time since the oldest sample began, at least one window.
  const int64_t elapsed = std::max<int64_t>(now_ms - oldest * _window_ms, _window_ms);
  return static_cast<double>(total) * 1000.0 / static_cast<double>(elapsed);
}

bool replication_quota::exceeded(int64_t now_ms) const {
  const int64_t b = _bound.load(std::memory_order_relaxed);
  if (b < 0) return false;
  return rate(now_ms) > static_cast<double>(b);
}

bool throttled_replicas::contains(int32_t partition) const {
  return all || std::binary_search(partitions.begin(), partitions.end(), partition);
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<int32_t> parse_int(std::string_view s) {
  s = trim(s);
  int32_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

throttled_replicas parse_throttled_replicas(std::string_view value, int32_t node_id) {
  throttled_replicas out;
  value = trim(value);
  if (value == "*") {
    out.all = true;
    return out;
  }
  // "partition:broker,..." (validated when the config was written); entries that do not parse name no one.
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view entry = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    const size_t colon = entry.find(':');
    if (colon == std::string_view::npos) continue;
    const auto partition = parse_int(entry.substr(0, colon));
    const auto broker = parse_int(entry.substr(colon + 1));
    if (partition && broker && *broker == node_id) out.partitions.push_back(*partition);
  }
  std::sort(out.partitions.begin(), out.partitions.end());
  out.partitions.erase(std::unique(out.partitions.begin(), out.partitions.end()), out.partitions.end());
  return out;
}

}  // namespace mala::replication
