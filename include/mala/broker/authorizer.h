// Kafka's StandardAuthorizer (authorizer.class.name =
// org.apache.kafka.metadata.authorizer.StandardAuthorizer) over the ACLs of the metadata image: super users
// (super.users) are allowed everything; otherwise a DENY ACL matching the principal (or User:*), the host (or
// *) and the operation wins over an ALLOW, literal, prefixed and wildcard (*) resource patterns all apply,
// ALLOWs of READ/WRITE/DELETE/ALTER imply DESCRIBE and ALTER_CONFIGS implies DESCRIBE_CONFIGS; a resource no
// ACL names is allowed only with allow.everyone.if.no.acl.found.
//
// Every check reads the image's acl_index (built once per ACL change by metadata_delta): no locks, any
// shard. Handlers call `authorized` (null authorizer: no authorization configured, everything is allowed,
// as a Kafka broker without authorizer.class.name).
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "mala/metadata/acl.h"
#include "mala/metadata/metadata_image.h"
#include "mala/net/request_dispatcher.h"

namespace mala {
class node_config;
}

namespace mala::broker {

// The only authorizer.class.name Mala accepts besides "" (none).
inline constexpr std::string_view standard_authorizer_class =
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

class authorizer {
 public:
  // super_users: "User:alice;User:bob" as super.users gives it.
  authorizer(std::string_view super_users, bool allow_everyone_if_no_acl_found);

  bool is_super_user(std::string_view principal) const;
  bool authorize(const metadata::metadata_image& image, std::string_view principal, std::string_view host,
                 metadata::acl_operation op, metadata::acl_resource_type type, std::string_view name) const;
  // Authorizer.authorizeByResourceType: whether the principal may do `op` on some resource of the type.
  bool authorize_any(const metadata::metadata_image& image, std::string_view principal, std::string_view host,
                     metadata::acl_operation op, metadata::acl_resource_type type) const;

 private:
  std::set<std::string, std::less<>> _super_users;
  bool _allow_everyone;
};

// The Kafka principal ("User:ANONYMOUS") and host (the peer's IP address) of a connection.
std::string principal_of(const net::connection_info& connection);
std::string host_of(const net::connection_info& connection);

}  // namespace mala::broker
