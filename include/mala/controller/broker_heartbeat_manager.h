// The active controller's in-memory view of broker sessions (Kafka's BrokerHeartbeatManager): when each
// broker last heartbeated, the metadata offset it reported, and the offset at which its controlled shutdown
// is complete. None of it is in the metadata log: a controller that becomes active starts every session
// afresh (reset), which gives each broker a full broker.session.timeout.ms to reach the new controller, as
// Kafka's ClusterControlManager.activate does.
//
// Whether a broker is fenced is not kept here: the metadata image is the one source of that. The manager
// answers the questions the controller asks on a heartbeat (next_broker_state) and on its periodic check
// (stale_brokers); the controller writes the records.
//
// Threads: owned by the quorum_controller and used on its thread only (shard 0). Times are the caller's
// milliseconds (a monotonic clock in the glue, a fake one in tests).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

namespace mala::controller {

// Kafka's BrokerControlState: where a heartbeat leaves a broker.
enum class broker_control_state {
  fenced,               // registered, not allowed to lead or be in an ISR
  unfenced,             // active
  controlled_shutdown,  // unfenced, leadership being moved away before it stops
  shutdown_now,         // fenced, and told to stop (ShouldShutDown)
};

// The response bits Kafka derives from a state (BrokerControlState.fenced / inControlledShutdown /
// shouldShutDown).
constexpr bool is_fenced(broker_control_state s) {
  return s == broker_control_state::fenced || s == broker_control_state::shutdown_now;
}
constexpr bool should_shut_down(broker_control_state s) {
  return s == broker_control_state::shutdown_now;
}
constexpr std::string_view to_string(broker_control_state s) {
  switch (s) {
    case broker_control_state::fenced:
      return "FENCED";
    case broker_control_state::unfenced:
      return "UNFENCED";
    case broker_control_state::controlled_shutdown:
      return "CONTROLLED_SHUTDOWN";
    case broker_control_state::shutdown_now:
      return "SHUTDOWN_NOW";
  }
  return "UNKNOWN";
}

// What a heartbeat asks for and what the controller knows when it arrives.
struct heartbeat_facts {
  bool want_fence = false;
  bool want_shut_down = false;
  // CurrentMetadataOffset >= the offset of the broker's registration (its epoch).
  bool caught_up = false;
  // The broker still leads at least one partition.
  bool has_leaderships = false;
  // Every active broker has reported a metadata offset at or past the broker's controlled-shutdown offset, so
  // they all know where the leaders went (BrokerHeartbeatManager.lowestActiveOffset).
  bool shutdown_offset_reached = false;
};

// BrokerHeartbeatManager.calculateNextBrokerState, as a pure function of the current state and the facts.
broker_control_state next_broker_state(broker_control_state current, const heartbeat_facts& facts);

class broker_heartbeat_manager {
 public:
  explicit broker_heartbeat_manager(int64_t session_timeout_ms) : _session_timeout_ms(session_timeout_ms) {}

  int64_t session_timeout_ms() const { return _session_timeout_ms; }

  // A heartbeat arrived at now_ms reporting `metadata_offset`. A broker the heartbeat leaves fenced leaves
  // controlled shutdown too (its next heartbeat then shuts it down at once).
  void touch(int32_t id, int64_t now_ms, int64_t metadata_offset, bool fenced);
  // Forgets a broker (a new incarnation registered: the old session is gone).
  void remove(int32_t id);
  // Every session starts afresh at now_ms with no reported offset (the controller became active).
  void reset(const std::vector<int32_t>& ids, int64_t now_ms);
  // The broker was fenced by the controller (session timeout): it is no longer in controlled shutdown.
  void fenced(int32_t id);

  // The brokers among `unfenced` whose session expired at now_ms (last contact + session timeout < now_ms),
  // oldest contact first. A broker the manager has not seen yet starts its session now instead.
  std::vector<int32_t> stale_brokers(const std::vector<int32_t>& unfenced, int64_t now_ms);

  // Controlled shutdown (BrokerHeartbeatManager.maybeUpdateControlledShutdownOffset): the offset of the last
  // record that moved leadership away; set once, kept until the broker is fenced.
  void maybe_set_controlled_shutdown_offset(int32_t id, int64_t offset);
  bool in_controlled_shutdown(int32_t id) const;
  std::optional<int64_t> controlled_shutdown_offset(int32_t id) const;
  // The lowest metadata offset reported by `active` brokers (-1 for one that has not reported yet); the
  // largest int64 when there are none.
  int64_t lowest_offset(const std::vector<int32_t>& active) const;

  std::optional<int64_t> last_contact_ms(int32_t id) const;
  // BrokerHeartbeatManager.hasValidSession: an `unfenced` broker whose last contact + session timeout >=
  // now_ms. A broker without a session (never heard from by this controller) has none.
  bool has_valid_session(int32_t id, bool unfenced, int64_t now_ms) const;

 private:
  struct session {
    int64_t last_contact_ms = 0;
    int64_t metadata_offset = -1;
    int64_t controlled_shutdown_offset = -1;  // -1: not in controlled shutdown
  };

  int64_t _session_timeout_ms;
  std::map<int32_t, session> _sessions;
};

}  // namespace mala::controller
