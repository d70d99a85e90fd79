#include "mala/controller/replica_placement.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace mala::controller {

namespace {

// SplitMix64: a tiny, well-mixed generator, so that the seed alone fixes the placement on every platform
// (std:: distributions are not specified bit for bit).
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

struct arranged_broker {
  int32_t id;
  size_t rack;  // index into the sorted rack names
};

// The brokers in rack-alternating order: the first broker of every rack, then the second of every rack, and
// so on (racks sorted by name, brokers of a rack by id; brokers without broker.rack form one rack of their
// own, as Kafka's placer treats Optional.empty()). Consecutive entries are on different racks while racks
// last, so a leader that walks this list also alternates racks.
std::vector<arranged_broker> arrange(std::span<const placement_broker> brokers, size_t& rack_count) {
  std::map<std::optional<std::string>, std::set<int32_t>> by_rack;  // nullopt sorts first
  std::set<int32_t> seen;
  for (const auto& b : brokers) {
    if (!seen.insert(b.id).second) continue;  // a broker listed twice counts once
    by_rack[b.rack].insert(b.id);
  }
  rack_count = by_rack.size();
  std::vector<std::vector<int32_t>> racks;
  for (const auto& [rack, ids] : by_rack) racks.emplace_back(ids.begin(), ids.end());
  std::vector<arranged_broker> out;
  for (size_t round = 0; out.size() < seen.size(); ++round) {
    for (size_t r = 0; r < racks.size(); ++r) {
      if (round < racks[r].size()) out.push_back({racks[r][round], r});
    }
  }
  return out;
}

}  // namespace

result<std::vector<std::vector<int32_t>>> place_replicas(std::span<const placement_broker> brokers,
                                                         int32_t partitions, int32_t replication_factor,
                                                         uint64_t seed) {
  // The same checks, in the same order and words, as Kafka's StripedReplicaPlacer.
  if (replication_factor <= 0) {
    return status::error(error_code::invalid_replication_factor,
                         "Invalid replication factor " + std::to_string(replication_factor) +
                             ": the replication factor must be positive.");
  }
  size_t rack_count = 0;
  const std::vector<arranged_broker> arranged = arrange(brokers, rack_count);
  if (arranged.empty())
    return status::error(error_code::invalid_replication_factor,
                         "All brokers are currently fenced, or have all their log directories cordoned.");
  const size_t n = arranged.size();
  if (static_cast<size_t>(replication_factor) > n) {
    return status::error(error_code::invalid_replication_factor,
                         "The target replication factor of " + std::to_string(replication_factor) +
                             " cannot be reached because only " + std::to_string(n) +
                             " broker(s) are registered or some brokers have all their log directories "
                             "cordoned.");
  }
  if (partitions <= 0) {
    return status::error(error_code::invalid_partitions,
                         "Number of partitions was set to an invalid non-positive value.");
  }

  // Kafka starts each placement at a random broker with a random follower shift; the seed stands in for both.
  uint64_t state = seed;
  const size_t start = static_cast<size_t>(splitmix64(state) % n);
  size_t shift = static_cast<size_t>(splitmix64(state) % n);

  std::vector<std::vector<int32_t>> out;
  out.reserve(static_cast<size_t>(partitions));
  std::vector<size_t> candidates;
  std::vector<bool> rack_in_round(rack_count);
  for (size_t p = 0; p < static_cast<size_t>(partitions); ++p) {
    // After every broker has led once, shift the followers by one more so that the same leader does not get
    // the same followers again (the stride of Kafka's AdminUtils assignment).
    if (p > 0 && p % n == 0) ++shift;
    const size_t first = (start + p) % n;
    std::vector<int32_t> replicas{arranged[first].id};
    replicas.reserve(static_cast<size_t>(replication_factor));

    // Followers: every other broker once, starting `shift` places after the leader.
    candidates.clear();
    for (size_t j = 0; j + 1 < n; ++j) candidates.push_back((first + 1 + (shift + j) % (n - 1)) % n);

    // Rack awareness: within a round every rack gets one replica before any rack gets a second; a round ends
    // when every rack has one. A pass that finds no acceptable broker (the racks still missing from the round
    // have no broker left) ends the round early.
    std::fill(rack_in_round.begin(), rack_in_round.end(), false);
    size_t racks_in_round = 1;
    rack_in_round[arranged[first].rack] = true;
    while (replicas.size() < static_cast<size_t>(replication_factor)) {
      bool accepted = false;
      for (auto it = candidates.begin();
           it != candidates.end() && replicas.size() < static_cast<size_t>(replication_factor);) {
        if (racks_in_round == rack_count) {
          std::fill(rack_in_round.begin(), rack_in_round.end(), false);
          racks_in_round = 0;
        }
        const arranged_broker& b = arranged[*it];
        if (rack_in_round[b.rack]) {
          ++it;
          continue;
        }
        rack_in_round[b.rack] = true;
        ++racks_in_round;
        replicas.push_back(b.id);
        it = candidates.erase(it);
        accepted = true;
      }
      if (!accepted) {
        std::fill(rack_in_round.begin(), rack_in_round.end(), false);
        racks_in_round = 0;
      }
    }
    out.push_back(std::move(replicas));
  }
  return out;
}

}  // namespace mala::controller
