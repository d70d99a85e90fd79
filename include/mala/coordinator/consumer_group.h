// A consumer group of the KIP-848 consumer protocol (ConsumerGroupHeartbeat), as Kafka 4.x's ConsumerGroup
// and ConsumerGroupMember keep it: the group epoch (bumped whenever membership, subscriptions or the
// subscribed topics' partitions change), the target assignment and its epoch (what the server-side assignor
// computed for that group epoch), and per member its subscription, member epoch and current assignment, which
// converges to the target one step at a time (incremental revocation: a partition reaches its new owner only
// once the previous owner no longer holds it).
//
// This file holds the data and the pure rules: the assignors (`uniform`, `range`), the reconciliation of a
// member towards its target (Kafka's CurrentAssignmentBuilder), the group state shown by
// ConsumerGroupDescribe and ListGroups, and the record codecs of the consumer group records of
// __consumer_offsets (key versions 3-8, proto/ConsumerGroup*.msg). The request handling (epochs, fencing,
// timers, writes) is in consumer_group_manager (src/coordinator).
//
// Topic ids key the assignments, as in Kafka's records and responses; names come from the topic catalog.
//
// Threads: owned by the group coordinator, touched only on its shard. The free functions are pure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mala/common/result.h"
#include "mala/common/uuid.h"
#include "mala/protocol/messages/consumer_group_current_member_assignment_value.h"
#include "mala/protocol/messages/consumer_group_member_metadata_value.h"
#include "mala/protocol/messages/consumer_group_partition_metadata_value.h"
#include "mala/protocol/messages/consumer_group_target_assignment_member_value.h"

namespace mala::coordinator {

struct uuid_less {
  bool operator()(const uuid& a, const uuid& b) const { return a.bytes < b.bytes; }
};

// Partitions by topic id. An entry never holds an empty set.
using topic_partitions = std::map<uuid, std::set<int32_t>, uuid_less>;

// Adds / removes partitions, dropping topics left empty.
void add_partitions(topic_partitions& to, const topic_partitions& what);
topic_partitions minus(const topic_partitions& a, const topic_partitions& b);
topic_partitions intersect(const topic_partitions& a, const topic_partitions& b);
bool contains_partition(const topic_partitions& tp, const uuid& topic, int32_t partition);
size_t partition_count(const topic_partitions& tp);

// What the coordinator knows of a topic (from the metadata image).
struct topic_info {
  std::string name;
  uuid id;
  int32_t partitions = 0;
  bool internal = false;
};
struct topic_catalog {
  std::map<std::string, topic_info> by_name;
  const topic_info* find(const std::string& name) const;
  const topic_info* find(const uuid& id) const;
};

// Kafka's MemberState (the byte stored in ConsumerGroupCurrentMemberAssignmentValue.State).
enum class member_state : int8_t {
  stable = 0,
  unrevoked_partitions = 1,
  unreleased_partitions = 2,
  unknown = 127
};

// Epoch of a member that left for good (LEAVE_GROUP_MEMBER_EPOCH) and of a static member that left
// temporarily and keeps its assignment for a while (LEAVE_GROUP_STATIC_MEMBER_EPOCH).
inline constexpr int32_t leave_group_member_epoch = -1;
inline constexpr int32_t leave_group_static_member_epoch = -2;

// What a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) sent in its last JoinGroup
// (Kafka's ConsumerGroupMemberMetadataValue.ClassicMemberMetadata): its session timeout and its protocols,
// in the client's order of preference, each with its ConsumerProtocolSubscription bytes.
struct classic_member_metadata {
  struct protocol {
    std::string name;
    std::vector<uint8_t> metadata;
    friend bool operator==(const protocol&, const protocol&) = default;
  };
  int32_t session_timeout_ms = 0;
  std::vector<protocol> protocols;
  friend bool operator==(const classic_member_metadata&, const classic_member_metadata&) = default;
};

struct consumer_member {
  std::string member_id;
  std::optional<std::string> instance_id;
  std::optional<std::string> rack_id;
  std::string client_id;
  std::string client_host;
  std::vector<std::string> subscribed_topic_names;
  std::optional<std::string> subscribed_topic_regex;
  int32_t rebalance_timeout_ms = -1;
  std::optional<std::string> server_assignor;
  int32_t member_epoch = 0;
  int32_t previous_member_epoch = 0;
  member_state state = member_state::stable;
  topic_partitions assigned;
  topic_partitions pending_revocation;
  // Set for a classic member of the consumer group (it joined with JoinGroup, or was a member of the classic
  // group this one was upgraded from).
  std::optional<classic_member_metadata> classic;
  bool uses_classic_protocol() const { return classic.has_value(); }
  friend bool operator==(const consumer_member&, const consumer_member&) = default;
};

// ConsumerGroupState's names as DescribeGroups / ConsumerGroupDescribe / ListGroups print them.
enum class consumer_group_state : uint8_t { empty, assigning, reconciling, stable, dead };
std::string_view state_name(consumer_group_state state);

// The topics a member subscribes to, resolved against the catalog: its listed topics that exist, plus the
// topics its regex fully matches (Java's Matcher.matches(), as Kafka resolves RE2/J patterns; internal topics
// excluded).
std::set<std::string> subscribed_topics(const consumer_member& member, const topic_catalog& catalog);

// Whether an RE2/J pattern can be evaluated here: patterns are compiled as std::regex ECMAScript, which
// agrees with RE2 for the usual topic patterns (literals, classes, `.*`, alternation, quantifiers); RE2-only
// syntax
// (\Q..\E, (?P<name>), \p{..}, possessive quantifiers) is refused with INVALID_REGULAR_EXPRESSION.
bool valid_topic_regex(const std::string& pattern);

class consumer_group {
 public:
  explicit consumer_group(std::string group_id) : _group_id(std::move(group_id)) {}

