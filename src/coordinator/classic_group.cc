#include "mala/coordinator/classic_group.h"

#include <algorithm>
#include <utility>

#include "mala/coordinator/consumer_protocol.h"

namespace mala::coordinator {

protocol::join_group_response join_error_response(std::string member_id, error_code e) {
  protocol::join_group_response r;
  r.member_id = std::move(member_id);
  r.error_code = to_wire(e);
  r.generation_id = -1;
  r.protocol_type = std::nullopt;
  r.protocol_name = std::nullopt;
  r.leader = "";
  return r;
}

protocol::sync_group_response sync_error_response(error_code e) {
  protocol::sync_group_response r;
  r.error_code = to_wire(e);
  r.protocol_type = std::nullopt;
  r.protocol_name = std::nullopt;
  return r;
}

std::string_view state_name(classic_group_state state) {
  switch (state) {
    case classic_group_state::empty:
      return "Empty";
    case classic_group_state::preparing_rebalance:
      return "PreparingRebalance";
    case classic_group_state::completing_rebalance:
      return "CompletingRebalance";
    case classic_group_state::stable:
      return "Stable";
    case classic_group_state::dead:
      return "Dead";
  }
  return "Unknown";
}

bool valid_transition(classic_group_state from, classic_group_state to) {
  using s = classic_group_state;
  switch (to) {
    case s::empty:
      return from == s::preparing_rebalance;
    case s::preparing_rebalance:
      return from == s::stable || from == s::completing_rebalance || from == s::empty;
    case s::completing_rebalance:
      return from == s::preparing_rebalance;
    case s::stable:
      return from == s::completing_rebalance;
    case s::dead:
      return true;
  }
  return false;
}

const std::vector<uint8_t>* classic_group_member::metadata(std::string_view protocol) const {
  for (const auto& p : protocols) {
    if (p.name == protocol) return &p.metadata;
  }
  return nullptr;
}

bool classic_group_member::matches(const std::vector<member_protocol>& other) const {
  return protocols == other;
}

std::string classic_group_member::vote(const std::set<std::string>& candidates) const {
  for (const auto& p : protocols) {
    if (candidates.contains(p.name)) return p.name;
  }
  return {};
}

classic_group::classic_group(std::string group_id, classic_group_state state, int64_t now_ms)
    : _group_id(std::move(group_id)), _state(state), _current_state_timestamp(now_ms) {}

classic_group::classic_group(std::string group_id, classic_group_state state, int32_t generation,
                             std::optional<std::string> protocol_type,
                             std::optional<std::string> protocol_name, std::optional<std::string> leader_id,
                             std::optional<int64_t> current_state_timestamp)
    : _group_id(std::move(group_id)),
      _state(state),
      _current_state_timestamp(current_state_timestamp),
      _protocol_type(std::move(protocol_type)),
      _protocol_name(std::move(protocol_name)),
      _generation_id(generation),
      _leader_id(std::move(leader_id)) {}

bool classic_group::uses_consumer_protocol() const {
  return _protocol_type && *_protocol_type == consumer_protocol_type;
}

classic_group_member* classic_group::member(const std::string& member_id) {
  auto it = _members.find(member_id);
  return it == _members.end() ? nullptr : &it->second;
}

const std::string* classic_group::static_member_id(const std::string& instance_id) const {
  auto it = _static_members.find(instance_id);
  return it == _static_members.end() ? nullptr : &it->second;
}

void classic_group::count_protocols(const classic_group_member& member, int delta) {
  for (const auto& p : member.protocols) _supported_protocols[p.name] += delta;
}

void classic_group::add(classic_group_member member, join_callback join) {
  if (member.group_instance_id) _static_members[*member.group_instance_id] = member.member_id;
  if (_members.empty()) _protocol_type = member.protocol_type;
  if (!_leader_id) _leader_id = member.member_id;
  count_protocols(member, +1);
  member.awaiting_join = std::move(join);
  if (member.is_awaiting_join()) ++_awaiting_join_count;
  _pending_join_members.erase(member.member_id);
  const std::string id = member.member_id;
  _members.insert_or_assign(id, std::move(member));
}

void classic_group::remove(const std::string& member_id) {
  auto it = _members.find(member_id);
  if (it != _members.end()) {
    count_protocols(it->second, -1);
    if (it->second.is_awaiting_join()) --_awaiting_join_count;
    if (it->second.group_instance_id) _static_members.erase(*it->second.group_instance_id);
    _members.erase(it);
  }
  if (is_leader(member_id)) {
    _leader_id = _members.empty() ? std::nullopt : std::optional<std::string>(_members.begin()->first);
  }
  _pending_join_members.erase(member_id);
  _pending_sync_members.erase(member_id);
}

classic_group_member& classic_group::replace_static_member(const std::string& instance_id,
                                                           const std::string& old_member_id,
                                                           const std::string& new_member_id) {
  auto node = _members.extract(old_member_id);
  classic_group_member& old_member = node.mapped();
  // The old incarnation is fenced at once if it is still waiting for an answer.
  if (old_member.is_awaiting_join()) {
    protocol::join_group_response r;
    r.member_id = old_member_id;
    r.protocol_name = std::nullopt;
    r.protocol_type = std::nullopt;
    r.leader = "";
    r.error_code = to_wire(error_code::fenced_instance_id);
    auto cb = std::move(old_member.awaiting_join);
    old_member.awaiting_join = nullptr;
    --_awaiting_join_count;
    cb(std::move(r));
  }
  if (old_member.is_awaiting_sync()) {
    protocol::sync_group_response r;
    r.protocol_name = std::nullopt;
    r.protocol_type = std::nullopt;
    r.error_code = to_wire(error_code::fenced_instance_id);
    auto cb = std::move(old_member.awaiting_sync);
    old_member.awaiting_sync = nullptr;
    cb(std::move(r));
  }
  classic_group_member replacement = std::move(old_member);
  replacement.member_id = new_member_id;
  replacement.awaiting_join = nullptr;
  replacement.awaiting_sync = nullptr;
  replacement.is_new = false;
  if (is_leader(old_member_id)) _leader_id = new_member_id;
  _static_members[instance_id] = new_member_id;
  _pending_sync_members.erase(old_member_id);
  auto [it, inserted] = _members.insert_or_assign(new_member_id, std::move(replacement));
  (void)inserted;
  return it->second;
}

void classic_group::update_member(classic_group_member& member, std::vector<member_protocol> protocols,
                                  int32_t rebalance_timeout_ms, int32_t session_timeout_ms,
                                  join_callback join) {
  count_protocols(member, -1);
  member.protocols = std::move(protocols);
  count_protocols(member, +1);
  member.rebalance_timeout_ms = rebalance_timeout_ms;
  member.session_timeout_ms = session_timeout_ms;
  if (join && !member.is_awaiting_join()) {
    ++_awaiting_join_count;
  } else if (!join && member.is_awaiting_join()) {
    --_awaiting_join_count;
  }
  member.awaiting_join = std::move(join);
}

bool classic_group::complete_join(classic_group_member& member, protocol::join_group_response response) {
  if (!member.is_awaiting_join()) return false;
  auto cb = std::move(member.awaiting_join);
  member.awaiting_join = nullptr;
  --_awaiting_join_count;
  cb(std::move(response));
  return true;
}

bool classic_group::complete_sync(classic_group_member& member, protocol::sync_group_response response) {
  if (!member.is_awaiting_sync()) return false;
  auto cb = std::move(member.awaiting_sync);
  member.awaiting_sync = nullptr;
  cb(std::move(response));
  return true;
}

std::vector<std::string> classic_group::not_yet_rejoined_members() const {
  std::vector<std::string> out;
  for (const auto& [id, m] : _members) {
    if (!m.is_awaiting_join()) out.push_back(id);
  }
  return out;
}

int32_t classic_group::rebalance_timeout_ms() const {
  int32_t longest = 0;
  for (const auto& [id, m] : _members) longest = std::max(longest, m.rebalance_timeout_ms);
  return longest;
}

error_code classic_group::validate_member(const std::string& member_id,
                                          const std::optional<std::string>& instance_id) const {
  if (instance_id) {
    const std::string* existing = static_member_id(*instance_id);
    if (!existing) return error_code::unknown_member_id;
    if (*existing != member_id) return error_code::fenced_instance_id;
  }
  if (!has_member(member_id)) return error_code::unknown_member_id;
  return error_code::none;
}

bool classic_group::supports_protocols(const std::string& protocol_type,
                                       const std::vector<member_protocol>& protocols) const {
  if (in_state(classic_group_state::empty)) return !protocol_type.empty() && !protocols.empty();
  if (!_protocol_type || *_protocol_type != protocol_type) return false;
  const auto everyone = static_cast<int32_t>(_members.size());
  return std::any_of(protocols.begin(), protocols.end(), [&](const member_protocol& p) {
    auto it = _supported_protocols.find(p.name);
    return (it == _supported_protocols.end() ? 0 : it->second) == everyone;
  });
}

void classic_group::transition_to(classic_group_state state, int64_t now_ms) {
  _previous_state = _state;
  _state = state;
  _current_state_timestamp = now_ms;
}

std::set<std::string> classic_group::candidate_protocols() const {
  std::set<std::string> out;
  const auto everyone = static_cast<int32_t>(_members.size());
  for (const auto& [name, count] : _supported_protocols) {
    if (count == everyone) out.insert(name);
  }
  return out;
}

std::string classic_group::select_protocol() const {
  const auto candidates = candidate_protocols();
  std::map<std::string, int32_t> votes;
  for (const auto& [id, m] : _members) ++votes[m.vote(candidates)];
  std::string chosen;
  int32_t best = -1;
  // Ties go to the alphabetically first name (Kafka's pick among equal counts depends on HashMap order).
  for (const auto& [name, count] : votes) {
    if (count > best) {
      best = count;
      chosen = name;
    }
  }
  return chosen;
}

bool classic_group::maybe_elect_new_joined_leader() {
  if (!_leader_id) return false;
  auto* leader = member(*_leader_id);
  if (leader && leader->is_awaiting_join()) return true;
  for (const auto& [id, m] : _members) {
    if (m.is_awaiting_join()) {
      _leader_id = id;
      return true;
    }
  }
  return false;
}

void classic_group::init_next_generation(int64_t now_ms) {
  ++_generation_id;
  if (!_members.empty()) {
    _protocol_name = select_protocol();
    update_subscribed_topics();
    transition_to(classic_group_state::completing_rebalance, now_ms);
  } else {
    _protocol_name.reset();
    update_subscribed_topics();
    transition_to(classic_group_state::empty, now_ms);
  }
  _pending_sync_members.clear();
}

std::vector<protocol::join_group_response::join_group_response_member>
classic_group::current_member_metadata() const {
  std::vector<protocol::join_group_response::join_group_response_member> out;
  out.reserve(_members.size());
  for (const auto& [id, m] : _members) {
    auto& e = out.emplace_back();
    e.member_id = id;
    e.group_instance_id = m.group_instance_id;
    if (_protocol_name) {
      if (const auto* md = m.metadata(*_protocol_name)) e.metadata = *md;
    }
  }
  return out;
}

void classic_group::update_subscribed_topics() {
  if (!uses_consumer_protocol()) {
    _subscribed_topics.reset();
    return;
  }
  if (_members.empty()) {
    _subscribed_topics = std::set<std::string>{};
    return;
  }
  if (!_protocol_name) {
    _subscribed_topics.reset();
    return;
  }
  std::set<std::string> all;
  for (const auto& [id, m] : _members) {
    const auto* md = m.metadata(*_protocol_name);
    auto topics = md ? subscription_topics(*md) : std::nullopt;
    if (!topics) {
      // Kafka logs the parse failure and stops tracking the subscription.
      _subscribed_topics.reset();
      return;
    }
    all.insert(topics->begin(), topics->end());
  }
  _subscribed_topics = std::move(all);
}

bool classic_group::is_subscribed_to_topic(const std::string& topic) const {
  if (_subscribed_topics) return _subscribed_topics->contains(topic);
  return uses_consumer_protocol();
}

}  // namespace mala::coordinator
