// Finalized features: the bootstrap records of an empty log, the ranges a registration is recorded with, the
// check that a registering broker supports every finalized level, and UpdateFeatures' validation (Kafka 4.x's
// FeatureControlManager: ranges, downgrade types, metadata.version, the features Mala fixes).
#include "mala/controller/feature_control.h"

#include <gtest/gtest.h>

#include "image_writer.h"

namespace mala::controller {
namespace {

TEST(feature_control, an_empty_image_is_bootstrapped_with_metadata_and_transaction_version) {
  metadata::metadata_image empty;
  const record_list records = bootstrap_records(empty);
  ASSERT_EQ(records.size(), 2u);
  const auto* feature = std::get_if<protocol::feature_level_record>(&records[0].record);
  ASSERT_NE(feature, nullptr);
  EXPECT_EQ(feature->name, metadata_version_feature);
  EXPECT_EQ(feature->feature_level, bootstrap_metadata_version);
  EXPECT_EQ(records[0].version, 0);
  const auto* tv = std::get_if<protocol::feature_level_record>(&records[1].record);
  ASSERT_NE(tv, nullptr);
  EXPECT_EQ(tv->name, transaction_version_feature);
  EXPECT_EQ(tv->feature_level, bootstrap_transaction_version);
  EXPECT_EQ(bootstrap_transaction_version, 2);  // Kafka 4.x's default

  image_writer writer;  // bootstrapped
  EXPECT_TRUE(bootstrap_records(*writer.image()).empty());
  EXPECT_EQ(finalized_feature_level(*writer.image(), transaction_version_feature), 2);
  // transaction.version removed later (downgraded to 0) is not bootstrapped again.
  protocol::feature_level_record removal;
  removal.name = std::string(transaction_version_feature);
  removal.feature_level = 0;
  ASSERT_TRUE(writer.write({versioned(removal, record_v0)}).ok());
  EXPECT_EQ(finalized_feature_level(*writer.image(), transaction_version_feature), 0);
  EXPECT_TRUE(bootstrap_records(*writer.image()).empty());
}

TEST(feature_control, a_registration_without_a_metadata_version_range_gets_this_binarys) {
  const supported_feature_map features = registered_features({{"group.version", {0, 1}}});
  EXPECT_EQ(features.at("group.version"), (metadata::supported_feature{0, 1}));
  EXPECT_EQ(features.at(std::string(metadata_version_feature)),
            (metadata::supported_feature{minimum_metadata_version, bootstrap_metadata_version}));
  // A range given is kept.
  EXPECT_EQ(registered_features({{std::string(metadata_version_feature), {1, 7}}})
                .at(std::string(metadata_version_feature)),
            (metadata::supported_feature{1, 7}));
}

TEST(feature_control, every_finalized_level_must_be_within_the_brokers_range) {
  image_writer writer;
  EXPECT_TRUE(check_finalized_features_supported(*writer.image(),
                                                 registered_features({{"transaction.version", {0, 2}}}))
                  .ok());
  // The bootstrap finalizes transaction.version 2: a broker that does not name it cannot register.
  EXPECT_EQ(
      check_finalized_features_supported(*writer.image(), registered_features({})).message,
      "Unable to register because the broker does not support finalized version 2 of transaction.version. "
      "The broker wants a version between 0 and 0, inclusive.");
  const status st =
      check_finalized_features_supported(*writer.image(), {{std::string(metadata_version_feature), {1, 7}}});
  EXPECT_EQ(st.code, error_code::unsupported_version);
  EXPECT_EQ(
      st.message,
      "Unable to register because the broker does not support finalized version 33 of metadata.version. "
      "The broker wants a version between 1 and 7, inclusive.");
  // A finalized feature the broker does not name: range [0, 0].
  EXPECT_EQ(check_finalized_features_supported(*writer.image(), {}).code, error_code::unsupported_version);
}

TEST(feature_control, implemented_features_cover_metadata_version) {
  EXPECT_EQ(implemented_features[0].name, metadata_version_feature);
  EXPECT_EQ(implemented_features[0].max_level, bootstrap_metadata_version);
  EXPECT_EQ(implemented_features[0].fixed_level, -1);
  const implemented_feature* tv = find_implemented_feature(transaction_version_feature);
  ASSERT_NE(tv, nullptr);
  EXPECT_EQ(tv->min_level, 0);
  EXPECT_EQ(tv->max_level, 2);
  EXPECT_EQ(tv->fixed_level, -1);  // finalized in the log
  EXPECT_EQ(find_implemented_feature("group.version")->fixed_level, 1);
  EXPECT_EQ(find_implemented_feature("no.such.feature"), nullptr);
}

// --- UpdateFeatures

// A registration as Mala's own brokers send it: every implemented feature at this binary's range.
supported_feature_map this_binarys_features() {
  supported_feature_map features;
  for (const auto& f : implemented_features) features[std::string(f.name)] = {f.min_level, f.max_level};
  return features;
}

class feature_update_test : public ::testing::Test {
 protected:
  void SetUp() override { register_broker(1, this_binarys_features()); }

