// Finalized features: the bootstrap record of an empty log, the ranges a registration is recorded with, and
// the check that a registering broker supports every finalized level.
#include "mala/controller/feature_control.h"

#include <gtest/gtest.h>

#include "image_writer.h"

namespace mala::controller {
namespace {

TEST(feature_control, an_empty_image_is_bootstrapped_with_metadata_version) {
  metadata::metadata_image empty;
  const record_list records = bootstrap_records(empty);
  ASSERT_EQ(records.size(), 1u);
  const auto* feature = std::get_if<protocol::feature_level_record>(&records[0].record);
  ASSERT_NE(feature, nullptr);
  EXPECT_EQ(feature->name, metadata_version_feature);
  EXPECT_EQ(feature->feature_level, bootstrap_metadata_version);
  EXPECT_EQ(records[0].version, 0);

  image_writer writer;  // bootstrapped
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
  EXPECT_TRUE(check_finalized_features_supported(*writer.image(), registered_features({})).ok());
  const status st =
      check_finalized_features_supported(*writer.image(), {{std::string(metadata_version_feature), {1, 7}}});
  EXPECT_EQ(st.code, error_code::unsupported_version);
  EXPECT_EQ(
      st.message,
      "Unable to register because the broker does not support finalized version 30 of metadata.version. "
      "The broker wants a version between 1 and 7, inclusive.");
  // A finalized feature the broker does not name: range [0, 0].
  EXPECT_EQ(check_finalized_features_supported(*writer.image(), {}).code, error_code::unsupported_version);
}

TEST(feature_control, implemented_features_cover_metadata_version) {
  EXPECT_EQ(implemented_features[0].name, metadata_version_feature);
  EXPECT_EQ(implemented_features[0].max_level, bootstrap_metadata_version);
  EXPECT_EQ(implemented_features[0].fixed_level, -1);
}

}  // namespace
}  // namespace mala::controller
