// A consumer group of the classic rebalance protocol (JoinGroup / SyncGroup / Heartbeat / LeaveGroup), as
// Kafka 4.x's ClassicGroup and ClassicGroupMember keep it: the members with their supported protocols and
// assignment, the static members by group.instance.id, the members that must rejoin with the id they were
// given (KIP-394 pending members), the members that still owe a SyncGroup, the generation, the elected
// leader and protocol, and the state:
//
//   Empty <-> PreparingRebalance -> CompletingRebalance -> Stable -> PreparingRebalance ...; any -> Dead
//
// A member awaiting its JoinGroup or SyncGroup answer holds the callback that delivers it; the group only
// stores them: the coordinator (group_coordinator.h) decides when they fire. This class is the bookkeeping
// (Kafka's counters, protocol votes, leader election); the rebalance rules live in the coordinator.
//
// Threads: owned by the group_coordinator, touched only on its shard.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/error_code.h"
#include "mala/protocol/messages/join_group_response.h"
#include "mala/protocol/messages/sync_group_response.h"

namespace mala::coordinator {

enum class classic_group_state : uint8_t { empty, preparing_rebalance, completing_rebalance, stable, dead };

// Kafka's names ("Empty", "PreparingRebalance", ...): DescribeGroups and ListGroups answer with them.
std::string_view state_name(classic_group_state state);
// Whether `to` may follow `from` (ClassicGroupState.validPreviousStates).
bool valid_transition(classic_group_state from, classic_group_state to);

// JoinGroupRequest.UNKNOWN_MEMBER_ID.
inline constexpr std::string_view unknown_member_id = "";

// One protocol a member supports (JoinGroup's Protocols, in the member's order of preference).
struct member_protocol {
  std::string name;
  std::vector<uint8_t> metadata;
  friend bool operator==(const member_protocol&, const member_protocol&) = default;
};

using join_callback = std::function<void(protocol::join_group_response)>;
// The answers of a failed JoinGroup (generation -1, no protocol, no leader) and SyncGroup.
protocol::join_group_response join_error_response(std::string member_id, error_code e);
protocol::sync_group_response sync_error_response(error_code e);
using sync_callback = std::function<void(protocol::sync_group_response)>;

struct classic_group_member {
  std::string member_id;
  std::optional<std::string> group_instance_id;  // set for static members (KIP-345)
  std::string client_id;
  std::string client_host;
  int32_t rebalance_timeout_ms = 0;
  int32_t session_timeout_ms = 0;
  std::string protocol_type;
  std::vector<member_protocol> protocols;
  std::vector<uint8_t> assignment;
  join_callback awaiting_join;  // set while a JoinGroup waits for the join phase to complete
  sync_callback awaiting_sync;  // set while a SyncGroup waits for the leader's assignment
  // A member added by this rebalance and not yet answered: its session timer is the new-member join timeout,
  // and unlike other members it does not satisfy the heartbeat check by merely waiting.
  bool is_new = false;

  bool is_static() const { return group_instance_id.has_value(); }
  bool is_awaiting_join() const { return static_cast<bool>(awaiting_join); }
  bool is_awaiting_sync() const { return static_cast<bool>(awaiting_sync); }
  // The metadata of `protocol`, nullptr if the member does not support it.
  const std::vector<uint8_t>* metadata(std::string_view protocol) const;
  // Same protocols, same metadata, same order (ClassicGroupMember.matches).
  bool matches(const std::vector<member_protocol>& protocols) const;
  // The member's first protocol among the candidates (its vote in protocol selection).
  std::string vote(const std::set<std::string>& candidates) const;
  // Whether a session expiry may be ignored: a member waiting in a rebalance has, unless it is new.
  bool has_satisfied_heartbeat() const { return !is_new && (is_awaiting_join() || is_awaiting_sync()); }
};

class classic_group {
 public:
  // A group created now (by a JoinGroup, or by an offset commit without a group: a "simple" group).
  classic_group(std::string group_id, classic_group_state state, int64_t now_ms);
  // A group loaded from its GroupMetadataValue.
  classic_group(std::string group_id, classic_group_state state, int32_t generation,
                std::optional<std::string> protocol_type, std::optional<std::string> protocol_name,
                std::optional<std::string> leader_id, std::optional<int64_t> current_state_timestamp);

  const std::string& group_id() const { return _group_id; }
  classic_group_state state() const { return _state; }
  classic_group_state previous_state() const { return _previous_state; }
  bool in_state(classic_group_state s) const { return _state == s; }
  int32_t generation_id() const { return _generation_id; }
  const std::optional<std::string>& protocol_type() const { return _protocol_type; }
  const std::optional<std::string>& protocol_name() const { return _protocol_name; }
  const std::optional<std::string>& leader_id() const { return _leader_id; }
  bool is_leader(const std::string& member_id) const { return _leader_id && *_leader_id == member_id; }
  int64_t current_state_timestamp_or_default() const { return _current_state_timestamp.value_or(-1); }
  const std::optional<int64_t>& current_state_timestamp() const { return _current_state_timestamp; }
  bool is_empty() const { return _state == classic_group_state::empty; }
  // A group that only holds offsets: no protocol type, no members (ClassicGroup.isSimpleGroup).
  bool is_simple() const { return !_protocol_type && _members.empty() && _pending_join_members.empty(); }
  bool uses_consumer_protocol() const;

  bool new_member_added() const { return _new_member_added; }
  void set_new_member_added(bool v) { _new_member_added = v; }

