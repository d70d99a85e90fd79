// directory_assignment_request: the hosted replicas whose log dir differs from the metadata's Directories
// entry for this broker, grouped by dir and topic; nothing below metadata.version 3.7-IV2, nothing for a
// partition this broker does not replicate or a topic the metadata does not know, at most 2250 assignments at
// a time.
#include "mala/broker/directory_assignments.h"

#include <gtest/gtest.h>

#include <string>

#include "mala/controller/feature_control.h"
#include "mala/metadata/metadata_delta.h"

namespace mala::broker {
namespace {

constexpr int32_t self = 2;

metadata::metadata_image image_with(const uuid& recorded_dir, int32_t partitions) {
  metadata::metadata_image image;
  image.finalized_features[std::string(controller::metadata_version_feature)] =
      controller::directory_assignment_metadata_version;
  metadata::topic_metadata topic;
  topic.name = "orders";
  topic.id = uuid::random();
  for (int32_t i = 0; i < partitions; ++i) {
    metadata::partition_state p;
    p.partition = i;
    p.leader = 1;
    p.replicas = {1, self};
    p.isr = p.replicas;
    p.directories = {uuid::random(), recorded_dir};
    topic.partitions.push_back(p);
  }
  image.topics["orders"] = topic;
  return image;
}

TEST(directory_assignments, only_replicas_whose_dir_differs_are_sent) {
  const uuid dir_a = uuid::random();
  const uuid dir_b = uuid::random();
  auto image = image_with(dir_a, 3);
  hosted_log_dirs hosted{
      {{"orders", 0}, dir_a}, {{"orders", 1}, dir_b}, {{"orders", 2}, dir_b}, {{"gone", 0}, dir_b}};
  auto request = directory_assignment_request(image, self, 77, hosted);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->broker_id, self);
  EXPECT_EQ(request->broker_epoch, 77);
  ASSERT_EQ(request->directories.size(), 1u);
  EXPECT_EQ(request->directories[0].id, dir_b);
  ASSERT_EQ(request->directories[0].topics.size(), 1u);
  EXPECT_EQ(request->directories[0].topics[0].topic_id, image.find_topic("orders")->id);
  ASSERT_EQ(request->directories[0].topics[0].partitions.size(), 2u);
  EXPECT_EQ(request->directories[0].topics[0].partitions[0].partition_index, 1);
  EXPECT_EQ(request->directories[0].topics[0].partitions[1].partition_index, 2);

  // Recorded already: nothing to send. Not a replica of it (being moved away): nothing either.
  EXPECT_FALSE(directory_assignment_request(image, self, 77, {{{"orders", 0}, dir_a}}));
  EXPECT_FALSE(directory_assignment_request(image, 3, 77, hosted));
}

TEST(directory_assignments, nothing_before_metadata_version_3_7_iv2) {
  auto image = image_with(metadata::directory_unassigned, 1);
  image.finalized_features[std::string(controller::metadata_version_feature)] =
      controller::directory_assignment_metadata_version - 1;
  EXPECT_FALSE(directory_assignment_request(image, self, 1, {{{"orders", 0}, uuid::random()}}));
}

TEST(directory_assignments, at_most_2250_assignments_per_request) {
  const uuid dir = uuid::random();
  auto image = image_with(metadata::directory_unassigned, 3000);
  hosted_log_dirs hosted;
  for (int32_t i = 0; i < 3000; ++i) hosted.emplace(storage::topic_partition{"orders", i}, dir);
  auto request = directory_assignment_request(image, self, 1, hosted);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->directories.at(0).topics.at(0).partitions.size(), max_assignments_per_request);
}

}  // namespace
}  // namespace mala::broker
