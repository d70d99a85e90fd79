// CreateAcls / DeleteAcls on the controller (AclControlManagerTest): validation per creation, duplicates
// write nothing, ids are fresh, deletions by filter remove each ACL once, a failed write fails every item.
#include "mala/controller/acl_control.h"

#include <gtest/gtest.h>

#include "image_writer.h"

namespace mala::controller {
namespace {

protocol::create_acls_request__acl_creation creation(int8_t type, std::string name, int8_t pattern,
                                                     std::string principal, int8_t op, int8_t permission) {
  protocol::create_acls_request__acl_creation c;
  c.resource_type = type;
  c.resource_name = std::move(name);
  c.resource_pattern_type = pattern;
  c.principal = std::move(principal);
  c.host = "*";
  c.operation = op;
  c.permission_type = permission;
  return c;
}

constexpr int8_t topic = 2, group = 3, literal = 3, prefixed = 4, match = 2, any = 1;
constexpr int8_t read = 3, write = 4, allow = 3, deny = 2;

TEST(acl_control, creates_valid_acls_and_refuses_invalid_ones) {
  image_writer writer;
  protocol::create_acls_request req;
  req.creations = {creation(topic, "t", literal, "User:a", read, allow),
                   creation(any, "t", literal, "User:a", read, allow),    // ANY resource type
                   creation(topic, "t", match, "User:a", read, allow),    // MATCH pattern
                   creation(topic, "t", literal, "User:a", any, allow),   // ANY operation
                   creation(topic, "t", literal, "User:a", read, any),    // ANY permission
                   creation(topic, "t", literal, "User:a", read, allow),  // duplicate of the first
                   creation(group, "g", prefixed, "User:*", write, deny)};
  auto resp = create_acls(writer, req);
  ASSERT_EQ(resp.results.size(), 7u);
  EXPECT_EQ(resp.results[0].error_code, 0);
  EXPECT_EQ(resp.results[1].error_code, to_wire(error_code::invalid_request));
  EXPECT_EQ(resp.results[1].error_message, "Invalid resourceType ANY");
  EXPECT_EQ(resp.results[2].error_message, "Invalid patternType MATCH");
  EXPECT_EQ(resp.results[3].error_message, "Invalid operation ANY");
  EXPECT_EQ(resp.results[4].error_message, "Invalid permissionType ANY");
  EXPECT_EQ(resp.results[5].error_code, 0);
  EXPECT_EQ(resp.results[6].error_code, 0);
  ASSERT_EQ(writer.batches.size(), 1u);
  EXPECT_EQ(writer.batches[0].size(), 2u);  // the duplicate wrote nothing
  EXPECT_EQ(writer.image()->acls.by_id.size(), 2u);

  // Creating an existing ACL again succeeds and writes nothing.
  protocol::create_acls_request again;
  again.creations = {creation(topic, "t", literal, "User:a", read, allow)};
  auto second = create_acls(writer, again);
  EXPECT_EQ(second.results.at(0).error_code, 0);
  EXPECT_EQ(writer.batches.size(), 1u);
}

TEST(acl_control, deletes_what_filters_match_once) {
  image_writer writer;
  protocol::create_acls_request req;
  req.creations = {creation(topic, "foo", literal, "User:a", read, allow),
                   creation(topic, "fo", prefixed, "User:a", read, allow),
                   creation(topic, "bar", literal, "User:b", write, allow)};
  ASSERT_EQ(create_acls(writer, req).results.size(), 3u);
  ASSERT_EQ(writer.image()->acls.by_id.size(), 3u);

  protocol::delete_acls_request del;
  protocol::delete_acls_request__delete_acls_filter f;
  f.resource_type_filter = topic;
  f.resource_name_filter = "foo";
  f.pattern_type_filter = match;
  f.principal_filter = std::nullopt;
  f.host_filter = std::nullopt;
  f.operation = any;
  f.permission_type = any;
  auto bad = f;
  bad.pattern_type_filter = 0;  // UNKNOWN
  // the same filter twice: both list the ACLs, removed once
  del.filters = {f, f, bad};
  auto resp = delete_acls(writer, del);
  ASSERT_EQ(resp.filter_results.size(), 3u);
  EXPECT_EQ(resp.filter_results[0].matching_acls.size(), 2u);
  EXPECT_EQ(resp.filter_results[1].matching_acls.size(), 2u);
  EXPECT_EQ(resp.filter_results[2].error_code, to_wire(error_code::invalid_request));
  EXPECT_EQ(resp.filter_results[2].error_message, "Unknown patternFilter.");
  EXPECT_EQ(writer.batches.back().size(), 2u);
  ASSERT_EQ(writer.image()->acls.by_id.size(), 1u);
  EXPECT_EQ(writer.image()->acls.by_id.begin()->second.resource_name, "bar");
}

TEST(acl_control, a_failed_write_fails_every_creation) {
  image_writer writer;
  writer.fail_writes = true;
  protocol::create_acls_request req;
  req.creations = {creation(topic, "t", literal, "User:a", read, allow),
                   creation(topic, "", literal, "User:a", read, allow)};
  auto resp = create_acls(writer, req);
  EXPECT_EQ(resp.results[0].error_code, to_wire(error_code::not_controller));
  EXPECT_EQ(resp.results[1].error_message, "Resource name should not be empty");
  EXPECT_TRUE(writer.image()->acls.by_id.empty());
}

}  // namespace
}  // namespace mala::controller