  const std::string& group_id() const { return _group_id; }
  int32_t group_epoch() const { return _group_epoch; }
  void set_group_epoch(int32_t e) { _group_epoch = e; }
  int32_t assignment_epoch() const { return _assignment_epoch; }
  void set_assignment_epoch(int32_t e) { _assignment_epoch = e; }

  const std::map<std::string, consumer_member>& members() const { return _members; }
  consumer_member* member(const std::string& id);
  const consumer_member* member(const std::string& id) const;
  // The member holding a static instance id, if any.
  const consumer_member* static_member(const std::string& instance_id) const;
  void put_member(consumer_member m);
  void remove_member(const std::string& id);

  // Target assignment by member.
  const std::map<std::string, topic_partitions>& target() const { return _target; }
  const topic_partitions& target_of(const std::string& member_id) const;
  void set_target(const std::string& member_id, topic_partitions tp);
  void remove_target(const std::string& member_id);

  // The subscribed topics with their partition counts when the target was last computed (Kafka's
  // subscription metadata, ConsumerGroupPartitionMetadataValue).
  const std::map<std::string, int32_t>& subscription_metadata() const { return _subscription_metadata; }
  void set_subscription_metadata(std::map<std::string, int32_t> m) { _subscription_metadata = std::move(m); }
  // What it would be now: every member's subscribed topics with their partition counts.
  std::map<std::string, int32_t> compute_subscription_metadata(const topic_catalog& catalog) const;

  // The partition's owner: a member holding it assigned or pending revocation; nullptr when free.
  const std::string* owner_of(const uuid& topic, int32_t partition) const;

  consumer_group_state state() const;
  bool is_empty() const { return _members.empty(); }
  // The assignor of the group: the one most members ask for, else `fallback`
  // (ConsumerGroup.preferredServerAssignor).
  std::string preferred_assignor(const std::string& fallback) const;

