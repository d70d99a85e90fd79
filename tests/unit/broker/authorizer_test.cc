// The node's authorizer (StandardAuthorizer's configuration): super users, allow.everyone.if.no.acl.found,
// authorizeByResourceType, and the principal and host of a connection.
#include "mala/broker/authorizer.h"

#include <gtest/gtest.h>

#include "mala/metadata/metadata_delta.h"

namespace mala::broker {
namespace {

using metadata::acl_operation;
using metadata::acl_resource_type;

metadata::metadata_image_ptr image_with(std::vector<metadata::acl_binding> acls) {
  auto image = std::make_shared<metadata::metadata_image>();
  for (auto& a : acls) image->acls.by_id[uuid::random()] = std::move(a);
  image->acls.rebuild_index();
  return image;
}

metadata::acl_binding allow_read(std::string topic, std::string principal) {
  return {acl_resource_type::topic,
          std::move(topic),
          metadata::acl_pattern_type::literal,
          std::move(principal),
          "*",
          acl_operation::read,
          metadata::acl_permission::allow};
}

TEST(authorizer, super_users_are_allowed_everything) {
  authorizer a(" User:admin ;User:broker;; ", false);
  EXPECT_TRUE(a.is_super_user("User:admin"));
  EXPECT_TRUE(a.is_super_user("User:broker"));
  EXPECT_FALSE(a.is_super_user("User:ANONYMOUS"));
  auto image = image_with({});
  EXPECT_TRUE(a.authorize(*image, "User:admin", "1.2.3.4", acl_operation::alter, acl_resource_type::cluster,
                          "kafka-cluster"));
  EXPECT_FALSE(a.authorize(*image, "User:x", "1.2.3.4", acl_operation::alter, acl_resource_type::cluster,
                           "kafka-cluster"));
}

TEST(authorizer, allow_everyone_if_no_acl_found) {
  auto image = image_with({allow_read("owned", "User:alice")});
  authorizer open("", true);
  authorizer closed("", false);
  EXPECT_TRUE(
      open.authorize(*image, "User:bob", "h", acl_operation::write, acl_resource_type::topic, "free"));
  EXPECT_FALSE(
      open.authorize(*image, "User:bob", "h", acl_operation::read, acl_resource_type::topic, "owned"));
  EXPECT_FALSE(
      closed.authorize(*image, "User:bob", "h", acl_operation::write, acl_resource_type::topic, "free"));
  EXPECT_TRUE(
      closed.authorize(*image, "User:alice", "h", acl_operation::read, acl_resource_type::topic, "owned"));
  auto empty = image_with({});
  EXPECT_TRUE(open.authorize(*empty, "User:bob", "h", acl_operation::read, acl_resource_type::group, "g"));
  EXPECT_FALSE(closed.authorize(*empty, "User:bob", "h", acl_operation::read, acl_resource_type::group, "g"));
}

TEST(authorizer, authorize_any_for_idempotent_producers) {
  authorizer a("", false);
  auto image = image_with({{acl_resource_type::topic, "t", metadata::acl_pattern_type::literal, "User:p", "*",
                            acl_operation::write, metadata::acl_permission::allow}});
  EXPECT_TRUE(a.authorize_any(*image, "User:p", "h", acl_operation::write, acl_resource_type::topic));
  EXPECT_FALSE(a.authorize_any(*image, "User:q", "h", acl_operation::write, acl_resource_type::topic));
  authorizer open("", true);
  EXPECT_TRUE(
      open.authorize_any(*image_with({}), "User:q", "h", acl_operation::write, acl_resource_type::topic));
}

TEST(authorizer, principal_and_host_of_a_connection) {
  net::connection_info c;
  c.peer = "10.1.2.3:45678";
  EXPECT_EQ(principal_of(c), "User:ANONYMOUS");
  EXPECT_EQ(host_of(c), "10.1.2.3");
  c.peer = "[::1]:9092";
  EXPECT_EQ(host_of(c), "::1");
  c.principal_name = "alice";
  EXPECT_EQ(principal_of(c), "User:alice");
}

}  // namespace
}  // namespace mala::broker
