// ACL semantics of Kafka's StandardAuthorizer (StandardAuthorizerTest, AclBindingFilter's tests): the index's
// matching of literal, prefixed and wildcard patterns, principals, hosts and implied operations; filters
// with ANY and MATCH; the checks on new ACLs; ACL records through metadata_delta and snapshots.
#include "mala/metadata/acl.h"

#include <gtest/gtest.h>

#include "mala/metadata/acl_records.h"
#include "mala/metadata/image_records.h"
#include "mala/metadata/metadata_delta.h"

namespace mala::metadata {
namespace {

using op = acl_operation;
using rt = acl_resource_type;
using pt = acl_pattern_type;
using perm = acl_permission;

acl_binding acl(rt type, std::string name, pt pattern, std::string principal, std::string host, op operation,
                perm permission) {
  return acl_binding{type,      std::move(name), pattern, std::move(principal), std::move(host),
                     operation, permission};
}

acl_binding allow(rt type, std::string name, pt pattern, std::string principal, op operation,
                  std::string host = "*") {
  return acl(type, std::move(name), pattern, std::move(principal), std::move(host), operation, perm::allow);
}
acl_binding deny(rt type, std::string name, pt pattern, std::string principal, op operation,
                 std::string host = "*") {
  return acl(type, std::move(name), pattern, std::move(principal), std::move(host), operation, perm::deny);
}

// The authorizer's verdict without super users: a DENY wins, then an ALLOW; no ACL for the resource means
// `allow_everyone`.
bool allowed(const acl_index& index, rt type, std::string_view name, std::string_view principal, op operation,
             std::string_view host = "192.168.0.1", bool allow_everyone = false) {
  const acl_match m = index.match(type, name, principal, host, operation);
  if (m.denied) return false;
  if (m.allowed) return true;
  return !m.has_resource_acls && allow_everyone;
}

TEST(acl_index, literal_acl_names_one_resource) {
  acl_index index({allow(rt::topic, "foo", pt::literal, "User:alice", op::read)});
  EXPECT_TRUE(allowed(index, rt::topic, "foo", "User:alice", op::read));
  EXPECT_FALSE(allowed(index, rt::topic, "foobar", "User:alice", op::read));
  EXPECT_FALSE(allowed(index, rt::topic, "fo", "User:alice", op::read));
  EXPECT_FALSE(allowed(index, rt::topic, "foo", "User:bob", op::read));
  EXPECT_FALSE(allowed(index, rt::topic, "foo", "User:alice", op::write));
  // Another resource type with the same name.
  EXPECT_FALSE(allowed(index, rt::group, "foo", "User:alice", op::read));
}

TEST(acl_index, prefixed_acls_cover_every_name_that_starts_with_them) {
  acl_index index({allow(rt::topic, "foo", pt::prefixed, "User:alice", op::read),
                   allow(rt::topic, "foobar.", pt::prefixed, "User:bob", op::read)});
  EXPECT_TRUE(allowed(index, rt::topic, "foo", "User:alice", op::read));
  EXPECT_TRUE(allowed(index, rt::topic, "foobar", "User:alice", op::read));
  EXPECT_TRUE(allowed(index, rt::topic, "foobar.baz", "User:alice", op::read));
  EXPECT_FALSE(allowed(index, rt::topic, "fo", "User:alice", op::read));
  EXPECT_FALSE(allowed(index, rt::topic, "bar", "User:alice", op::read));
  EXPECT_TRUE(allowed(index, rt::topic, "foobar.baz", "User:bob", op::read));
  EXPECT_FALSE(allowed(index, rt::topic, "foobar", "User:bob", op::read));
}

TEST(acl_index, wildcard_resource_and_principal) {
  acl_index index({allow(rt::topic, "*", pt::literal, "User:alice", op::write),
                   allow(rt::group, "g", pt::literal, "User:*", op::read)});
  EXPECT_TRUE(allowed(index, rt::topic, "anything", "User:alice", op::write));
  EXPECT_TRUE(allowed(index, rt::topic, "*", "User:alice", op::write));
  EXPECT_FALSE(allowed(index, rt::topic, "anything", "User:bob", op::write));
  EXPECT_TRUE(allowed(index, rt::group, "g", "User:bob", op::read));
  EXPECT_TRUE(allowed(index, rt::group, "g", "User:ANONYMOUS", op::read));
  // A prefixed "*" is a prefix like any other: only names starting with '*'.
  acl_index prefixed_star({allow(rt::topic, "*", pt::prefixed, "User:alice", op::read)});
  EXPECT_FALSE(allowed(prefixed_star, rt::topic, "foo", "User:alice", op::read));
  EXPECT_TRUE(allowed(prefixed_star, rt::topic, "*foo", "User:alice", op::read));
}

TEST(acl_index, deny_wins_over_allow_wherever_it_comes_from) {
  // StandardAuthorizerTest.testDenyPrecedenceWithOperationAll / testPrefixAcls.
  acl_index index({allow(rt::topic, "foo", pt::prefixed, "User:alice", op::all),
                   deny(rt::topic, "foo.secret", pt::literal, "User:alice", op::read),
                   deny(rt::topic, "*", pt::literal, "User:bob", op::all),
                   allow(rt::topic, "bar", pt::literal, "User:bob", op::all)});
  EXPECT_TRUE(allowed(index, rt::topic, "foo.public", "User:alice", op::read));
  EXPECT_FALSE(allowed(index, rt::topic, "foo.secret", "User:alice", op::read));
  EXPECT_TRUE(allowed(index, rt::topic, "foo.secret", "User:alice", op::write));
  EXPECT_FALSE(allowed(index, rt::topic, "bar", "User:bob", op::read));
  // DENY ALL on a prefix denies every operation.
  acl_index deny_all({allow(rt::topic, "t", pt::literal, "User:alice", op::read),
                      deny(rt::topic, "t", pt::prefixed, "User:alice", op::all)});
  EXPECT_FALSE(allowed(deny_all, rt::topic, "t", "User:alice", op::read));
  EXPECT_FALSE(allowed(deny_all, rt::topic, "t", "User:alice", op::describe));
}

TEST(acl_index, allows_imply_describe_and_describe_configs_denies_do_not) {
  acl_index index({allow(rt::topic, "r", pt::literal, "User:a", op::read),
                   allow(rt::topic, "w", pt::literal, "User:a", op::write),
                   allow(rt::topic, "d", pt::literal, "User:a", op::remove),
                   allow(rt::topic, "al", pt::literal, "User:a", op::alter),
                   allow(rt::topic, "c", pt::literal, "User:a", op::create),
                   allow(rt::topic, "ac", pt::literal, "User:a", op::alter_configs),
                   allow(rt::topic, "x", pt::literal, "User:a", op::all),
                   allow(rt::topic, "dr", pt::literal, "User:a", op::describe),
                   deny(rt::topic, "dr", pt::literal, "User:a", op::read)});
  for (const char* name : {"r", "w", "d", "al", "x"}) {
    EXPECT_TRUE(allowed(index, rt::topic, name, "User:a", op::describe)) << name;
  }
  EXPECT_FALSE(allowed(index, rt::topic, "c", "User:a", op::describe));
  EXPECT_FALSE(allowed(index, rt::topic, "ac", "User:a", op::describe));
  EXPECT_TRUE(allowed(index, rt::topic, "ac", "User:a", op::describe_configs));
  EXPECT_FALSE(allowed(index, rt::topic, "r", "User:a", op::describe_configs));
  EXPECT_TRUE(allowed(index, rt::topic, "x", "User:a", op::describe_configs));
  // DESCRIBE does not imply READ; a DENY of READ does not deny DESCRIBE.
  EXPECT_FALSE(allowed(index, rt::topic, "dr", "User:a", op::read));
  EXPECT_TRUE(allowed(index, rt::topic, "dr", "User:a", op::describe));
}

TEST(acl_index, hosts_match_exactly_or_by_wildcard) {
  acl_index index({allow(rt::topic, "t", pt::literal, "User:a", op::read, "10.0.0.1"),
                   deny(rt::topic, "u", pt::literal, "User:a", op::read, "10.0.0.2"),
                   allow(rt::topic, "u", pt::literal, "User:a", op::read)});
  EXPECT_TRUE(allowed(index, rt::topic, "t", "User:a", op::read, "10.0.0.1"));
  EXPECT_FALSE(allowed(index, rt::topic, "t", "User:a", op::read, "10.0.0.2"));
  EXPECT_TRUE(allowed(index, rt::topic, "u", "User:a", op::read, "10.0.0.1"));
  EXPECT_FALSE(allowed(index, rt::topic, "u", "User:a", op::read, "10.0.0.2"));
}

TEST(acl_index, allow_everyone_applies_only_to_resources_no_acl_names) {
  // StandardAuthorizerTest.testAllowEveryoneConfig: an ACL of someone else closes the resource.
  acl_index index({allow(rt::topic, "owned", pt::literal, "User:alice", op::read),
                   allow(rt::topic, "pre", pt::prefixed, "User:alice", op::read)});
  EXPECT_TRUE(allowed(index, rt::topic, "free", "User:bob", op::read, "h", true));
  EXPECT_FALSE(allowed(index, rt::topic, "free", "User:bob", op::read, "h", false));
  EXPECT_FALSE(allowed(index, rt::topic, "owned", "User:bob", op::read, "h", true));
  EXPECT_FALSE(allowed(index, rt::topic, "prefix.x", "User:bob", op::read, "h", true));
  // A literal ACL on a prefix of the name does not name the resource.
  EXPECT_TRUE(allowed(index, rt::topic, "ownedx", "User:bob", op::read, "h", true));
}

TEST(acl_index, any_allowed_looks_for_an_allow_no_deny_covers) {
  // AuthorizerTest.testAuthorizeByResourceType cases.
  acl_index only_allow({allow(rt::topic, "t1", pt::literal, "User:a", op::write)});
  EXPECT_TRUE(only_allow.any_allowed(rt::topic, "User:a", "h", op::write));
  EXPECT_FALSE(only_allow.any_allowed(rt::topic, "User:b", "h", op::write));
  EXPECT_FALSE(only_allow.any_allowed(rt::topic, "User:a", "h", op::read));
  acl_index denied_literal({allow(rt::topic, "t1", pt::literal, "User:a", op::write),
                            deny(rt::topic, "t1", pt::literal, "User:a", op::write)});
  EXPECT_FALSE(denied_literal.any_allowed(rt::topic, "User:a", "h", op::write));
  acl_index denied_prefix({allow(rt::topic, "abc", pt::literal, "User:a", op::write),
                           deny(rt::topic, "a", pt::prefixed, "User:a", op::write)});
  EXPECT_FALSE(denied_prefix.any_allowed(rt::topic, "User:a", "h", op::write));
  acl_index wildcard_deny({allow(rt::topic, "t", pt::literal, "User:a", op::write),
                           deny(rt::topic, "*", pt::literal, "User:*", op::write)});
  EXPECT_FALSE(wildcard_deny.any_allowed(rt::topic, "User:a", "h", op::write));
  acl_index other_prefix({allow(rt::topic, "abc", pt::prefixed, "User:a", op::all),
                          deny(rt::topic, "x", pt::prefixed, "User:a", op::write)});
  EXPECT_TRUE(other_prefix.any_allowed(rt::topic, "User:a", "h", op::write));
}

TEST(acl_filter, any_and_match_semantics) {
  const acl_binding literal = allow(rt::topic, "foo", pt::literal, "User:a", op::read);
  const acl_binding prefixed = allow(rt::topic, "fo", pt::prefixed, "User:a", op::read);
  const acl_binding wildcard = allow(rt::topic, "*", pt::literal, "User:a", op::read);
  acl_filter all;
  EXPECT_TRUE(matches(all, literal));
  EXPECT_TRUE(matches(all, prefixed));

  acl_filter any_named;
  any_named.resource_name = "foo";
  EXPECT_TRUE(matches(any_named, literal));
  EXPECT_FALSE(matches(any_named, prefixed));  // ANY compares names exactly
  EXPECT_FALSE(matches(any_named, wildcard));

  acl_filter match = any_named;
  match.pattern_type = pt::match;
  EXPECT_TRUE(matches(match, literal));
  EXPECT_TRUE(matches(match, prefixed));
  EXPECT_TRUE(matches(match, wildcard));
  match.resource_name = "bar";
  EXPECT_FALSE(matches(match, prefixed));
  EXPECT_TRUE(matches(match, wildcard));

  acl_filter by_type;
  by_type.pattern_type = pt::prefixed;
  EXPECT_FALSE(matches(by_type, literal));
  EXPECT_TRUE(matches(by_type, prefixed));

  acl_filter entry;
  entry.principal = "User:b";
  EXPECT_FALSE(matches(entry, literal));
  entry.principal = "User:a";
  entry.host = "*";
  entry.operation = op::read;
  entry.permission = perm::allow;
  EXPECT_TRUE(matches(entry, literal));
  entry.permission = perm::deny;
  EXPECT_FALSE(matches(entry, literal));
  entry.permission = perm::any;
  entry.operation = op::write;
  EXPECT_FALSE(matches(entry, literal));
  acl_filter group_filter;
  group_filter.resource_type = rt::group;
  EXPECT_FALSE(matches(group_filter, literal));
}

TEST(acl_filter, validation_as_acl_control_manager) {
  EXPECT_EQ(invalid_new_acl(allow(rt::any, "t", pt::literal, "User:a", op::read)),
            "Invalid resourceType ANY");
  EXPECT_EQ(invalid_new_acl(allow(rt::unknown, "t", pt::literal, "User:a", op::read)),
            "Invalid resourceType UNKNOWN");
  EXPECT_EQ(invalid_new_acl(allow(rt::topic, "t", pt::match, "User:a", op::read)),
            "Invalid patternType MATCH");
  EXPECT_EQ(invalid_new_acl(allow(rt::topic, "t", pt::any, "User:a", op::read)), "Invalid patternType ANY");
  EXPECT_EQ(invalid_new_acl(allow(rt::topic, "t", pt::literal, "User:a", op::any)), "Invalid operation ANY");
  EXPECT_EQ(invalid_new_acl(acl(rt::topic, "t", pt::literal, "User:a", "*", op::read, perm::any)),
            "Invalid permissionType ANY");
  EXPECT_EQ(invalid_new_acl(allow(rt::topic, "", pt::literal, "User:a", op::read)),
            "Resource name should not be empty");
  EXPECT_TRUE(invalid_new_acl(allow(rt::topic, "t", pt::literal, "alice", op::read)).has_value());
  EXPECT_FALSE(invalid_new_acl(allow(rt::topic, "t", pt::prefixed, "User:a", op::read)).has_value());
  acl_filter f;
  EXPECT_FALSE(invalid_acl_filter(f).has_value());
  f.pattern_type = pt::unknown;
  EXPECT_EQ(invalid_acl_filter(f), "Unknown patternFilter.");
  f.pattern_type = pt::any;
  f.operation = op::unknown;
  EXPECT_EQ(invalid_acl_filter(f), "Unknown entryFilter.");
  EXPECT_EQ(to_acl_operation(99), op::unknown);
  EXPECT_EQ(to_acl_resource_type(-1), rt::unknown);
}

protocol::access_control_entry_record record(const uuid& id, const acl_binding& a) {
  return to_access_control_entry_record(id, a);
}

TEST(acl_records, a_binding_and_its_record_convert_both_ways_with_kafkas_codes) {
  acl_binding a{rt::topic, "orders", pt::prefixed, "User:alice", "10.0.0.1", op::describe_configs,
                perm::deny};
  const uuid id = uuid::random();
  const auto r = to_access_control_entry_record(id, a);
  EXPECT_EQ(r.id, id);
  // AccessControlEntryRecord carries Kafka's codes: TOPIC 2, PREFIXED 4, DESCRIBE_CONFIGS 10, DENY 2.
  EXPECT_EQ(r.resource_type, 2);
  EXPECT_EQ(r.pattern_type, 4);
  EXPECT_EQ(r.operation, 10);
  EXPECT_EQ(r.permission_type, 2);
  EXPECT_EQ(r.resource_name, "orders");
  EXPECT_EQ(r.principal, "User:alice");
  EXPECT_EQ(r.host, "10.0.0.1");
  EXPECT_EQ(to_acl_binding(r), a);
}

TEST(acl_records, delta_applies_and_snapshots_carry_acls) {
  const uuid id1 = uuid::random();
  const uuid id2 = uuid::random();
  metadata_delta delta(nullptr);
  ASSERT_TRUE(delta.apply(record(id1, allow(rt::topic, "t", pt::literal, "User:a", op::read))).ok());
  ASSERT_TRUE(delta.apply(record(id2, deny(rt::group, "g", pt::prefixed, "User:*", op::all))).ok());
  auto image = delta.build();
  ASSERT_EQ(image->acls.by_id.size(), 2u);
  ASSERT_TRUE(image->acls.index);
  EXPECT_TRUE(image->acls.index->match(rt::topic, "t", "User:a", "h", op::read).allowed);

  // Snapshot round trip: the same ACLs, ids and index.
  metadata_delta replay(nullptr);
  for (const auto& r : image_to_records(*image)) ASSERT_TRUE(replay.apply(r.record).ok());
  auto copy = replay.build();
  EXPECT_EQ(copy->acls, image->acls);
  ASSERT_TRUE(copy->acls.index);
  EXPECT_TRUE(copy->acls.index->match(rt::group, "gx", "User:b", "h", op::read).denied);

  // Removal by id; an unknown id is refused and changes nothing.
  metadata_delta removal(image);
  protocol::remove_access_control_entry_record rm;
  rm.id = id1;
  ASSERT_TRUE(removal.apply(rm).ok());
  protocol::remove_access_control_entry_record unknown;
  unknown.id = uuid::random();
  EXPECT_FALSE(removal.apply(unknown).ok());
  auto after = removal.build();
  EXPECT_EQ(after->acls.by_id.size(), 1u);
  EXPECT_FALSE(after->acls.index->match(rt::topic, "t", "User:a", "h", op::read).allowed);
  // The base image is untouched.
  EXPECT_TRUE(image->acls.index->match(rt::topic, "t", "User:a", "h", op::read).allowed);

  // An invalid record is refused.
  metadata_delta bad(nullptr);
  EXPECT_FALSE(bad.apply(record(uuid::random(), allow(rt::any, "t", pt::literal, "User:a", op::read))).ok());
}

TEST(acl_records, encode_decode_round_trip) {
  const auto r = record(uuid::random(), allow(rt::transactional_id, "tx", pt::literal, "User:a", op::write));
  auto bytes = encode_metadata_record(r, 0);
  auto decoded = decode_metadata_record(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  const auto* back = std::get_if<protocol::access_control_entry_record>(&decoded->record);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->resource_name, "tx");
  EXPECT_EQ(back->id, r.id);
}

}  // namespace
}  // namespace mala::metadata
