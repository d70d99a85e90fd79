#include "mala/coordinator/consumer_group.h"

#include <algorithm>
#include <regex>

#include "mala/coordinator/group_records.h"
#include "mala/protocol/messages/consumer_group_current_member_assignment_key.h"
#include "mala/protocol/messages/consumer_group_member_metadata_key.h"
#include "mala/protocol/messages/consumer_group_metadata_key.h"
#include "mala/protocol/messages/consumer_group_metadata_value.h"
#include "mala/protocol/messages/consumer_group_partition_metadata_key.h"
#include "mala/protocol/messages/consumer_group_target_assignment_member_key.h"
#include "mala/protocol/messages/consumer_group_target_assignment_metadata_key.h"
#include "mala/protocol/messages/consumer_group_target_assignment_metadata_value.h"
#include "mala/protocol/versioned_message.h"
#include "mala/protocol/wire.h"

namespace mala::coordinator {

namespace proto = mala::protocol;

void add_partitions(topic_partitions& to, const topic_partitions& what) {
  for (const auto& [t, ps] : what) {
    if (!ps.empty()) to[t].insert(ps.begin(), ps.end());
  }
}

topic_partitions minus(const topic_partitions& a, const topic_partitions& b) {
  topic_partitions out;
  for (const auto& [t, ps] : a) {
    auto it = b.find(t);
    for (int32_t p : ps) {
      if (it == b.end() || !it->second.contains(p)) out[t].insert(p);
    }
  }
  return out;
}

topic_partitions intersect(const topic_partitions& a, const topic_partitions& b) {
  topic_partitions out;
  for (const auto& [t, ps] : a) {
    auto it = b.find(t);
    if (it == b.end()) continue;
    for (int32_t p : ps) {
      if (it->second.contains(p)) out[t].insert(p);
    }
  }
  return out;
}

bool contains_partition(const topic_partitions& tp, const uuid& topic, int32_t partition) {
  auto it = tp.find(topic);
  return it != tp.end() && it->second.contains(partition);
}

size_t partition_count(const topic_partitions& tp) {
  size_t n = 0;
  for (const auto& [t, ps] : tp) n += ps.size();
  return n;
}

const topic_info* topic_catalog::find(const std::string& name) const {
  auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : &it->second;
}

const topic_info* topic_catalog::find(const uuid& id) const {
  for (const auto& [n, t] : by_name) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

std::string_view state_name(consumer_group_state state) {
  switch (state) {
    case consumer_group_state::empty:
      return "Empty";
    case consumer_group_state::assigning:
      return "Assigning";
    case consumer_group_state::reconciling:
      return "Reconciling";
    case consumer_group_state::stable:
      return "Stable";
    case consumer_group_state::dead:
      return "Dead";
  }
  return "Unknown";
}

bool valid_topic_regex(const std::string& pattern) {
  // RE2/J constructs std::regex would read differently or not at all.
  for (std::string_view rejected : {"\\Q", "\\E", "(?P<", "\\p{", "\\P{", "*+", "++", "?+", "(?i)", "(?s)"}) {
    if (pattern.find(rejected) != std::string::npos) return false;
  }
  try {
    std::regex re(pattern, std::regex::ECMAScript);
    (void)re;
    return true;
  } catch (const std::regex_error&) {
    return false;
  }
}

std::set<std::string> subscribed_topics(const consumer_member& member, const topic_catalog& catalog) {
  std::set<std::string> out;
  for (const auto& name : member.subscribed_topic_names) {
    if (catalog.find(name)) out.insert(name);
  }
  if (member.subscribed_topic_regex && !member.subscribed_topic_regex->empty() &&
      valid_topic_regex(*member.subscribed_topic_regex)) {
    // std::regex throws only on construction (checked above) or on pathological backtracking; the latter is
    // treated as no match.
    try {
      std::regex re(*member.subscribed_topic_regex, std::regex::ECMAScript);
      for (const auto& [name, t] : catalog.by_name) {
        if (!t.internal && std::regex_match(name, re)) out.insert(name);
      }
    } catch (const std::regex_error&) {
    }
  }
  return out;
}

// --- consumer_group

consumer_member* consumer_group::member(const std::string& id) {
  auto it = _members.find(id);
  return it == _members.end() ? nullptr : &it->second;
}

const consumer_member* consumer_group::member(const std::string& id) const {
  auto it = _members.find(id);
  return it == _members.end() ? nullptr : &it->second;
}

const consumer_member* consumer_group::static_member(const std::string& instance_id) const {
  auto it = _static_members.find(instance_id);
  return it == _static_members.end() ? nullptr : member(it->second);
}

void consumer_group::put_member(consumer_member m) {
  if (auto* old = member(m.member_id); old && old->instance_id && old->instance_id != m.instance_id) {
    _static_members.erase(*old->instance_id);
  }
  if (m.instance_id) _static_members[*m.instance_id] = m.member_id;
  const std::string id = m.member_id;
  _members.insert_or_assign(id, std::move(m));
}

void consumer_group::remove_member(const std::string& id) {
  auto it = _members.find(id);
  if (it == _members.end()) return;
  if (it->second.instance_id) {
    auto s = _static_members.find(*it->second.instance_id);
    if (s != _static_members.end() && s->second == id) _static_members.erase(s);
  }
  _members.erase(it);
}

const topic_partitions& consumer_group::target_of(const std::string& member_id) const {
  static const topic_partitions none;
  auto it = _target.find(member_id);
  return it == _target.end() ? none : it->second;
}

void consumer_group::set_target(const std::string& member_id, topic_partitions tp) {
  _target.insert_or_assign(member_id, std::move(tp));
}

void consumer_group::remove_target(const std::string& member_id) {
  _target.erase(member_id);
}

std::map<std::string, int32_t> consumer_group::compute_subscription_metadata(
    const topic_catalog& catalog) const {
  std::map<std::string, int32_t> out;
  for (const auto& [id, m] : _members) {
    for (const auto& name : subscribed_topics(m, catalog)) out[name] = catalog.find(name)->partitions;
  }
  return out;
}

const std::string* consumer_group::owner_of(const uuid& topic, int32_t partition) const {
  for (const auto& [id, m] : _members) {
    if (contains_partition(m.assigned, topic, partition) ||
        contains_partition(m.pending_revocation, topic, partition)) {
      return &id;
    }
  }
  return nullptr;
}

consumer_group_state consumer_group::state() const {
  if (_members.empty()) return consumer_group_state::empty;
  if (_group_epoch > _assignment_epoch) return consumer_group_state::assigning;
  for (const auto& [id, m] : _members) {
    if (m.member_epoch != _assignment_epoch || m.state != member_state::stable) {
      return consumer_group_state::reconciling;
    }
  }
  return consumer_group_state::stable;
}

std::string consumer_group::preferred_assignor(const std::string& fallback) const {
  std::map<std::string, int> votes;
  for (const auto& [id, m] : _members) {
    if (m.server_assignor) ++votes[*m.server_assignor];
  }
  std::string best = fallback;
  int best_votes = 0;
  for (const auto& [name, n] : votes) {
    if (n > best_votes) {
      best = name;
      best_votes = n;
    }
  }
  return best;
}

// --- Assignors

namespace {

std::map<std::string, topic_partitions> assign_range(const std::vector<assignor_member>& members,
                                                     const topic_catalog& catalog) {
  std::map<std::string, topic_partitions> out;
  for (const auto& m : members) out[m.member_id];
  std::map<std::string, std::vector<std::string>> subscribers;  // topic -> member ids, sorted
  for (const auto& m : members) {
    for (const auto& t : m.topics) subscribers[t].push_back(m.member_id);
  }
  for (auto& [topic, ids] : subscribers) {
    const topic_info* info = catalog.find(topic);
    if (!info || info->partitions <= 0) continue;
    std::sort(ids.begin(), ids.end());
    const int32_t n = info->partitions;
    const int32_t count = static_cast<int32_t>(ids.size());
    const int32_t base = n / count;
    const int32_t extra = n % count;
    int32_t next = 0;
    for (int32_t i = 0; i < count; ++i) {
      const int32_t take = base + (i < extra ? 1 : 0);
      for (int32_t k = 0; k < take; ++k) out[ids[static_cast<size_t>(i)]][info->id].insert(next++);
    }
  }
  return out;
}

std::map<std::string, topic_partitions> assign_uniform(const std::vector<assignor_member>& members,
                                                       const topic_catalog& catalog) {
  std::map<std::string, topic_partitions> out;
  std::map<std::string, size_t> counts;
  for (const auto& m : members) {
    out[m.member_id];
    counts[m.member_id] = 0;
  }
  // Every partition to assign, and its possible owners.
  std::map<std::string, std::vector<const assignor_member*>> subscribers;
  for (const auto& m : members) {
    for (const auto& t : m.topics) subscribers[t].push_back(&m);
  }
  size_t total = 0;
  for (const auto& [topic, subs] : subscribers) {
    if (const auto* info = catalog.find(topic)) total += static_cast<size_t>(std::max(0, info->partitions));
  }
  // Quotas as for a homogeneous subscription: floor(total / members), the first `extra` members to fill up
  // taking one more. With heterogeneous subscriptions the least-loaded-subscriber rule below still balances
  // each topic's subscribers.
  const size_t member_count = std::max<size_t>(1, members.size());
  const size_t min_quota = total / member_count;
  size_t extra = total % member_count;
  std::set<std::pair<std::string, int32_t>> taken;
  // Sticky step: keep the previous target up to the quota.
  for (const auto& m : members) {
    size_t kept = 0;
    for (const auto& [tid, ps] : m.current_target) {
      const topic_info* info = catalog.find(tid);
      if (!info || !m.topics.contains(info->name)) continue;
      for (int32_t p : ps) {
        if (p >= info->partitions || taken.contains({info->name, p})) continue;
        size_t quota = min_quota + (extra > 0 ? 1 : 0);
        if (kept >= quota) break;
        out[m.member_id][tid].insert(p);
        taken.insert({info->name, p});
        ++kept;
      }
    }
    if (kept > min_quota && extra > 0) --extra;
    counts[m.member_id] = kept;
  }
  // Fill: each free partition to its least-loaded subscriber (ties by member id, for determinism).
  for (const auto& [topic, subs] : subscribers) {
    const topic_info* info = catalog.find(topic);
    if (!info) continue;
    for (int32_t p = 0; p < info->partitions; ++p) {
      if (taken.contains({topic, p})) continue;
      const assignor_member* best = nullptr;
      for (const auto* s : subs) {
        if (!best || counts[s->member_id] < counts[best->member_id] ||
            (counts[s->member_id] == counts[best->member_id] && s->member_id < best->member_id)) {
          best = s;
        }
      }
      if (!best) continue;
      out[best->member_id][info->id].insert(p);
      ++counts[best->member_id];
      taken.insert({topic, p});
    }
  }
  return out;
}

}  // namespace

std::map<std::string, topic_partitions> assign(std::string_view assignor,
                                               const std::vector<assignor_member>& members,
                                               const topic_catalog& catalog) {
  if (assignor == range_assignor_name) return assign_range(members, catalog);
  return assign_uniform(members, catalog);
}

// --- Records

namespace {

template <typename K>
std::vector<uint8_t> group_key(const std::string& group, int16_t version) {
  K k;
  k.group_id = group;
  return protocol::encode_versioned(k, version);
}

template <typename K>
std::vector<uint8_t> member_key(const std::string& group, const std::string& member, int16_t version) {
  K k;
  k.group_id = group;
  k.member_id = member;
  return protocol::encode_versioned(k, version);
}

template <typename V>
std::vector<V> to_wire_partitions(const topic_partitions& tp) {
  std::vector<V> out;
  for (const auto& [t, ps] : tp) {
    auto& e = out.emplace_back();
    e.topic_id = t;
    e.partitions.assign(ps.begin(), ps.end());
  }
  return out;
}

template <typename V>
topic_partitions from_wire_partitions(const std::vector<V>& v) {
  topic_partitions out;
  for (const auto& e : v) {
    if (!e.partitions.empty()) out[e.topic_id].insert(e.partitions.begin(), e.partitions.end());
  }
  return out;
}

template <typename M>
result<M> decode_body(proto::wire_reader& r, int16_t version, const char* what) {
  if (version < M::min_version || version > M::max_version) {
    return status::error(error_code::corrupt_message,
                         std::string(what) + " version " + std::to_string(version) + " is not known");
  }
  M m;
  if (m.decode(r, version) != proto::decode_status::ok || !r.ok()) {
    return status::error(error_code::corrupt_message, std::string(what) + " does not parse");
  }
  return m;
}

}  // namespace

coordinator_record consumer_group_epoch_record(const std::string& group, int32_t epoch) {
  proto::consumer_group_metadata_value v;
  v.epoch = epoch;
  return {group_key<proto::consumer_group_metadata_key>(group, consumer_group_metadata_key_version),
          protocol::encode_versioned(v, 0)};
}
coordinator_record consumer_group_epoch_tombstone(const std::string& group) {
  return {group_key<proto::consumer_group_metadata_key>(group, consumer_group_metadata_key_version),
          std::nullopt};
}

coordinator_record consumer_group_partition_metadata_record(const std::string& group,
                                                            const std::map<std::string, int32_t>& metadata,
                                                            const topic_catalog& catalog) {
  proto::consumer_group_partition_metadata_value v;
  for (const auto& [name, partitions] : metadata) {
    auto& t = v.topics.emplace_back();
    if (const auto* info = catalog.find(name)) t.topic_id = info->id;
    t.topic_name = name;
    t.num_partitions = partitions;
  }
  return {group_key<proto::consumer_group_partition_metadata_key>(
              group, consumer_group_partition_metadata_key_version),
          protocol::encode_versioned(v, 0)};
}
coordinator_record consumer_group_partition_metadata_tombstone(const std::string& group) {
  return {group_key<proto::consumer_group_partition_metadata_key>(
              group, consumer_group_partition_metadata_key_version),
          std::nullopt};
}

coordinator_record consumer_group_member_record(const std::string& group, const consumer_member& m) {
  proto::consumer_group_member_metadata_value v;
  v.instance_id = m.instance_id;
  v.rack_id = m.rack_id;
  v.client_id = m.client_id;
  v.client_host = m.client_host;
  v.subscribed_topic_names = m.subscribed_topic_names;
  v.subscribed_topic_regex = m.subscribed_topic_regex;
  v.rebalance_timeout_ms = m.rebalance_timeout_ms;
  v.server_assignor = m.server_assignor;
  if (m.classic) {
    auto& c = v.classic_member_metadata.emplace();
    c.session_timeout_ms = m.classic->session_timeout_ms;
    for (const auto& p : m.classic->protocols) c.supported_protocols.push_back({p.name, p.metadata});
  }
  return {member_key<proto::consumer_group_member_metadata_key>(group, m.member_id,
                                                                consumer_group_member_metadata_key_version),
          protocol::encode_versioned(v, 0)};
}
coordinator_record consumer_group_member_tombstone(const std::string& group, const std::string& member_id) {
  return {member_key<proto::consumer_group_member_metadata_key>(group, member_id,
                                                                consumer_group_member_metadata_key_version),
          std::nullopt};
}

coordinator_record consumer_group_target_epoch_record(const std::string& group, int32_t epoch) {
  proto::consumer_group_target_assignment_metadata_value v;
  v.assignment_epoch = epoch;
  return {group_key<proto::consumer_group_target_assignment_metadata_key>(
              group, consumer_group_target_assignment_metadata_key_version),
          protocol::encode_versioned(v, 0)};
}
coordinator_record consumer_group_target_epoch_tombstone(const std::string& group) {
  return {group_key<proto::consumer_group_target_assignment_metadata_key>(
              group, consumer_group_target_assignment_metadata_key_version),
          std::nullopt};
}

coordinator_record consumer_group_target_member_record(const std::string& group, const std::string& member_id,
                                                       const topic_partitions& tp) {
  proto::consumer_group_target_assignment_member_value v;
  v.topic_partitions =
      to_wire_partitions<proto::consumer_group_target_assignment_member_value::topic_partition>(tp);
  return {member_key<proto::consumer_group_target_assignment_member_key>(
              group, member_id, consumer_group_target_assignment_member_key_version),
          protocol::encode_versioned(v, 0)};
}
coordinator_record consumer_group_target_member_tombstone(const std::string& group,
                                                          const std::string& member_id) {
  return {member_key<proto::consumer_group_target_assignment_member_key>(
              group, member_id, consumer_group_target_assignment_member_key_version),
          std::nullopt};
}

coordinator_record consumer_group_current_assignment_record(const std::string& group,
                                                            const consumer_member& m) {
  proto::consumer_group_current_member_assignment_value v;
  v.member_epoch = m.member_epoch;
  v.previous_member_epoch = m.previous_member_epoch;
  v.state = static_cast<int8_t>(m.state);
  using tp = proto::consumer_group_current_member_assignment_value::topic_partitions;
  v.assigned_partitions = to_wire_partitions<tp>(m.assigned);
  v.partitions_pending_revocation = to_wire_partitions<tp>(m.pending_revocation);
  return {member_key<proto::consumer_group_current_member_assignment_key>(
              group, m.member_id, consumer_group_current_member_assignment_key_version),
          protocol::encode_versioned(v, 0)};
}
coordinator_record consumer_group_current_assignment_tombstone(const std::string& group,
                                                               const std::string& member_id) {
  return {member_key<proto::consumer_group_current_member_assignment_key>(
              group, member_id, consumer_group_current_member_assignment_key_version),
          std::nullopt};
}

result<consumer_group_record> decode_consumer_group_record(std::span<const uint8_t> key,
                                                           std::optional<std::span<const uint8_t>> value) {
  proto::wire_reader kr(key);
  consumer_group_record out;
  out.key_version = kr.read_int16();
  if (!kr.ok()) return status::error(error_code::corrupt_message, "record key shorter than its version");
  std::optional<proto::wire_reader> vr;
  int16_t vv = -1;
  if (value) {
    vr.emplace(*value);
    vv = vr->read_int16();
    if (!vr->ok()) return status::error(error_code::corrupt_message, "record value shorter than its version");
  } else {
    out.tombstone = true;
  }
  auto group_only = [&]<typename K>(const char* what) -> status {
    auto k = decode_body<K>(kr, out.key_version, what);
    if (!k) return k.error();
    out.group_id = std::move(k->group_id);
    return status::success();
  };
  auto with_member = [&]<typename K>(const char* what) -> status {
    auto k = decode_body<K>(kr, out.key_version, what);
    if (!k) return k.error();
    out.group_id = std::move(k->group_id);
    out.member_id = std::move(k->member_id);
    return status::success();
  };
  status st = status::success();
  switch (out.key_version) {
    case consumer_group_metadata_key_version:
      st = group_only.operator()<proto::consumer_group_metadata_key>("ConsumerGroupMetadataKey");
      if (st.ok() && vr) {
        auto v = decode_body<proto::consumer_group_metadata_value>(*vr, vv, "ConsumerGroupMetadataValue");
        if (!v) return v.error();
        out.epoch = v->epoch;
      }
      break;
    case consumer_group_partition_metadata_key_version:
      st = group_only.operator()<proto::consumer_group_partition_metadata_key>(
          "ConsumerGroupPartitionMetadataKey");
      if (st.ok() && vr) {
        auto v = decode_body<proto::consumer_group_partition_metadata_value>(
            *vr, vv, "ConsumerGroupPartitionMetadataValue");
        if (!v) return v.error();
        out.partition_metadata = std::move(*v);
      }
      break;
    case consumer_group_member_metadata_key_version:
      st =
          with_member.operator()<proto::consumer_group_member_metadata_key>("ConsumerGroupMemberMetadataKey");
      if (st.ok() && vr) {
        auto v = decode_body<proto::consumer_group_member_metadata_value>(*vr, vv,
                                                                          "ConsumerGroupMemberMetadataValue");
        if (!v) return v.error();
        out.member = std::move(*v);
      }
      break;
    case consumer_group_target_assignment_metadata_key_version:
      st = group_only.operator()<proto::consumer_group_target_assignment_metadata_key>(
          "ConsumerGroupTargetAssignmentMetadataKey");
      if (st.ok() && vr) {
        auto v = decode_body<proto::consumer_group_target_assignment_metadata_value>(
            *vr, vv, "ConsumerGroupTargetAssignmentMetadataValue");
        if (!v) return v.error();
        out.epoch = v->assignment_epoch;
      }
      break;
    case consumer_group_target_assignment_member_key_version:
      st = with_member.operator()<proto::consumer_group_target_assignment_member_key>(
          "ConsumerGroupTargetAssignmentMemberKey");
      if (st.ok() && vr) {
        auto v = decode_body<proto::consumer_group_target_assignment_member_value>(
            *vr, vv, "ConsumerGroupTargetAssignmentMemberValue");
        if (!v) return v.error();
        out.target = from_wire_partitions(v->topic_partitions);
      }
      break;
    case consumer_group_current_member_assignment_key_version:
      st = with_member.operator()<proto::consumer_group_current_member_assignment_key>(
          "ConsumerGroupCurrentMemberAssignmentKey");
      if (st.ok() && vr) {
        auto v = decode_body<proto::consumer_group_current_member_assignment_value>(
            *vr, vv, "ConsumerGroupCurrentMemberAssignmentValue");
        if (!v) return v.error();
        out.current = std::move(*v);
      }
      break;
    default:
      return status::error(error_code::corrupt_message, "key version " + std::to_string(out.key_version) +
                                                            " is not a consumer group record");
  }
  if (!st.ok()) return st;
  return out;
}

// Converts a stored current assignment back (used by the manager's replay).
topic_partitions current_assigned(const proto::consumer_group_current_member_assignment_value& v) {
  return from_wire_partitions(v.assigned_partitions);
}
topic_partitions current_pending(const proto::consumer_group_current_member_assignment_value& v) {
  return from_wire_partitions(v.partitions_pending_revocation);
}

}  // namespace mala::coordinator
