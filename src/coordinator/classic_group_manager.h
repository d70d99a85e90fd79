// The classic protocol half of the group coordinator (Kafka 4.x's GroupMetadataManager for classic groups):
// JoinGroup / SyncGroup / Heartbeat / LeaveGroup, the rebalance of each group (preparing, completing, the
// initial rebalance delay, static members), the member sessions and the join / sync phase timers, the
// groups' GroupMetadata records and their replay at load, and the classic side of OffsetCommit, OffsetDelete,
// DeleteGroups, ListGroups / DescribeGroups and offset expiration. Simple groups (offsets without
// membership) are classic groups without a protocol type.
//
// The requests reach it once the group coordinator checked the partition and the group id and saw that the
// id is not a KIP-848 consumer group's (consumer_group_manager); the conversions between the two kinds of
// group are the consumer_group_host functions the coordinator wires to this class.
//
// A group id may be reused after its group is gone: each group gets a serial, and a timer or a write that
// completes later acts only on the same incarnation.
//
// JoinGroup and SyncGroup are in classic_group_join.cc, the rebalance steps in classic_group_rebalance.cc,
// the rest in classic_group_manager.cc.
//
// Threads: the group coordinator's (one shard). Internal to src/coordinator.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "coordinator_runtime.h"
#include "mala/common/error_code.h"
#include "mala/coordinator/classic_group.h"
#include "mala/coordinator/group_coordinator.h"
#include "mala/coordinator/group_records.h"
#include "mala/protocol/messages/describe_groups_response.h"
#include "mala/protocol/messages/heartbeat_request.h"
#include "mala/protocol/messages/heartbeat_response.h"
#include "mala/protocol/messages/join_group_request.h"
#include "mala/protocol/messages/leave_group_request.h"
#include "mala/protocol/messages/leave_group_response.h"
#include "mala/protocol/messages/list_groups_response.h"
#include "mala/protocol/messages/offset_commit_request.h"
#include "mala/protocol/messages/sync_group_request.h"

namespace mala::coordinator {

struct classic_group_snapshot;

// ClassicGroup.offsetExpirationCondition: whether the group's offsets may expire now at all, and the time an
// offset's retention counts from.
bool offsets_may_expire(const classic_group& g);
int64_t expiration_base(const classic_group& g, const committed_offset& c);

class classic_group_manager {
 public:
  struct group_slot {
    int32_t partition = 0;
    uint64_t serial = 0;  // tells a group from a later one of the same id
    classic_group group;
  };

  explicit classic_group_manager(coordinator_runtime& runtime);
  classic_group_manager(const classic_group_manager&) = delete;
  classic_group_manager& operator=(const classic_group_manager&) = delete;

  // --- Requests (partition, group id and session timeout checked; not a consumer group's id)
  void join_group(const request_origin& origin, protocol::join_group_request req, join_callback done);
  void sync_group(const protocol::sync_group_request& req, sync_callback done);
  protocol::heartbeat_response heartbeat(const protocol::heartbeat_request& req);
  protocol::leave_group_response leave_group(const protocol::leave_group_request& req);

  // --- Groups
  const classic_group* find(const std::string& group_id) const;
  const std::map<std::string, group_slot>& groups() const { return _groups; }
  // A simple group (offsets without membership: an offset commit or an offset record without a group).
  void create_simple_group(const std::string& group_id);
  void remove_group(const std::string& group_id);

  // --- Conversion to and from consumer groups (consumer_group_host)
  std::optional<bool> group_empty(const std::string& group_id) const;
  std::optional<classic_group_snapshot> snapshot_for_upgrade(const std::string& group_id) const;
  // Kafka's upgrade of an empty classic group: its metadata gets a tombstone, the offsets stay.
  void drop_empty_group(const std::string& group_id, std::vector<coordinator_record>& records);
  // The upgrade of a group with members: whoever waits in its rebalance must rejoin the new group.
  void drop_group(const std::string& group_id, std::vector<coordinator_record>& records);
  // The classic group of a downgrade (ClassicGroup.fromConsumerGroup).
  void create_from_snapshot(const classic_group_snapshot& snapshot, std::vector<coordinator_record>& records);

  // --- Offsets and administration
  // OffsetCommit against a classic group: creates a simple group for a commit without generation, validates
  // the member and generation, and keeps the member's session alive.
  error_code accept_offset_commit(const request_origin& origin, const protocol::offset_commit_request& req);
  // TxnOffsetCommit against a classic group (or none yet): ILLEGAL_GENERATION for an unknown group with a
  // generation, then the member and generation checks of a transactional commit.
  error_code validate_txn_offset_commit(const protocol::txn_offset_commit_request& req) const;
  // OffsetDelete: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (a rebalancing group of another protocol than
  // "consumer") or NONE.
  error_code validate_offset_delete(const std::string& group_id) const;
  // DeleteGroups: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP or NONE.
  error_code validate_delete(const std::string& group_id) const;
  void list(const std::set<std::string>& states, const std::set<std::string>& types,
            std::vector<protocol::list_groups_response::listed_group>& out) const;
  std::vector<protocol::describe_groups_response::described_group> describe(
      const std::vector<std::string>& group_ids) const;