  // Members, ordered by member id.
  const std::map<std::string, classic_group_member>& members() const { return _members; }
  // For changing members' assignments; membership and parked answers change through the methods below.
  std::map<std::string, classic_group_member>& members_for_update() { return _members; }
  bool has_member(const std::string& member_id) const { return _members.contains(member_id); }
  classic_group_member* member(const std::string& member_id);
  size_t size() const { return _members.size(); }

  // Adds a member (its protocol type becomes the group's when it is the first); `join` is its parked
  // JoinGroup, or empty. The first member becomes the leader.
  void add(classic_group_member member, join_callback join);
  // Removes a member (or pending member) and whatever it was waiting for, electing another leader if needed.
  void remove(const std::string& member_id);
  // Replaces a static member's id (a static member rejoining with an unknown member id): the old member's
  // parked JoinGroup / SyncGroup is answered FENCED_INSTANCE_ID; the new member keeps everything else.
  classic_group_member& replace_static_member(const std::string& instance_id,
                                              const std::string& old_member_id,
                                              const std::string& new_member_id);
  // New protocols and timeouts of a rejoining member, and its parked JoinGroup (or none).
  void update_member(classic_group_member& member, std::vector<member_protocol> protocols,
                     int32_t rebalance_timeout_ms, int32_t session_timeout_ms, join_callback join);

  // Answers a member's parked JoinGroup / SyncGroup; false if none was parked.
  bool complete_join(classic_group_member& member, protocol::join_group_response response);
  bool complete_sync(classic_group_member& member, protocol::sync_group_response response);

  // KIP-394: a member given an id with MEMBER_ID_REQUIRED that has not rejoined yet.
  bool is_pending_member(const std::string& member_id) const {
    return _pending_join_members.contains(member_id);
  }
  void add_pending_member(const std::string& member_id) { _pending_join_members.insert(member_id); }
  size_t pending_member_count() const { return _pending_join_members.size(); }

  // Members that have not sent SyncGroup for the current generation.
  void add_pending_sync_member(const std::string& member_id) { _pending_sync_members.insert(member_id); }
  void remove_pending_sync_member(const std::string& member_id) { _pending_sync_members.erase(member_id); }
  bool has_received_sync_from_all_members() const { return _pending_sync_members.empty(); }
  const std::set<std::string>& pending_sync_members() const { return _pending_sync_members; }
  void clear_pending_sync_members() { _pending_sync_members.clear(); }

  bool has_static_member(const std::string& instance_id) const {
    return _static_members.contains(instance_id);
  }
  // The member id holding a group.instance.id, or nullptr.
  const std::string* static_member_id(const std::string& instance_id) const;

  size_t awaiting_join_count() const { return _awaiting_join_count; }
  // Every member has rejoined and no pending member is outstanding.
  bool has_all_members_joined() const {
    return _members.size() == _awaiting_join_count && _pending_join_members.empty();
  }
  std::vector<std::string> not_yet_rejoined_members() const;
  // The longest rebalance timeout of the members: how long a join phase may last.
  int32_t rebalance_timeout_ms() const;

  // ClassicGroup.validateMember: UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID when the group.instance.id belongs
  // to another member id.
  error_code validate_member(const std::string& member_id,
                             const std::optional<std::string>& instance_id) const;
  // Whether a member with this protocol type and these protocols may join: any non-empty set while Empty,
  // otherwise the group's type and at least one protocol every member supports.
  bool supports_protocols(const std::string& protocol_type,
                          const std::vector<member_protocol>& protocols) const;
  bool can_rebalance() const { return valid_transition(_state, classic_group_state::preparing_rebalance); }
  void transition_to(classic_group_state state, int64_t now_ms);
  // The protocol every member supports that most members prefer (each votes for its first candidate).
  std::string select_protocol() const;
  // The chosen protocol, for a group rebuilt from a consumer group (downgrade).
  void set_protocol_name(std::string name) { _protocol_name = std::move(name); }
  // If the leader has not rejoined, the first member that has becomes leader; false when none has.
  bool maybe_elect_new_joined_leader();
  // The next generation: Empty without members, else CompletingRebalance with the selected protocol.
  void init_next_generation(int64_t now_ms);

  // The members and their metadata for the chosen protocol, sent to the leader in its JoinGroup answer.
  std::vector<protocol::join_group_response::join_group_response_member> current_member_metadata() const;

  // The topics the members subscribe to (consumer protocol only; nullopt when unknown), recomputed at each
  // new generation and on load.
  const std::optional<std::set<std::string>>& subscribed_topics() const { return _subscribed_topics; }
  void update_subscribed_topics();
  // ClassicGroup.isSubscribedToTopic: when the subscription is unknown, a consumer-protocol group is assumed
  // to subscribe to everything.
  bool is_subscribed_to_topic(const std::string& topic) const;

 private:
  void count_protocols(const classic_group_member& member, int delta);
  std::set<std::string> candidate_protocols() const;

  std::string _group_id;
  classic_group_state _state;
  classic_group_state _previous_state = classic_group_state::dead;
  std::optional<int64_t> _current_state_timestamp;
  std::optional<std::string> _protocol_type;
  std::optional<std::string> _protocol_name;
  int32_t _generation_id = 0;
  std::optional<std::string> _leader_id;
  std::map<std::string, classic_group_member> _members;
  std::map<std::string, std::string> _static_members;  // group.instance.id -> member id
  std::set<std::string> _pending_join_members;
  std::set<std::string> _pending_sync_members;
  std::map<std::string, int32_t> _supported_protocols;  // protocol name -> members supporting it
  size_t _awaiting_join_count = 0;
  bool _new_member_added = false;
  std::optional<std::set<std::string>> _subscribed_topics;
};

}  // namespace mala::coordinator
