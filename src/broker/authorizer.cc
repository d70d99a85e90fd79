#include "mala/broker/authorizer.h"

#include <algorithm>

namespace mala::broker {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

authorizer::authorizer(std::string_view super_users, bool allow_everyone_if_no_acl_found)
    : _allow_everyone(allow_everyone_if_no_acl_found) {
  // StandardAuthorizer.getConfiguredSuperUsers: split on ';', trimmed, empty entries dropped.
  while (!super_users.empty()) {
    const auto semi = super_users.find(';');
    const std::string_view item = trim(super_users.substr(0, semi));
    if (!item.empty()) _super_users.emplace(item);
    if (semi == std::string_view::npos) break;
    super_users.remove_prefix(semi + 1);
  }
}

bool authorizer::is_super_user(std::string_view principal) const {
  return _super_users.find(principal) != _super_users.end();
}

bool authorizer::authorize(const metadata::metadata_image& image, std::string_view principal,
                           std::string_view host, metadata::acl_operation op,
                           metadata::acl_resource_type type, std::string_view name) const {
  if (is_super_user(principal)) return true;
  const auto& index = image.acls.index;
  if (!index) return _allow_everyone;
  const metadata::acl_match m = index->match(type, name, principal, host, op);
  if (m.denied) return false;
  if (m.allowed) return true;
  return !m.has_resource_acls && _allow_everyone;
}

bool authorizer::authorize_any(const metadata::metadata_image& image, std::string_view principal,
                               std::string_view host, metadata::acl_operation op,
                               metadata::acl_resource_type type) const {
  // Authorizer.authorizeByResourceType first asks about a resource no ACL is likely to name: that answers for
  // super users and for allow.everyone.if.no.acl.found.
  if (authorize(image, principal, host, op, type, "hardcode")) return true;
  const auto& index = image.acls.index;
  return index && index->any_allowed(type, principal, host, op);
}

std::string principal_of(const net::connection_info& connection) {
  return connection.principal_type + ":" + connection.principal_name;
}

std::string host_of(const net::connection_info& connection) {
  // peer is "host:port", "[v6]:port" for IPv6.
  std::string_view peer = connection.peer;
  const auto colon = peer.rfind(':');
  if (colon != std::string_view::npos) peer = peer.substr(0, colon);
  if (peer.size() >= 2 && peer.front() == '[' && peer.back() == ']') peer = peer.substr(1, peer.size() - 2);
  return std::string(peer);
}

}  // namespace mala::broker
