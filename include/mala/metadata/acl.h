// ACLs as Kafka's StandardAuthorizer keeps them (KIP-801): bindings of a resource pattern (type, name,
// LITERAL or PREFIXED) to an entry (principal, host, operation, ALLOW/DENY), carried in the metadata log as
// AccessControlEntryRecord / RemoveAccessControlEntryRecord and held by the metadata image by id.
//
// Also here: Kafka's filter semantics (AclBindingFilter.matches: ANY and MATCH) used by DescribeAcls and
// DeleteAcls, the checks of AclControlManager on new ACLs and filters, and the index the authorizer reads
// (acl_index): built once per change of the ACL set, immutable afterwards, so every shard reads it without
// locks through its metadata image.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/uuid.h"
#include "mala/metadata/acl_host.h"

namespace mala::metadata {

// Kafka's ResourceType, PatternType, AclOperation and AclPermissionType codes.
enum class acl_resource_type : int8_t {
  unknown = 0,
  any = 1,
  topic = 2,
  group = 3,
  cluster = 4,
  transactional_id = 5,
  delegation_token = 6,
  user = 7,
};
enum class acl_pattern_type : int8_t { unknown = 0, any = 1, match = 2, literal = 3, prefixed = 4 };
enum class acl_operation : int8_t {
  unknown = 0,
  any = 1,
  all = 2,
  read = 3,
  write = 4,
  create = 5,
  remove = 6,  // DELETE
  alter = 7,
  describe = 8,
  cluster_action = 9,
  describe_configs = 10,
  alter_configs = 11,
  idempotent_write = 12,
  create_tokens = 13,
  describe_tokens = 14,
  two_phase_commit = 15,
};
enum class acl_permission : int8_t { unknown = 0, any = 1, deny = 2, allow = 3 };

// A wire code as the enum, UNKNOWN for codes Kafka does not define (as its fromCode does).
acl_resource_type to_acl_resource_type(int8_t code);
acl_pattern_type to_acl_pattern_type(int8_t code);
acl_operation to_acl_operation(int8_t code);
acl_permission to_acl_permission(int8_t code);
// Kafka's names (TOPIC, PREFIXED, DESCRIBE_CONFIGS, ALLOW, ...), for messages.
std::string_view name_of(acl_resource_type t);
std::string_view name_of(acl_pattern_type t);
std::string_view name_of(acl_operation o);
std::string_view name_of(acl_permission p);

// The name of the one CLUSTER resource and the wildcards of resource names, principals and hosts.
inline constexpr std::string_view cluster_resource_name = "kafka-cluster";
inline constexpr std::string_view acl_wildcard = "*";
inline constexpr std::string_view wildcard_principal = "User:*";

struct acl_binding {
  acl_resource_type resource_type = acl_resource_type::unknown;
  std::string resource_name;
  acl_pattern_type pattern_type = acl_pattern_type::literal;
  std::string principal;  // "Type:name"
  std::string host;       // "*" or an IP address
  acl_operation operation = acl_operation::unknown;
  acl_permission permission = acl_permission::unknown;
  friend auto operator<=>(const acl_binding&, const acl_binding&) = default;
};

// AclBindingFilter: nullopt name, principal or host match any; ANY codes match any; pattern type MATCH
// matches the literal name, the wildcard and every prefix pattern of the name.
struct acl_filter {
  acl_resource_type resource_type = acl_resource_type::any;
  std::optional<std::string> resource_name;
  acl_pattern_type pattern_type = acl_pattern_type::any;
  std::optional<std::string> principal;
  std::optional<std::string> host;
  acl_operation operation = acl_operation::any;
  acl_permission permission = acl_permission::any;
};

bool matches(const acl_filter& filter, const acl_binding& acl);
// AclControlManager.validateNewAcl, plus the principal parse of StandardAcl.fromAclBinding: the
// INVALID_REQUEST message for an ACL that cannot be created, nullopt when it can.
std::optional<std::string> invalid_new_acl(const acl_binding& acl);
// AclControlManager.validateFilter: a filter with an UNKNOWN part matches nothing and is refused.
std::optional<std::string> invalid_acl_filter(const acl_filter& filter);

// What the ACLs of a resource say about one action (StandardAuthorizerData.findAclRule): a matching DENY
// wins, then a matching ALLOW; `has_resource_acls` tells whether any ACL (of anyone) names the resource,
// which is where allow.everyone.if.no.acl.found applies.
struct acl_match {
  bool denied = false;
  bool allowed = false;
  bool has_resource_acls = false;
};

// The ACLs by resource type and pattern: literal names in an ordered map, prefixes by name with the set of
// prefix lengths present (a lookup tries only those), and the literal wildcard "*" apart. Immutable once
// built.
class acl_index {
 public:
  explicit acl_index(const std::vector<acl_binding>& acls);

  acl_match match(acl_resource_type type, std::string_view name, std::string_view principal,
                  std::string_view host, acl_operation op) const;
  // Kafka's authorizeByResourceType (AclAuthorizer / StandardAuthorizer): whether some resource of the type
  // is allowed for the operation: an ALLOW on a literal or prefixed pattern that no DENY of the principal
  // covers (a DENY on the wildcard covers all). Used for IDEMPOTENT_WRITE's fallback to WRITE on any topic.
  bool any_allowed(acl_resource_type type, std::string_view principal, std::string_view host,
                   acl_operation op) const;
  bool empty() const { return _count == 0; }

 private:
  struct entry {
    std::string principal;
    std::string host;
    acl_operation operation;
    acl_permission permission;
    // The host's range when it is in CIDR form (KIP-1276), parsed once here.
    std::optional<cidr_range> host_range;
  };
  struct per_type {
    std::map<std::string, std::vector<entry>, std::less<>> literal;
    std::map<std::string, std::vector<entry>, std::less<>> prefixed;
    std::vector<size_t> prefix_lengths;  // sorted, distinct
    std::vector<entry> wildcard;
  };
  const per_type* section(acl_resource_type type) const;
  std::map<acl_resource_type, per_type> _types;
  size_t _count = 0;
};

// The ACLs of the metadata image by id, and their index (rebuilt by metadata_delta when the set changes).
// Equal when the ACLs are: the index follows from them.
struct acl_set {
  struct uuid_less {
    bool operator()(const uuid& a, const uuid& b) const { return a.bytes < b.bytes; }
  };
  std::map<uuid, acl_binding, uuid_less> by_id;
  std::shared_ptr<const acl_index> index;  // null when there are no ACLs

  void rebuild_index();
  friend bool operator==(const acl_set& a, const acl_set& b) { return a.by_id == b.by_id; }
};

// Whether the operation an ACL names covers the requested one (StandardAuthorizerData.findResult): ALL covers
// everything; an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, one of ALTER_CONFIGS also
// DESCRIBE_CONFIGS; a DENY covers only its own operation (and ALL).
bool acl_operation_covers(acl_operation acl_op, acl_permission permission, acl_operation requested);

}  // namespace mala::metadata
