// Helpers shared by the hand-driven replica tests (replica_test.cc, replica_snapshot_test.cc).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
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

// Replicas wired by hand: messages go through a FIFO queue, one delivery per step, and a link filter.
struct manual_net {
  struct member {
    memory_raft_log log;
    std::unique_ptr<replica> raft;
    std::vector<log_operation> log_operations;
    std::vector<voter_change_answer> answers;  // AddRaftVoter / RemoveRaftVoter answers it gave
  };
  struct in_flight {
    int32_t from;
    int32_t to;
    raft_message message;
  };
  std::map<int32_t, std::unique_ptr<member>> members;
  std::deque<in_flight> queue;
  int64_t now = 0;
  std::function<bool(int32_t, int32_t)> link = [](int32_t, int32_t) { return true; };

  member& add(raft_config config, const std::vector<int32_t>& epochs, std::optional<quorum_state> persisted) {
    auto m = std::make_unique<member>();
    fill(m->log, epochs);
    const int32_t id = config.node_id;
    m->raft = std::make_unique<replica>(std::move(config), m->log, persisted, now);
    members[id] = std::move(m);
    collect(id);
    return *members[id];
  }
  replica& operator[](int32_t id) { return *members.at(id)->raft; }
  // The effects of `id`'s last step; its log counts as flushed right after them (a flush report has no log
  // operations of its own, so this ends).
  void collect(int32_t id) {
    member& m = *members.at(id);
    effects e = m.raft->take_effects();
    for (auto& op : e.log_operations) m.log_operations.push_back(op);
    for (auto& a : e.voter_change_answers) m.answers.push_back(std::move(a));
    for (auto& out : e.messages) queue.push_back({id, out.destination, std::move(out.message)});
    if (!e.log_operations.empty()) {
      m.raft->on_log_flushed(m.log.end_offset());
      collect(id);
    }
  }
  void tick(int32_t id, int64_t at) {
    now = at;
    members.at(id)->raft->tick(now);
    collect(id);
  }
  bool step() {
    if (queue.empty()) return false;
    in_flight m = std::move(queue.front());
    queue.pop_front();
    if (members.count(m.to) && link(m.from, m.to)) {
      if (const auto* u = std::get_if<update_voter_request>(&m.message.body)) {
        // The glue serves UpdateRaftVoter through replica::update_voter (the broker handler).
        voter_info v{u->voter_id, u->voter_directory_id, u->listener_name, {u->host, u->port}};
        member& leader = *members.at(m.to);
        leader.raft->update_voter(m.message.correlation_id, u->current_leader_epoch, v, u->min_kraft_version,
                                  u->max_kraft_version);
        collect(m.to);
        // ... and answers it as the handler does.
        for (const voter_change_answer& a : leader.answers) {
          if (a.request_id != m.message.correlation_id) continue;
          update_voter_response response;
          response.error_code = a.error;
          response.current_leader = {leader.raft->leader_id(), leader.raft->epoch()};
          queue.push_back({m.to, m.from, raft_message{m.message.correlation_id, response}});
        }
      } else {
        members.at(m.to)->raft->on_message(m.from, m.message);
      }
      collect(m.to);
    }
    return true;
  }
  void run(int max_steps = 10000) {
    for (int i = 0; i < max_steps && step(); ++i) {
    }
  }
};

}  // namespace mala::raft::test