  void register_broker(int32_t id, const supported_feature_map& features) {
    protocol::register_broker_record record;
    record.broker_id = id;
    record.incarnation_id = uuid::random();
    record.broker_epoch = _writer.next_offset();
    record.log_dirs = {uuid::random()};
    record.end_points.push_back({"PLAINTEXT", "localhost", static_cast<uint16_t>(9092 + id), 0});
    for (const auto& [name, range] : features)
      record.features.push_back({name, range.min_version, range.max_version});
    ASSERT_TRUE(_writer.write({versioned(std::move(record), register_broker_record_version)}).ok());
  }

  result<record_list> update(std::vector<feature_update> updates) {
    return update_features(*_writer.image(), 3000, updates, _context);
  }

  // The refusal's message (expects INVALID_UPDATE_VERSION), "" when the update is accepted.
  std::string refusal(feature_update u) {
    auto r = update({std::move(u)});
    if (r.ok()) return "";
    EXPECT_EQ(r.error().code, error_code::invalid_update_version);
    return r.error().message;
  }

  int16_t level_after(std::vector<feature_update> updates, std::string_view name) {
    auto r = update(std::move(updates));
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (r.ok()) {
      EXPECT_TRUE(_writer.write(*r).ok());
    }
    return finalized_feature_level(*_writer.image(), name);
  }

