#include "mala/metadata/acl.h"

#include <algorithm>
#include <string>

namespace mala::metadata {

acl_resource_type to_acl_resource_type(int8_t code) {
  return code >= 0 && code <= 7 ? static_cast<acl_resource_type>(code) : acl_resource_type::unknown;
}
acl_pattern_type to_acl_pattern_type(int8_t code) {
  return code >= 0 && code <= 4 ? static_cast<acl_pattern_type>(code) : acl_pattern_type::unknown;
}
acl_operation to_acl_operation(int8_t code) {
  return code >= 0 && code <= 15 ? static_cast<acl_operation>(code) : acl_operation::unknown;
}
acl_permission to_acl_permission(int8_t code) {
  return code >= 0 && code <= 3 ? static_cast<acl_permission>(code) : acl_permission::unknown;
}

std::string_view name_of(acl_resource_type t) {
  static constexpr std::string_view names[] = {
      "UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"};
  const auto i = static_cast<size_t>(t);
  return i < std::size(names) ? names[i] : "UNKNOWN";
}
std::string_view name_of(acl_pattern_type t) {
  static constexpr std::string_view names[] = {"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"};
  const auto i = static_cast<size_t>(t);
  return i < std::size(names) ? names[i] : "UNKNOWN";
}
std::string_view name_of(acl_operation o) {
  static constexpr std::string_view names[] = {"UNKNOWN",
                                               "ANY",
                                               "ALL",
                                               "READ",
                                               "WRITE",
                                               "CREATE",
                                               "DELETE",
                                               "ALTER",
                                               "DESCRIBE",
                                               "CLUSTER_ACTION",
                                               "DESCRIBE_CONFIGS",
                                               "ALTER_CONFIGS",
                                               "IDEMPOTENT_WRITE",
                                               "CREATE_TOKENS",
                                               "DESCRIBE_TOKENS",
                                               "TWO_PHASE_COMMIT"};
  const auto i = static_cast<size_t>(o);
  return i < std::size(names) ? names[i] : "UNKNOWN";
}
std::string_view name_of(acl_permission p) {
  static constexpr std::string_view names[] = {"UNKNOWN", "ANY", "DENY", "ALLOW"};
  const auto i = static_cast<size_t>(p);
  return i < std::size(names) ? names[i] : "UNKNOWN";
}

namespace {

// ResourcePatternFilter.matches.
bool pattern_matches(const acl_filter& f, const acl_binding& acl) {
  if (f.resource_type != acl_resource_type::any && f.resource_type != acl.resource_type) return false;
  if (f.pattern_type != acl_pattern_type::any && f.pattern_type != acl_pattern_type::match &&
      f.pattern_type != acl.pattern_type) {
    return false;
  }
  if (!f.resource_name) return true;
  const std::string& name = *f.resource_name;
  if (f.pattern_type == acl_pattern_type::any || f.pattern_type == acl.pattern_type) {
    return name == acl.resource_name;
  }
  // MATCH: the patterns that would apply to a resource of this name.
  switch (acl.pattern_type) {
    case acl_pattern_type::literal:
      return name == acl.resource_name || acl.resource_name == acl_wildcard;
    case acl_pattern_type::prefixed:
      return std::string_view(name).starts_with(acl.resource_name);
    default:
      return false;
  }
}

// AccessControlEntryFilter.matches.
bool entry_matches(const acl_filter& f, const acl_binding& acl) {
  if (f.principal && *f.principal != acl.principal) return false;
  if (f.host && *f.host != acl.host) return false;
  if (f.operation != acl_operation::any && f.operation != acl.operation) return false;
  return f.permission == acl_permission::any || f.permission == acl.permission;
}

}  // namespace

bool matches(const acl_filter& filter, const acl_binding& acl) {
  return pattern_matches(filter, acl) && entry_matches(filter, acl);
}

std::optional<std::string> invalid_new_acl(const acl_binding& acl) {
  if (acl.resource_type == acl_resource_type::unknown || acl.resource_type == acl_resource_type::any) {
    return "Invalid resourceType " + std::string(name_of(acl.resource_type));
  }
  if (acl.pattern_type != acl_pattern_type::literal && acl.pattern_type != acl_pattern_type::prefixed) {
    return "Invalid patternType " + std::string(name_of(acl.pattern_type));
  }
  if (acl.operation == acl_operation::unknown || acl.operation == acl_operation::any) {
    return "Invalid operation " + std::string(name_of(acl.operation));
  }
  if (acl.permission != acl_permission::allow && acl.permission != acl_permission::deny) {
    return "Invalid permissionType " + std::string(name_of(acl.permission));
  }
  if (acl.resource_name.empty()) return "Resource name should not be empty";
  // SecurityUtils.parseKafkaPrincipal: "type:name".
  const auto colon = acl.principal.find(':');
  if (acl.principal.empty() || colon == std::string::npos) {
    return "expected a string in format principalType:principalName but got " + acl.principal;
  }
  return std::nullopt;
}

std::optional<std::string> invalid_acl_filter(const acl_filter& filter) {
  if (filter.resource_type == acl_resource_type::unknown ||
      filter.pattern_type == acl_pattern_type::unknown) {
    return "Unknown patternFilter.";
  }
  if (filter.operation == acl_operation::unknown || filter.permission == acl_permission::unknown) {
    return "Unknown entryFilter.";
  }
  return std::nullopt;
}

bool acl_operation_covers(acl_operation acl_op, acl_permission permission, acl_operation requested) {
  if (acl_op == acl_operation::all) return true;
  if (permission != acl_permission::allow) return acl_op == requested;
  switch (requested) {
    case acl_operation::describe:
      return acl_op == acl_operation::describe || acl_op == acl_operation::read ||
             acl_op == acl_operation::write || acl_op == acl_operation::remove ||
             acl_op == acl_operation::alter;
    case acl_operation::describe_configs:
      return acl_op == acl_operation::describe_configs || acl_op == acl_operation::alter_configs;
    default:
      return acl_op == requested;
  }
}

acl_index::acl_index(const std::vector<acl_binding>& acls) {
  for (const auto& acl : acls) {
    per_type& t = _types[acl.resource_type];
    entry e{acl.principal, acl.host, acl.operation, acl.permission, std::nullopt};
    if (acl.host.find('/') != std::string::npos) e.host_range = parse_cidr(acl.host);
    if (acl.pattern_type == acl_pattern_type::prefixed) {
      t.prefixed[acl.resource_name].push_back(std::move(e));
      t.prefix_lengths.push_back(acl.resource_name.size());
    } else if (acl.resource_name == acl_wildcard) {
      t.wildcard.push_back(std::move(e));
    } else {
      t.literal[acl.resource_name].push_back(std::move(e));
    }
    ++_count;
  }
  for (auto& [type, t] : _types) {
    std::sort(t.prefix_lengths.begin(), t.prefix_lengths.end());
    t.prefix_lengths.erase(std::unique(t.prefix_lengths.begin(), t.prefix_lengths.end()),
                           t.prefix_lengths.end());
  }
}

const acl_index::per_type* acl_index::section(acl_resource_type type) const {
  auto it = _types.find(type);
  return it == _types.end() ? nullptr : &it->second;
}

namespace {

bool principal_matches(std::string_view acl_principal, std::string_view principal) {
  return acl_principal == principal || acl_principal == wildcard_principal;
}

// StandardAuthorizerData.findResult: the wildcard, the same text, or (KIP-1276) a CIDR range holding it.
template <typename Entry>
bool host_matches(const Entry& e, std::string_view host) {
  return e.host == acl_wildcard || e.host == host || (e.host_range && cidr_contains(*e.host_range, host));
}

}  // namespace

acl_match acl_index::match(acl_resource_type type, std::string_view name, std::string_view principal,
                           std::string_view host, acl_operation op) const {
  acl_match out;
  const per_type* t = section(type);
  if (!t) return out;
  auto consider = [&](const std::vector<entry>& entries) {
    if (!entries.empty()) out.has_resource_acls = true;
    for (const auto& e : entries) {
      if (!principal_matches(e.principal, principal) || !host_matches(e, host)) continue;
      if (!acl_operation_covers(e.operation, e.permission, op)) continue;
      if (e.permission == acl_permission::deny) {
        out.denied = true;
      } else if (e.permission == acl_permission::allow) {
        out.allowed = true;
      }
    }
  };
  if (auto it = t->literal.find(name); it != t->literal.end()) consider(it->second);
  for (size_t len : t->prefix_lengths) {
    if (len > name.size()) break;
    if (auto it = t->prefixed.find(name.substr(0, len)); it != t->prefixed.end()) consider(it->second);
  }
  consider(t->wildcard);
  return out;
}

bool acl_index::any_allowed(acl_resource_type type, std::string_view principal, std::string_view host,
                            acl_operation op) const {
  const per_type* t = section(type);
  if (!t) return false;
  auto applies = [&](const entry& e, acl_permission permission) {
    return e.permission == permission && principal_matches(e.principal, principal) && host_matches(e, host) &&
           (e.operation == op || e.operation == acl_operation::all);
  };
  auto any_of = [&](const std::vector<entry>& entries, acl_permission permission) {
    return std::any_of(entries.begin(), entries.end(),
                       [&](const entry& e) { return applies(e, permission); });
  };
  if (any_of(t->wildcard, acl_permission::deny)) return false;
  if (any_of(t->wildcard, acl_permission::allow)) return true;
  // Whether a DENY prefix of the principal covers `name`.
  auto denied_by_prefix = [&](std::string_view name) {
    for (size_t len : t->prefix_lengths) {
      if (len > name.size()) break;
      auto it = t->prefixed.find(name.substr(0, len));
      if (it != t->prefixed.end() && any_of(it->second, acl_permission::deny)) return true;
    }
    return false;
  };
  for (const auto& [name, entries] : t->literal) {
    if (any_of(entries, acl_permission::allow) && !any_of(entries, acl_permission::deny) &&
        !denied_by_prefix(name)) {
      return true;
    }
  }
  for (const auto& [name, entries] : t->prefixed) {
    if (any_of(entries, acl_permission::allow) && !denied_by_prefix(name)) return true;
  }
  return false;
}

void acl_set::rebuild_index() {
  if (by_id.empty()) {
    index.reset();
    return;
  }
  std::vector<acl_binding> acls;
  acls.reserve(by_id.size());
  for (const auto& [id, acl] : by_id) acls.push_back(acl);
  index = std::make_shared<const acl_index>(acls);
}

}  // namespace mala::metadata
