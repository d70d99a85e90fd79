// Helpers shared by the hand-driven replica tests (replica_test.cc, replica_snapshot_test.cc).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "mala/raft/log.h"
#include "mala/raft/replica.h"

namespace mala::raft::test {

inline raft_config config_for(int32_t id, std::vector<int32_t> voters, uint64_t random_seed = 42) {
  raft_config c;
  c.node_id = id;
  c.voters = std::move(voters);
  c.random_seed = random_seed;
  return c;
}

// Appends one entry per epoch given, each with its offset's low byte as payload.
inline void fill(memory_raft_log& log, const std::vector<int32_t>& epochs) {
  for (int32_t epoch : epochs) {
    const log_entry e{log.end_offset(), epoch, entry_type::data, {static_cast<uint8_t>(log.end_offset())}};
    log.append(std::span<const log_entry>(&e, 1));
  }
}

// The messages of type T among a step's effects, with their destinations.
template <typename T>
std::vector<std::pair<int32_t, T>> sent(const effects& e) {
  std::vector<std::pair<int32_t, T>> out;
  for (const outbound_message& m : e.messages) {
    if (const T* body = std::get_if<T>(&m.message.body)) out.emplace_back(m.destination, *body);
  }
  return out;
}

}  // namespace mala::raft::test
