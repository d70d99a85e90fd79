// The KIP-848 half of the group coordinator (Kafka 4.x GroupMetadataManager.consumerGroupHeartbeat and
// friends): ConsumerGroupHeartbeat (join, heartbeat, leave, static members), ConsumerGroupDescribe, the
// consumer groups' part of ListGroups / DeleteGroups / OffsetCommit / OffsetFetch, the member session and
// rebalance timers, and the replay of the consumer group records (key versions 3-8) at load.
//
// Each heartbeat runs the whole of Kafka's step at once: validate, fence (UNKNOWN_MEMBER_ID,
// FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED), update the member's subscription,
// bump the group epoch when membership / subscriptions / subscribed partitions changed, compute a new target
// assignment with the server-side assignor when the group epoch is ahead of it, then move the member one
// step towards its target (consumer_group.h reconcile). The records of the step are appended as one batch;
// the answer leaves once they are committed. The in-memory state changes at once (unlike Kafka's runtime,
// a failed append is not rolled back: the member retries and the next step writes the state again).
//
// Groups of both protocols share one id space: the classic groups are classic_group_manager's, which tells
// this class (through consumer_group_host) whether an id is taken by a classic group, and hands a classic
// group over on upgrade (group.consumer.migration.policy upgrade / bidirectional): an empty one is dropped;
// one with members, all of the "consumer" protocol type, becomes a consumer group whose members keep their
// generation as member epoch and their assignment (Kafka's ConsumerGroup.fromClassicGroup). The other way,
// when the last member of the consumer protocol leaves a group whose other members all speak the classic
// protocol, the group goes back to classic_group_manager as a classic group that rebalances (downgrade /
// bidirectional).
//
// The owned partitions, the appends, the timers and the clock are the coordinator_runtime it shares with the
// other parts of the group coordinator; the committed offsets are offset_manager's.
//
// Classic members of a consumer group (consumer_group_classic_members.cc, Kafka 4.x's
// classicGroupJoinToConsumerGroup and friends): their JoinGroup runs the same step as a heartbeat (the
// subscription comes from the embedded ConsumerProtocolSubscription, the owned partitions too) and is
// answered at once with their member epoch as generation and no leader; their SyncGroup returns the
// assignment the server-side assignor gave them, as a ConsumerProtocolAssignment; their Heartbeat answers
// REBALANCE_IN_PROGRESS while they must rejoin to move on (the group epoch moved, partitions to revoke, or
// partitions to collect); LeaveGroup removes them. Their session timeout is the one of their JoinGroup; a
// member that does not send SyncGroup after JoinGroup, or JoinGroup after being told to rejoin, within its
// rebalance timeout is removed.
//
// Threads: the group coordinator's (one shard). Internal to src/coordinator.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator_runtime.h"
#include "mala/common/error_code.h"
#include "mala/common/result.h"
#include "mala/coordinator/consumer_group.h"
#include "mala/coordinator/group_coordinator.h"
#include "mala/coordinator/group_records.h"
#include "mala/coordinator/keyed_timer.h"
#include "mala/protocol/messages/consumer_group_describe_response.h"
#include "mala/protocol/messages/consumer_group_heartbeat_request.h"
#include "mala/protocol/messages/consumer_group_heartbeat_response.h"
#include "mala/protocol/messages/heartbeat_request.h"
#include "mala/protocol/messages/heartbeat_response.h"
#include "mala/protocol/messages/join_group_request.h"
#include "mala/protocol/messages/leave_group_request.h"
#include "mala/protocol/messages/leave_group_response.h"
#include "mala/protocol/messages/list_groups_response.h"
#include "mala/protocol/messages/sync_group_request.h"

namespace spdlog {
class logger;
}

namespace mala::coordinator {

// A classic group's members as they move between the two kinds of group (upgrade and downgrade).
struct classic_group_snapshot {
  struct member {
    std::string member_id;
    std::optional<std::string> instance_id;
    std::string client_id;
    std::string client_host;
    int32_t session_timeout_ms = 0;
    int32_t rebalance_timeout_ms = 0;
    std::vector<classic_member_metadata::protocol> protocols;
    std::vector<uint8_t> assignment;  // ConsumerProtocolAssignment bytes (empty: none yet)
  };
  std::string group_id;
  int32_t generation = 0;
  std::string protocol_name;
  std::vector<member> members;
  bool rebalance = true;  // downgrade: the classic group starts a rebalance (not after a static replacement)
};

// What the manager needs from the classic half of the group coordinator (classic_group_manager), which
// shares the id space.
struct consumer_group_host {
  // A classic group of that id: nullopt when none, otherwise whether it is empty.
  std::function<std::optional<bool>(const std::string&)> classic_group_empty;
  // Drops an empty classic group (upgrade): its GroupMetadata tombstone goes into `records`.
  std::function<void(const std::string&, std::vector<coordinator_record>&)> drop_empty_classic_group;
  // The members of a classic group of that id that may be upgraded (all members of protocol type "consumer",
  // none of them pending), with the group's generation and chosen protocol; nullopt otherwise. Does not
  // change the group.
  std::function<std::optional<classic_group_snapshot>(const std::string&)> classic_group_for_upgrade;
  // Removes the classic group of that id for its upgrade: members parked in JoinGroup / SyncGroup are told
  // REBALANCE_IN_PROGRESS, its GroupMetadata tombstone goes into `records`.
  std::function<void(const std::string&, std::vector<coordinator_record>&)> drop_classic_group;
  // Makes a classic group of that id from the snapshot (downgrade) and starts its rebalance; its records go
  // into `records`.
  std::function<void(const classic_group_snapshot&, std::vector<coordinator_record>&)> create_classic_group;
};

class consumer_group_manager {
 public:
  using heartbeat_callback = std::function<void(protocol::consumer_group_heartbeat_response)>;

