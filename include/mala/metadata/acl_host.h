// The host of an ACL entry as Kafka 4.4's StandardAuthorizer reads it: "*" (any host), a client address
// compared as text, or since KIP-1276 (metadata.version 4.4-IV1, feature level 32) a CIDR range,
// "a.b.c.d/n" or "<IPv6 address>/n", that matches every client address inside it. Pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mala::metadata {

// The metadata.version feature level from which CreateAcls accepts CIDR hosts (MetadataVersion.IBP_4_4_IV1,
// isCidrAclSupported).
inline constexpr int16_t cidr_acl_metadata_version = 32;

// An address range: the first `prefix_bits` bits of `network` (the rest zero). IPv4 ranges keep their four
// bytes at the front.
struct cidr_range {
  bool ipv6 = false;
  std::array<uint8_t, 16> network{};
  int prefix_bits = 0;
  friend bool operator==(const cidr_range&, const cidr_range&) = default;
};

// A host in CIDR form (Kafka's CidrUtils.validate): IPv6 when it contains ':', else IPv4 with exactly four
// decimal octets of 1-3 digits and a prefix of 1-2 digits. Host bits past the prefix are masked off. On
// failure `error` gets Kafka's reason ("Could not parse [x]", "Value [33] not in range [0,32]", "Could not
// parse [x] - missing prefix length", ...).
std::optional<cidr_range> parse_cidr(std::string_view host, std::string* error = nullptr);

// Whether a client address (as the connection reports it, IPv4 or IPv6 text; an IPv4-mapped IPv6 address
// counts as IPv4) lies in the range. An IPv4 address never matches an IPv6 range, nor the reverse.
bool cidr_contains(const cidr_range& range, std::string_view address);

// AclControlManager.validateHostPattern for a new ACL: empty is refused, "*" and hosts without '/' pass, a
// '/' needs `cidr_supported` (metadata.version >= cidr_acl_metadata_version) and a valid range. The reason
// when refused, and whether the code is UNSUPPORTED_VERSION (else INVALID_REQUEST).
struct acl_host_problem {
  bool unsupported_version = false;
  std::string message;
};
std::optional<acl_host_problem> invalid_acl_host(std::string_view host, bool cidr_supported);

}  // namespace mala::metadata