 private:
  std::string _group_id;
  int32_t _group_epoch = 0;
  int32_t _assignment_epoch = 0;
  std::map<std::string, consumer_member> _members;
  std::map<std::string, std::string> _static_members;  // instance id -> member id
  std::map<std::string, topic_partitions> _target;
  std::map<std::string, int32_t> _subscription_metadata;
};

// --- Assignors (Kafka's UniformAssignor and RangeAssignor, server side)

struct assignor_member {
  std::string member_id;
  std::optional<std::string> instance_id;
  std::set<std::string> topics;  // subscribed topic names that exist
  topic_partitions current_target;
};

// Names the assignors answer to.
inline constexpr std::string_view uniform_assignor_name = "uniform";
inline constexpr std::string_view range_assignor_name = "range";

// `uniform`: every partition of the subscribed topics goes to one subscriber, counts differing by at most one
// among members with the same subscription, keeping each member's previous target where the balance allows
// (sticky). `range`: per topic, the subscribers ordered by member id get consecutive ranges, the first ones
// one partition more (Kafka's range assignor, co-partitioned for topics of equal size).
std::map<std::string, topic_partitions> assign(std::string_view assignor,
                                               const std::vector<assignor_member>& members,
                                               const topic_catalog& catalog);

// --- Reconciliation (Kafka's CurrentAssignmentBuilder)

// The member's next state towards `target` at `target_epoch`. `owned_by_other(topic, partition)` says whether
// another member still holds the partition (assigned or pending revocation). `owned` is what the member said
// it owns in this heartbeat (ConsumerGroupHeartbeatRequest.TopicPartitions), nullopt when not sent.
template <typename OwnedByOther>
consumer_member reconcile(const consumer_member& m, int32_t target_epoch, const topic_partitions& target,
                          OwnedByOther owned_by_other, const std::optional<topic_partitions>& owned);

// --- Records of __consumer_offsets (key versions 3-8)

inline constexpr int16_t consumer_group_metadata_key_version = 3;
inline constexpr int16_t consumer_group_partition_metadata_key_version = 4;
inline constexpr int16_t consumer_group_member_metadata_key_version = 5;
inline constexpr int16_t consumer_group_target_assignment_metadata_key_version = 6;
inline constexpr int16_t consumer_group_target_assignment_member_key_version = 7;
inline constexpr int16_t consumer_group_current_member_assignment_key_version = 8;

struct coordinator_record;  // group_records.h

coordinator_record consumer_group_epoch_record(const std::string& group, int32_t epoch);
coordinator_record consumer_group_epoch_tombstone(const std::string& group);
coordinator_record consumer_group_partition_metadata_record(const std::string& group,
                                                            const std::map<std::string, int32_t>& metadata,
                                                            const topic_catalog& catalog);
coordinator_record consumer_group_partition_metadata_tombstone(const std::string& group);
coordinator_record consumer_group_member_record(const std::string& group, const consumer_member& m);
coordinator_record consumer_group_member_tombstone(const std::string& group, const std::string& member_id);
coordinator_record consumer_group_target_epoch_record(const std::string& group, int32_t epoch);
coordinator_record consumer_group_target_epoch_tombstone(const std::string& group);
coordinator_record consumer_group_target_member_record(const std::string& group, const std::string& member_id,
                                                       const topic_partitions& tp);
coordinator_record consumer_group_target_member_tombstone(const std::string& group,
                                                          const std::string& member_id);
coordinator_record consumer_group_current_assignment_record(const std::string& group,
                                                            const consumer_member& m);
coordinator_record consumer_group_current_assignment_tombstone(const std::string& group,
                                                               const std::string& member_id);

// One decoded consumer group record; `value` nullopt for a tombstone.
struct consumer_group_record {
  int16_t key_version = -1;
  std::string group_id;
  std::string member_id;         // key versions 5, 7, 8
  std::optional<int32_t> epoch;  // 3 and 6
  std::optional<protocol::consumer_group_member_metadata_value> member;
  std::optional<topic_partitions> target;
  std::optional<protocol::consumer_group_current_member_assignment_value> current;
  std::optional<protocol::consumer_group_partition_metadata_value> partition_metadata;
  bool tombstone = false;
};
result<consumer_group_record> decode_consumer_group_record(std::span<const uint8_t> key,
                                                           std::optional<std::span<const uint8_t>> value);
topic_partitions current_assigned(const protocol::consumer_group_current_member_assignment_value& v);
topic_partitions current_pending(const protocol::consumer_group_current_member_assignment_value& v);

// --- Template implementation

template <typename OwnedByOther>
consumer_member reconcile(const consumer_member& m, int32_t target_epoch, const topic_partitions& target,
                          OwnedByOther owned_by_other, const std::optional<topic_partitions>& owned) {
  consumer_member next = m;
  // Still revoking: wait until the member's heartbeat shows it no longer owns the revoked partitions.
  if (m.state == member_state::unrevoked_partitions) {
    if (!owned) return next;
    if (!intersect(*owned, m.pending_revocation).empty()) return next;
    next.pending_revocation.clear();
    // Falls through to a fresh computation at the target epoch.
  } else if (m.member_epoch == target_epoch && m.state == member_state::stable) {
    return next;
  }
  const topic_partitions kept = intersect(m.assigned, target);
  const topic_partitions revoke = minus(m.assigned, target);
  if (!revoke.empty()) {
    // First give up what moved away, at the same epoch; the new partitions come after the revocation.
    next.assigned = kept;
    next.pending_revocation = revoke;
    next.state = member_state::unrevoked_partitions;
    return next;
  }
  topic_partitions assigned = kept;
  bool unreleased = false;
  for (const auto& [topic, parts] : target) {
    for (int32_t p : parts) {
      if (contains_partition(kept, topic, p)) continue;
      if (owned_by_other(topic, p)) {
        unreleased = true;
      } else {
        assigned[topic].insert(p);
      }
    }
  }
  next.assigned = std::move(assigned);
  next.pending_revocation.clear();
  if (next.member_epoch != target_epoch) {
    next.previous_member_epoch = m.member_epoch;
    next.member_epoch = target_epoch;
  }
  next.state = unreleased ? member_state::unreleased_partitions : member_state::stable;
  return next;
}

}  // namespace mala::coordinator
