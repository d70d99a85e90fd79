// KIP-1276 CIDR ACL hosts (Kafka 4.4, metadata.version 4.4-IV1): parsing and validation with Kafka's
// CidrUtils rules and messages, matching of IPv4 and IPv6 client addresses, and the authorizer index using a
// CIDR entry, DENY included.
#include "mala/metadata/acl_host.h"

#include <gtest/gtest.h>

#include <string>

#include "mala/metadata/acl.h"

namespace mala::metadata {
namespace {

TEST(acl_host, parses_ipv4_and_ipv6_ranges) {
  auto v4 = parse_cidr("10.1.2.3/16");
  ASSERT_TRUE(v4);
  EXPECT_FALSE(v4->ipv6);
  EXPECT_EQ(v4->prefix_bits, 16);
  EXPECT_EQ(v4->network[0], 10);
  EXPECT_EQ(v4->network[1], 1);
  EXPECT_EQ(v4->network[2], 0);  // host bits masked off
  auto v6 = parse_cidr("2001:db8::1/32");
  ASSERT_TRUE(v6);
  EXPECT_TRUE(v6->ipv6);
  EXPECT_EQ(v6->network[15], 0);
  EXPECT_TRUE(parse_cidr("0.0.0.0/0"));
  EXPECT_TRUE(parse_cidr("::/0"));
  EXPECT_TRUE(parse_cidr("[::1]/128"));
}

TEST(acl_host, refuses_what_kafka_refuses_with_its_reasons) {
  auto reason = [](std::string_view host) {
    std::string error;
    EXPECT_FALSE(parse_cidr(host, &error)) << host;
    return error;
  };
  EXPECT_EQ(reason("10.0.0/8"), "Could not parse [10.0.0/8]");
  EXPECT_EQ(reason("10.0.0.1/123"), "Could not parse [10.0.0.1/123]");
  EXPECT_EQ(reason("10.0.0.1/"), "Could not parse [10.0.0.1/]");
  EXPECT_EQ(reason("1000.0.0.1/8"), "Could not parse [1000.0.0.1/8]");
  EXPECT_EQ(reason("300.0.0.1/8"), "Value [300] not in range [0,255]");
  EXPECT_EQ(reason("10.0.0.1/33"), "Value [33] not in range [0,32]");
  EXPECT_EQ(reason("host.example/8"), "Could not parse [host.example/8]");
  EXPECT_EQ(reason("::1"), "Could not parse [::1] - missing prefix length");
  EXPECT_EQ(reason("::1/x"), "Could not parse [::1/x] - invalid prefix length");
  EXPECT_EQ(reason("::1/129"), "Could not parse [::1/129] - prefix length must be between 0 and 128");
  EXPECT_EQ(reason("zz::1/64"), "Could not parse [zz::1/64] - not an IPv6 address");
}

TEST(acl_host, validation_of_new_acls) {
  EXPECT_FALSE(invalid_acl_host("*", false));
  EXPECT_FALSE(invalid_acl_host("10.0.0.1", false));
  EXPECT_FALSE(invalid_acl_host("any-name", false));  // a host without '/' is taken as it is
  auto empty = invalid_acl_host("", true);
  ASSERT_TRUE(empty);
  EXPECT_FALSE(empty->unsupported_version);
  EXPECT_EQ(empty->message, "Host pattern cannot be null or empty");
  auto old_version = invalid_acl_host("10.0.0.0/8", false);
  ASSERT_TRUE(old_version);
  EXPECT_TRUE(old_version->unsupported_version);
  EXPECT_EQ(old_version->message, "CIDR-based ACL host patterns require metadata version 4.4-IV1 or higher.");
  EXPECT_FALSE(invalid_acl_host("10.0.0.0/8", true));
  auto bad = invalid_acl_host("10.0.0.0/40", true);
  ASSERT_TRUE(bad);
  EXPECT_FALSE(bad->unsupported_version);
  EXPECT_EQ(bad->message, "Invalid CIDR notation '10.0.0.0/40': Value [40] not in range [0,32]");
}

TEST(acl_host, matches_addresses_inside_the_range_only) {
  const auto v4 = *parse_cidr("192.168.4.0/22");
  EXPECT_TRUE(cidr_contains(v4, "192.168.4.0"));
  EXPECT_TRUE(cidr_contains(v4, "192.168.7.255"));
  EXPECT_FALSE(cidr_contains(v4, "192.168.8.1"));
  EXPECT_FALSE(cidr_contains(v4, "192.168.3.255"));
  EXPECT_TRUE(cidr_contains(v4, "::ffff:192.168.5.9"));  // IPv4-mapped
  EXPECT_FALSE(cidr_contains(v4, "::1"));
  EXPECT_FALSE(cidr_contains(v4, "not-an-address"));
  EXPECT_TRUE(cidr_contains(*parse_cidr("0.0.0.0/0"), "8.8.8.8"));
  EXPECT_TRUE(cidr_contains(*parse_cidr("127.0.0.1/32"), "127.0.0.1"));
  EXPECT_FALSE(cidr_contains(*parse_cidr("127.0.0.1/32"), "127.0.0.2"));

  const auto v6 = *parse_cidr("2001:db8:abcd::/48");
  EXPECT_TRUE(cidr_contains(v6, "2001:db8:abcd:12::1"));
  EXPECT_TRUE(cidr_contains(v6, "[2001:db8:abcd::5]"));
  EXPECT_FALSE(cidr_contains(v6, "2001:db8:abce::1"));
  EXPECT_FALSE(cidr_contains(v6, "10.0.0.1"));
  EXPECT_TRUE(cidr_contains(*parse_cidr("::1/128"), "::1"));
}

TEST(acl_host, the_authorizer_index_applies_cidr_entries) {
  acl_binding allow_net;
  allow_net.resource_type = acl_resource_type::topic;
  allow_net.resource_name = "orders";
  allow_net.pattern_type = acl_pattern_type::literal;
  allow_net.principal = "User:alice";
  allow_net.host = "10.0.0.0/8";
  allow_net.operation = acl_operation::read;
  allow_net.permission = acl_permission::allow;
  acl_binding deny_subnet = allow_net;
  deny_subnet.host = "10.9.0.0/16";
  deny_subnet.permission = acl_permission::deny;
  const acl_index index({allow_net, deny_subnet});

  auto read = [&](std::string_view host) {
    return index.match(acl_resource_type::topic, "orders", "User:alice", host, acl_operation::read);
  };
  EXPECT_TRUE(read("10.1.2.3").allowed);
  EXPECT_FALSE(read("10.1.2.3").denied);
  EXPECT_TRUE(read("10.9.2.3").denied);
  EXPECT_FALSE(read("11.1.2.3").allowed);
  EXPECT_FALSE(read("11.1.2.3").denied);
  EXPECT_TRUE(index.any_allowed(acl_resource_type::topic, "User:alice", "10.1.1.1", acl_operation::read));
  EXPECT_FALSE(index.any_allowed(acl_resource_type::topic, "User:alice", "12.1.1.1", acl_operation::read));
}

}  // namespace
}  // namespace mala::metadata