  image_writer _writer;
  feature_update_context _context;
};

constexpr auto upgrade = feature_upgrade_type::upgrade;
constexpr auto safe_downgrade = feature_upgrade_type::safe_downgrade;
constexpr auto unsafe_downgrade = feature_upgrade_type::unsafe_downgrade;

TEST_F(feature_update_test, transaction_version_is_upgraded_downgraded_and_removed_through_the_log) {
  auto up = update({{"transaction.version", 2, upgrade}});
  ASSERT_TRUE(up.ok()) << up.error().message;
  ASSERT_EQ(up->size(), 1u);
  const auto& record = std::get<protocol::feature_level_record>((*up)[0].record);
  EXPECT_EQ(record.name, "transaction.version");
  EXPECT_EQ(record.feature_level, 2);
  EXPECT_EQ((*up)[0].version, 0);
  ASSERT_TRUE(_writer.write(*up).ok());
  EXPECT_EQ(finalized_feature_level(*_writer.image(), transaction_version_feature), 2);

  EXPECT_EQ(level_after({{"transaction.version", 1, safe_downgrade}}, transaction_version_feature), 1);
  // Level 0 is a FeatureLevelRecord at 0: the feature is no longer finalized.
  EXPECT_EQ(level_after({{"transaction.version", 0, unsafe_downgrade}}, transaction_version_feature), 0);
  EXPECT_EQ(_writer.image()->finalized_features.count("transaction.version"), 0u);
  EXPECT_EQ(level_after({{"transaction.version", 2, upgrade}}, transaction_version_feature), 2);
  // The same level again is accepted (Kafka writes it again).
  EXPECT_EQ(level_after({{"transaction.version", 2, upgrade}}, transaction_version_feature), 2);
}

TEST_F(feature_update_test, downgrade_rules) {
  ASSERT_EQ(level_after({{"transaction.version", 1, safe_downgrade}}, transaction_version_feature), 1);
  EXPECT_EQ(refusal({"transaction.version", 0, upgrade}),
            "Invalid update version 0 for feature transaction.version. Can't downgrade the version of this "
            "feature without setting the upgrade type to either safe or unsafe downgrade.");
  EXPECT_EQ(refusal({"transaction.version", 2, safe_downgrade}),
            "Invalid update version 2 for feature transaction.version. Can't downgrade to a newer version.");
  EXPECT_EQ(refusal({"transaction.version", 1, static_cast<feature_upgrade_type>(7)}),
            "Invalid update version 1 for feature transaction.version. The controller does not support the "
            "given upgrade type.");
  EXPECT_EQ(
      refusal({"transaction.version", -1, unsafe_downgrade}),
      "Invalid update version -1 for feature transaction.version. A feature version cannot be less than "
      "0.");
  // metadata.version: never downgraded; upgraded only within the range.
  EXPECT_EQ(
      refusal({"metadata.version", 32, safe_downgrade}),
      "Invalid metadata.version 32. Refusing to perform the requested downgrade because it might delete "
      "metadata information.");
  EXPECT_EQ(refusal({"metadata.version", 32, unsafe_downgrade}),
            "Invalid metadata.version 32. Unsafe metadata downgrade is not supported in this version.");
  EXPECT_EQ(refusal({"metadata.version", 34, upgrade}),
            "Invalid update version 34 for feature metadata.version. Local controller 3000 only supports "
            "versions 7-33");
  EXPECT_EQ(refusal({"metadata.version", 33, upgrade}), "");
}

TEST_F(feature_update_test, ranges_of_this_binary_and_of_every_registered_broker) {
  EXPECT_EQ(refusal({"transaction.version", 3, upgrade}),
            "Invalid update version 3 for feature transaction.version. Local controller 3000 only supports "
            "versions 0-2");
  EXPECT_EQ(
      refusal({"no.such.feature", 1, upgrade}),
      "Invalid update version 1 for feature no.such.feature. Local controller 3000 does not support this "
      "feature.");
  // A broker of an older binary (transaction.version up to 1) holds transaction.version 2 back.
  auto older = this_binarys_features();
  older["transaction.version"] = {0, 1};
  register_broker(2, older);
  EXPECT_EQ(refusal({"transaction.version", 2, upgrade}),
            "Invalid update version 2 for feature transaction.version. Broker 2 only supports versions 0-1");
  // A broker that names no transaction.version supports only 0.
  auto none = this_binarys_features();
  none.erase("transaction.version");
  register_broker(2, none);
  EXPECT_EQ(refusal({"transaction.version", 1, upgrade}),
            "Invalid update version 1 for feature transaction.version. Broker 2 does not support this "
            "feature.");
  EXPECT_EQ(refusal({"transaction.version", 0, safe_downgrade}), "");
  register_broker(2, this_binarys_features());
  // A registered controller's range counts too (KIP-919), after the brokers'.
  protocol::register_controller_record controller;
  controller.controller_id = 3001;
  controller.incarnation_id = uuid::random();
  controller.features.push_back({"transaction.version", 0, 1});
  ASSERT_TRUE(_writer.write({versioned(std::move(controller), record_v0)}).ok());
  EXPECT_EQ(
      refusal({"transaction.version", 2, upgrade}),
      "Invalid update version 2 for feature transaction.version. Controller 3001 only supports versions "
      "0-1");
}

TEST_F(feature_update_test, features_mala_fixes_are_refused_unless_unchanged) {
  EXPECT_EQ(refusal({"group.version", 0, safe_downgrade}),
            "Invalid update version 0 for feature group.version. Mala always has this feature on at level 1; "
            "it cannot be changed.");
  EXPECT_EQ(refusal({"eligible.leader.replicas.version", 0, unsafe_downgrade}),
            "Invalid update version 0 for feature eligible.leader.replicas.version. Mala always has this "
            "feature on at level 1; it cannot be changed.");
  EXPECT_EQ(
      refusal({"kraft.version", 0, safe_downgrade}),
      "Invalid update version 0 for feature kraft.version. Can't downgrade the version of this feature.");
  _context.kraft_version = 0;
  // The level in force is accepted and writes nothing (kafka-features upgrade --release-version sends every
  // feature).
  auto same = update({{"group.version", 1, upgrade},
                      {"eligible.leader.replicas.version", 1, upgrade},
                      {"kraft.version", 0, upgrade}});
  ASSERT_TRUE(same.ok()) << same.error().message;
  EXPECT_TRUE(same->empty());
}

// KIP-853 (FeatureControlManager with KRaftVersionAccessor): kraft.version 0 to 1 is the quorum's upgrade,
// called with ValidateOnly; a NoOpRecord is the write the answer waits on, and the quorum's refusal is the
// update's.
TEST_F(feature_update_test, a_kraft_version_upgrade_is_the_quorums) {
  _context.kraft_version = 0;
  EXPECT_NE(refusal({"kraft.version", 1, upgrade}).find("no quorum to upgrade"), std::string::npos);
  std::vector<std::pair<int16_t, bool>> calls;
  status answer = status::success();
  _context.upgrade_kraft_version = [&](int16_t level, bool validate_only) {
    calls.emplace_back(level, validate_only);
    return answer;
  };
  _context.validate_only = true;
  auto upgraded = update({{"kraft.version", 1, upgrade}});
  ASSERT_TRUE(upgraded.ok()) << upgraded.error().message;
  ASSERT_EQ(upgraded->size(), 1u);
  EXPECT_TRUE(std::holds_alternative<protocol::no_op_record>(upgraded->front().record));
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], std::make_pair(int16_t{1}, true));

  answer = status::error(error_code::invalid_update_version, "not all of the voters support it");
  EXPECT_EQ(refusal({"kraft.version", 1, upgrade}),
            "Invalid update version 1 for feature kraft.version. not all of the voters support it");
  answer = status::error(error_code::not_controller, "not the leader");
  auto moved = update({{"kraft.version", 1, upgrade}});
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.error().code, error_code::not_controller);
  // Level 0 is in force: nothing asked of the quorum.
  calls.clear();
  auto same = update({{"kraft.version", 0, upgrade}});
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->empty());
  EXPECT_TRUE(calls.empty());
}

TEST_F(feature_update_test, one_refusal_refuses_the_whole_request) {
  auto r = update({{"transaction.version", 2, upgrade}, {"group.version", 0, safe_downgrade}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, error_code::invalid_update_version);
  EXPECT_NE(r.error().message.find("group.version"), std::string::npos);
  auto both = update({{"transaction.version", 2, upgrade}, {"metadata.version", 33, upgrade}});
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->size(), 2u);
}

}  // namespace
}  // namespace mala::controller
