// Replication throttles (Kafka's ReplicationQuotaManager, KIP-73): a byte rate bound on the replication
// traffic of throttled replicas, one for the leader side (leader.replication.throttled.rate: what this node
// sends to followers of its leader.replication.throttled.replicas) and one for the follower side
// (follower.replication.throttled.rate: what it fetches for its follower.replication.throttled.replicas).
// `kafka-reassign-partitions --throttle` sets both so that moving a replica does not starve clients.
//
// The rate is Kafka's SimpleRate over `replication.quota.window.num` samples (11) of
// `replication.quota.window.size.seconds` (1 s): the bytes of the samples still in the window (windows of up
// to 11 s ago), divided by the time since the oldest of them began, at least one window. Exceeded when the
// rate is above the bound; no bound (Kafka's default Long.MAX_VALUE) is never exceeded. Since a follower's
// fetch brings up to replica.fetch.max.bytes at once, throttled replication comes in bursts that average out
// to the bound over the window, as in Kafka.
//
// Threads: one object per node, shared by every shard (the fetch handlers of the leader side, the follower
// fetchers). Lock-free: each sample is one atomic word holding its window (aligned to window_ms) and its
// bytes, moved on with compare-and-swap, so bytes recorded at once on several threads are all counted.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace mala::replication {

class replication_quota {
 public:
  static constexpr int32_t max_samples = 64;
  // samples: replication.quota.window.num (clamped to 2..max_samples); window_ms:
  // replication.quota.window.size.seconds x 1000.
  explicit replication_quota(int32_t samples = 11, int32_t window_ms = 1000);

  // The bound in bytes per second; nullopt (or Long.MAX_VALUE) for none.
  void set_bound(std::optional<int64_t> bytes_per_second);
  std::optional<int64_t> bound() const;
  // Whether the bound is exceeded now (false without a bound).
  bool exceeded(int64_t now_ms) const;
  void record(int64_t bytes, int64_t now_ms);
  // Bytes per second over the window (Kafka's Rate.measure).
  double rate(int64_t now_ms) const;

 private:
  // A sample: the low window_bits bits of its window number (now_ms / window_ms) above the bytes recorded in
  // it; 0 is an unused slot (window numbers are stored plus one).
  static constexpr int window_bits = 24;
  static constexpr int byte_bits = 64 - window_bits;
  int32_t _samples;
  int32_t _window_ms;
  std::atomic<int64_t> _bound{-1};  // -1: none
  std::array<std::atomic<uint64_t>, max_samples> _slots{};
};

// A topic's `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas` as they
// concern one node (Kafka's TopicConfigHandler.parseThrottledPartitions): "*" throttles every partition;
// otherwise the partitions of the "partition:broker" entries naming this node.
struct throttled_replicas {
  bool all = false;
  std::vector<int32_t> partitions;  // sorted, unique

  bool contains(int32_t partition) const;
  bool empty() const { return !all && partitions.empty(); }
  bool operator==(const throttled_replicas&) const = default;
};
throttled_replicas parse_throttled_replicas(std::string_view value, int32_t node_id);

}  // namespace mala::replication