  // --- Load
  // One GroupMetadata record of `partition` (a tombstone removes the group).
  void replay(int32_t partition, const group_metadata_entry& entry);
  // The partition is loaded: its members' sessions start now. Returns how many groups it has.
  size_t complete_loading(int32_t partition);
  // The partition is gone: whatever is parked in its groups gets `parked_error`, the groups are forgotten.
  void drop_partition(int32_t partition, error_code parked_error);

 private:
  using assignment_map = std::map<std::string, std::vector<uint8_t>>;

  group_slot* find_slot(const std::string& group_id);
  const group_slot* find_slot(const std::string& group_id) const;
  // The group if it is still the incarnation `serial`.
  classic_group* group_if(const std::string& group_id, uint64_t serial);
  group_slot& create_group(const std::string& group_id);
  // Timer keys. Every key of a group starts with the group id and a NUL (group ids are strings of any
  // bytes, so the separator keeps "a" from matching the keys of "ab").
  static std::string group_prefix(const std::string& group);
  static std::string heartbeat_key(const std::string& group, const std::string& member);
  static std::string join_key(const std::string& group);
  static std::string sync_key(const std::string& group);

  // The JoinGroup answer of a member in the group's current generation (the leader's lists the members).
  static protocol::join_group_response current_generation_join_response(const classic_group& g,
                                                                        const std::string& member_id);

  // Records (classic_group_rebalance.cc)
  protocol::group_metadata_value metadata_value(const classic_group& g,
                                                const assignment_map* assignment) const;
  void write_group_metadata(const classic_group& g, protocol::group_metadata_value value);

  // Sessions (classic_group_rebalance.cc)
  void schedule_heartbeat(classic_group& g, const std::string& member_id, int64_t timeout_ms);
  void reschedule_heartbeat(classic_group& g, const classic_group_member& m);
  void expire_member_heartbeat(const std::string& gid, uint64_t serial, const std::string& member_id);
  void remove_member(classic_group& g, const std::string& member_id);
  void remove_member_and_update_group(classic_group& g, const std::string& member_id);

  // Rebalance (classic_group_rebalance.cc)
  void maybe_prepare_rebalance_or_complete_join(classic_group& g);
  void prepare_rebalance(classic_group& g);
  void maybe_complete_join_else_schedule(classic_group& g);
  void try_complete_initial_rebalance(const std::string& gid, uint64_t serial, int32_t delay,
                                      int32_t remaining);
  void maybe_complete_join_phase(classic_group& g);
  void complete_join(classic_group& g);
  void schedule_pending_sync(classic_group& g);
  void expire_pending_sync(const std::string& gid, uint64_t serial, int32_t generation);
  void remove_sync_expiration(classic_group& g);
  void remove_pending_sync_member(classic_group& g, const std::string& member_id);
  void propagate_assignment(classic_group& g, error_code e);
  void reset_and_propagate_assignment_with_error(classic_group& g, error_code e);
  void set_and_propagate_assignment(classic_group& g, const assignment_map& assignment);

  // JoinGroup (classic_group_join.cc)
  bool accept_joining_member(const classic_group& g, const std::string& member_id) const;
  void join_new_member(const request_origin& origin, const protocol::join_group_request& req,
                       classic_group& g, const join_callback& done);
  void join_existing_member(const request_origin& origin, const protocol::join_group_request& req,
                            classic_group& g, const join_callback& done);
  void update_member_then_rebalance_or_complete_join(const protocol::join_group_request& req,
                                                     classic_group& g, classic_group_member& m,
                                                     std::vector<member_protocol> protocols,
                                                     const join_callback& done);
  void add_member_then_rebalance_or_complete_join(const request_origin& origin,
                                                  const protocol::join_group_request& req, classic_group& g,
                                                  const std::string& member_id, const join_callback& done);
  void update_static_member_then_rebalance_or_complete_join(const request_origin& origin,
                                                            const protocol::join_group_request& req,
                                                            classic_group& g, const std::string& old_id,
                                                            const std::string& new_id,
                                                            const join_callback& done);

  coordinator_runtime& _runtime;
  const group_coordinator_config& _config;
  std::map<std::string, group_slot> _groups;
  uint64_t _next_serial = 1;
  std::mt19937_64 _rng{std::random_device{}()};
};

}  // namespace mala::coordinator