  consumer_group_manager(coordinator_runtime& runtime, consumer_group_host host);

  void set_topics(topic_catalog catalog) { _catalog = std::move(catalog); }
  const topic_catalog& topics() const { return _catalog; }

  void heartbeat(const request_origin& origin, protocol::consumer_group_heartbeat_request req,
                 heartbeat_callback done);
  // Classic members of consumer groups; the group must exist here (contains()).
  void classic_join(const request_origin& origin, const protocol::join_group_request& req,
                    join_callback done);
  void classic_sync(const protocol::sync_group_request& req, sync_callback done);
  protocol::heartbeat_response classic_heartbeat(const protocol::heartbeat_request& req);
  // The removals are written in the background; the members are gone at once.
  protocol::leave_group_response classic_leave(const protocol::leave_group_request& req);

  std::vector<protocol::consumer_group_describe_response::described_group> describe(
      const std::vector<std::string>& ids, bool include_authorized_operations) const;

  const consumer_group* find(const std::string& id) const;
  const std::map<std::string, consumer_group>& groups() const { return _groups; }
  bool contains(const std::string& id) const { return _groups.contains(id); }
  // The topics some member of the group subscribes to (their offsets may not be deleted or expire).
  std::set<std::string> subscribed_topics_of(const consumer_group& g) const;
  void list(const std::set<std::string>& states, const std::set<std::string>& types,
            std::vector<protocol::list_groups_response::listed_group>& out) const;

  // OffsetCommit against a consumer group (ConsumerGroup.validateOffsetCommit): a member id and its current
  // epoch (STALE_MEMBER_EPOCH for another one, UNKNOWN_MEMBER_ID for an unknown member), or epoch -1 with no
  // member id while the group is empty; versions before 9 (no member epochs) get UNSUPPORTED_VERSION.
  // TxnOffsetCommit (`transactional`): any version, and ILLEGAL_GENERATION for a stale epoch.
  error_code validate_offset_commit(const std::string& id, const std::string& member_id, int32_t epoch,
                                    int16_t api_version, bool transactional = false) const;
  // OffsetFetch v9+ with a member id: the member must exist with that epoch (no member id: admin fetch).
  error_code validate_offset_fetch(const std::string& id, const std::optional<std::string>& member_id,
                                   int32_t epoch) const;
  // DeleteGroups: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP while members exist, otherwise the tombstones of the
  // group's records.
  result<std::vector<coordinator_record>> delete_records(const std::string& id) const;
  void remove_group(const std::string& id);

  status replay(int32_t partition, std::span<const uint8_t> key,
                std::optional<std::span<const uint8_t>> value);
  void complete_loading(int32_t partition);
  void drop_partition(int32_t partition);

 private:
  struct step;
  void respond_after_write(const std::string& gid, std::vector<coordinator_record> records,
                           protocol::consumer_group_heartbeat_response resp, heartbeat_callback done);
  void leave(const request_origin& origin, const protocol::consumer_group_heartbeat_request& req,
             heartbeat_callback done);
  // Removes a member for good (fencing, session expiry, leave): its records get tombstones and the group
  // epoch moves on so that the others get its partitions.
  void fence_member(consumer_group& g, const std::string& member_id,
                    std::vector<coordinator_record>& records);
  void schedule_session(const std::string& gid, const std::string& member_id);
  // Classic members: SyncGroup expected after JoinGroup; JoinGroup expected after REBALANCE_IN_PROGRESS.
  void schedule_classic_sync_timeout(const std::string& gid, const consumer_member& m);
  void schedule_classic_join_timeout_if_absent(const std::string& gid, const consumer_member& m);
  void cancel_member_timers(const std::string& gid, const std::string& member_id);
  // Upgrade of a classic group with members into `records`; false when it may not be upgraded.
  bool upgrade_classic_group(const std::string& gid, std::vector<coordinator_record>& records);
  // Downgrade when `leaving` (empty: nobody) leaves and every other member speaks the classic protocol; true
  // when done (the group is gone from here and its records are in `records`).
  bool maybe_downgrade(consumer_group& g, const std::string& leaving,
                       std::vector<coordinator_record>& records, bool rebalance = true);
  // Whether a member with partitions still owned by others must wait (Kafka's waitingOnUnreleasedPartition).
  bool waiting_on_unreleased_partition(const consumer_group& g, const consumer_member& m) const;
  std::string member_key(const char* kind, const std::string& gid, const std::string& member_id) const;
  void schedule_rebalance_timeout(const std::string& gid, const consumer_member& m);
  void expire_member(const std::string& gid, const std::string& member_id, const char* why);
  // One reconciliation step of `m` towards its target (consumer_group.h reconcile) with the group's owners.
  static consumer_member reconcile_towards_target(const consumer_group& g, const consumer_member& m,
                                                  const std::optional<topic_partitions>& owned);
  // Bumps the group epoch when its subscription metadata changed; computes the target when it lags.
  void maybe_update_target(consumer_group& g, bool bump, std::vector<coordinator_record>& records);
  std::string session_key(const std::string& gid, const std::string& member_id) const;
  std::string rebalance_key(const std::string& gid, const std::string& member_id) const;
  void log_info(const std::string& line) const;

  coordinator_runtime& _runtime;
  const group_coordinator_config& _config;
  consumer_group_host _host;
  keyed_timer& _timers;
  topic_catalog _catalog;
  std::map<std::string, consumer_group> _groups;
  std::map<std::string, int32_t> _partition_of_group;
};

}  // namespace mala::coordinator
