// AlterUserScramCredentials and DescribeUserScramCredentials as Kafka's ScramControlManager and ScramImage
// answer them, and the credentials' way through the metadata log into an image and back out for a snapshot.
#include "mala/controller/scram_control.h"

#include <gtest/gtest.h>

#include "mala/metadata/image_records.h"
#include "mala/metadata/metadata_delta.h"
#include "mala/security/scram.h"

namespace mala::controller {
namespace {

using request = protocol::alter_user_scram_credentials_request;

request::scram_credential_upsertion upsertion(const std::string& name, int8_t mechanism, int32_t iterations) {
  request::scram_credential_upsertion u;
  u.name = name;
  u.mechanism = mechanism;
  u.iterations = iterations;
  u.salt = {1, 2, 3, 4};
  u.salted_password = security::scram_salted_password(security::scram_mechanism_from_type(mechanism), "pw",
                                                      u.salt, iterations);
  return u;
}

request::scram_credential_deletion deletion(const std::string& name, int8_t mechanism) {
  request::scram_credential_deletion d;
  d.name = name;
  d.mechanism = mechanism;
  return d;
}

// Applies the records to a copy of `image`.
metadata::metadata_image applied(const metadata::metadata_image& image, const record_list& records) {
  metadata::metadata_delta delta(std::make_shared<const metadata::metadata_image>(image));
  for (const auto& r : records) EXPECT_TRUE(delta.apply(r.record).ok());
  return *std::move(delta).build();
}

std::map<std::string, int16_t> errors_of(const protocol::alter_user_scram_credentials_response& resp) {
  std::map<std::string, int16_t> out;
  for (const auto& r : resp.results) out[r.user] = r.error_code;
  return out;
}

TEST(scram_control, upserts_and_deletes_through_records) {
  metadata::metadata_image image;
  request req;
  req.upsertions = {upsertion("alice", 1, 8192), upsertion("bob", 2, 4096)};
  auto altered = alter_user_scram_credentials(image, req);
  EXPECT_EQ(errors_of(altered.response), (std::map<std::string, int16_t>{{"alice", 0}, {"bob", 0}}));
  ASSERT_EQ(altered.records.size(), 2u);
  image = applied(image, altered.records);
  const auto* alice = image.find_scram_credential("alice", 1);
  ASSERT_NE(alice, nullptr);
  EXPECT_EQ(alice->iterations, 8192);
  // The stored and server keys are derived from the salted password; the password is never stored.
  const auto expected = security::scram_credential_from_salted(
      security::scram_mechanism::sha256, req.upsertions[0].salt, req.upsertions[0].salted_password, 8192);
  EXPECT_EQ(alice->stored_key, expected.stored_key);
  EXPECT_EQ(alice->server_key, expected.server_key);

  // Snapshots carry them.
  metadata::metadata_delta from_snapshot(std::make_shared<const metadata::metadata_image>());
  for (const auto& r : metadata::image_to_records(image)) ASSERT_TRUE(from_snapshot.apply(r.record).ok());
  EXPECT_EQ(std::move(from_snapshot).build()->scram_credentials, image.scram_credentials);

  request del;
  del.deletions = {deletion("alice", 1)};
  auto deleted = alter_user_scram_credentials(image, del);
  EXPECT_EQ(errors_of(deleted.response), (std::map<std::string, int16_t>{{"alice", 0}}));
  image = applied(image, deleted.records);
  EXPECT_EQ(image.find_scram_credential("alice", 1), nullptr);
  EXPECT_FALSE(image.scram_credentials.contains("alice"));
}

TEST(scram_control, refusals_follow_kafka) {
  metadata::metadata_image image;
  request carol;
  carol.upsertions = {upsertion("carol", 1, 4096)};
  image = applied(image, alter_user_scram_credentials(image, carol).records);
  request req;
  req.upsertions = {upsertion("", 1, 4096),        upsertion("weak", 1, 4095),  upsertion("strong", 2, 16385),
                    upsertion("unknown", 3, 4096), upsertion("twice", 1, 4096), upsertion("twice", 2, 4096),
                    upsertion("ok", 1, 16384)};
  req.deletions = {deletion("nobody", 1), deletion("carol", 2), deletion("dup", 1), deletion("carol", 1)};
  auto out = alter_user_scram_credentials(image, req);
  const auto errors = errors_of(out.response);
  EXPECT_EQ(errors.at(""), to_wire(error_code::unacceptable_credential));
  EXPECT_EQ(errors.at("weak"), to_wire(error_code::unacceptable_credential));
  EXPECT_EQ(errors.at("strong"), to_wire(error_code::unacceptable_credential));
  EXPECT_EQ(errors.at("unknown"), to_wire(error_code::unsupported_sasl_mechanism));
  EXPECT_EQ(errors.at("twice"), to_wire(error_code::duplicate_resource));
  EXPECT_EQ(errors.at("nobody"), to_wire(error_code::resource_not_found));
  EXPECT_EQ(errors.at("dup"), to_wire(error_code::resource_not_found));
  // carol: the first deletion names a mechanism she has no credential of; her second entry is then skipped.
  EXPECT_EQ(errors.at("carol"), to_wire(error_code::resource_not_found));
  EXPECT_EQ(errors.at("ok"), 0);
  ASSERT_EQ(out.records.size(), 1u);  // only ok's
  for (const auto& r : out.response.results) {
    if (r.user == "weak") {
      EXPECT_EQ(r.error_message, "Too few iterations");
    }
    if (r.user == "strong") {
      EXPECT_EQ(r.error_message, "Too many iterations");
    }
    if (r.user == "twice") {
      EXPECT_EQ(r.error_message, "A user credential cannot be altered twice in the same request");
    }
    if (r.user == "nobody") {
      EXPECT_EQ(r.error_message, "Attempt to delete a user credential that does not exist");
    }
  }
}

TEST(scram_control, describe_from_the_image) {
  metadata::metadata_image image;
  image.scram_credentials["alice"][1] = {{1}, {2}, {3}, 8192};
  image.scram_credentials["alice"][2] = {{1}, {2}, {3}, 4096};
  image.scram_credentials["bob"][2] = {{1}, {2}, {3}, 5000};
  protocol::describe_user_scram_credentials_request all;
  all.users = std::nullopt;
  auto described = describe_user_scram_credentials(image, all);
  ASSERT_EQ(described.results.size(), 2u);
  EXPECT_EQ(described.results[0].user, "alice");
  ASSERT_EQ(described.results[0].credential_infos.size(), 2u);
  EXPECT_EQ(described.results[0].credential_infos[0].iterations, 8192);
  EXPECT_EQ(described.results[1].credential_infos[0].mechanism, 2);

  protocol::describe_user_scram_credentials_request named;
  named.users = std::vector<protocol::describe_user_scram_credentials_request::user_name>{
      {"bob"}, {"x"}, {"x"}, {"eve"}};
  auto some = describe_user_scram_credentials(image, named);
  ASSERT_EQ(some.results.size(), 3u);
  for (const auto& r : some.results) {
    if (r.user == "bob") {
      EXPECT_EQ(r.error_code, 0);
    }
    if (r.user == "x") {
      EXPECT_EQ(r.error_code, to_wire(error_code::duplicate_resource));
      EXPECT_EQ(r.error_message,
                "Cannot describe SCRAM credentials for the same user twice in a single request: x");
    }
    if (r.user == "eve") {
      EXPECT_EQ(r.error_code, to_wire(error_code::resource_not_found));
      EXPECT_EQ(r.error_message, "Attempt to describe a user credential that does not exist: eve");
    }
  }
}

}  // namespace
}  // namespace mala::controller
