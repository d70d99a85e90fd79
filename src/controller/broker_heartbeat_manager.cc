#include "mala/controller/broker_heartbeat_manager.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace mala::controller {

broker_control_state next_broker_state(broker_control_state current, const heartbeat_facts& facts) {
  using enum broker_control_state;
  switch (current) {
    case fenced:
      // A fenced broker that wants to stop may stop at once: it leads nothing.
      if (facts.want_shut_down) return shutdown_now;
      // Unfenced only once it has replayed the log up to its own registration (KIP-631).
      if (!facts.want_fence && facts.caught_up) return unfenced;
      return fenced;
    case unfenced:
      if (facts.want_fence) return facts.want_shut_down ? shutdown_now : fenced;
      if (facts.want_shut_down) return facts.has_leaderships ? controlled_shutdown : shutdown_now;
      return unfenced;
    case controlled_shutdown:
      // Done once it leads nothing and every active broker has seen the records that moved its leaderships.
      if (facts.has_leaderships) return controlled_shutdown;
      return facts.shutdown_offset_reached ? shutdown_now : controlled_shutdown;
    case shutdown_now:
      return shutdown_now;
  }
  return shutdown_now;
}

void broker_heartbeat_manager::touch(int32_t id, int64_t now_ms, int64_t metadata_offset, bool fenced) {
  session& s = _sessions[id];
  s.last_contact_ms = now_ms;
  s.metadata_offset = metadata_offset;
  if (fenced) s.controlled_shutdown_offset = -1;
}

void broker_heartbeat_manager::remove(int32_t id) {
  _sessions.erase(id);
}

void broker_heartbeat_manager::reset(const std::vector<int32_t>& ids, int64_t now_ms) {
  _sessions.clear();
  for (int32_t id : ids) _sessions[id].last_contact_ms = now_ms;
}

void broker_heartbeat_manager::fenced(int32_t id) {
  if (auto it = _sessions.find(id); it != _sessions.end()) it->second.controlled_shutdown_offset = -1;
}

std::vector<int32_t> broker_heartbeat_manager::stale_brokers(const std::vector<int32_t>& unfenced,
                                                             int64_t now_ms) {
  std::vector<std::pair<int64_t, int32_t>> stale;  // (last contact, id)
  for (int32_t id : unfenced) {
    auto [it, inserted] = _sessions.try_emplace(id);
    if (inserted) {
      it->second.last_contact_ms = now_ms;
      continue;
    }
    // BrokerHeartbeatManager.hasValidSession: valid while lastContact + timeout >= now.
    if (it->second.last_contact_ms + _session_timeout_ms < now_ms)
      stale.emplace_back(it->second.last_contact_ms, id);
  }
  std::sort(stale.begin(), stale.end());
  std::vector<int32_t> out;
  out.reserve(stale.size());
  for (const auto& [contact, id] : stale) out.push_back(id);
  return out;
}

void broker_heartbeat_manager::maybe_set_controlled_shutdown_offset(int32_t id, int64_t offset) {
  session& s = _sessions[id];
  if (s.controlled_shutdown_offset < 0) s.controlled_shutdown_offset = offset;
}

bool broker_heartbeat_manager::in_controlled_shutdown(int32_t id) const {
  return controlled_shutdown_offset(id).has_value();
}

std::optional<int64_t> broker_heartbeat_manager::controlled_shutdown_offset(int32_t id) const {
  auto it = _sessions.find(id);
  if (it == _sessions.end() || it->second.controlled_shutdown_offset < 0) return std::nullopt;
  return it->second.controlled_shutdown_offset;
}

int64_t broker_heartbeat_manager::lowest_offset(const std::vector<int32_t>& active) const {
  int64_t lowest = std::numeric_limits<int64_t>::max();
  for (int32_t id : active) {
    auto it = _sessions.find(id);
    lowest = std::min(lowest, it == _sessions.end() ? int64_t{-1} : it->second.metadata_offset);
  }
  return lowest;
}

std::optional<int64_t> broker_heartbeat_manager::last_contact_ms(int32_t id) const {
  auto it = _sessions.find(id);
  if (it == _sessions.end()) return std::nullopt;
  return it->second.last_contact_ms;
}

bool broker_heartbeat_manager::has_valid_session(int32_t id, bool unfenced, int64_t now_ms) const {
  auto it = _sessions.find(id);
  return unfenced && it != _sessions.end() && it->second.last_contact_ms + _session_timeout_ms >= now_ms;
}

}  // namespace mala::controller
