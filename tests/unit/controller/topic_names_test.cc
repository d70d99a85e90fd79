// Kafka's topic-name rules (Topic.validate, isInternal, the '.'/'_' collision), with Kafka's messages.
#include "mala/controller/topic_names.h"

#include <gtest/gtest.h>

#include <string>

namespace mala::controller {
namespace {

TEST(topic_names, legal_names_pass) {
  EXPECT_EQ(invalid_topic_name_reason("orders"), std::nullopt);
  EXPECT_EQ(invalid_topic_name_reason("a.b_c-D9"), std::nullopt);
  EXPECT_EQ(invalid_topic_name_reason(std::string(249, 'x')), std::nullopt);
}

TEST(topic_names, illegal_names_get_kafkas_messages) {
  EXPECT_EQ(invalid_topic_name_reason(""), "Topic name is invalid: the empty string is not allowed");
  EXPECT_EQ(invalid_topic_name_reason("."), "Topic name is invalid: '.' is not allowed");
  EXPECT_EQ(invalid_topic_name_reason(".."), "Topic name is invalid: '..' is not allowed");
  EXPECT_EQ(invalid_topic_name_reason(std::string(250, 'x')),
            "Topic name is invalid: the length of '" + std::string(250, 'x') +
                "' is longer than the max allowed length 249");
  EXPECT_EQ(
      invalid_topic_name_reason("a b"),
      "Topic name is invalid: 'a b' contains one or more characters other than ASCII alphanumerics, '.', "
      "'_' and '-'");
}

TEST(topic_names, internal_topics) {
  EXPECT_TRUE(is_internal_topic("__consumer_offsets"));
  EXPECT_TRUE(is_internal_topic("__transaction_state"));
  EXPECT_TRUE(is_internal_topic("__share_group_state"));
  EXPECT_FALSE(is_internal_topic("__cluster_metadata"));
  EXPECT_FALSE(is_internal_topic("orders"));
}

TEST(topic_names, dots_and_underscores_collide) {
  EXPECT_TRUE(has_collision_chars("a.b"));
  EXPECT_TRUE(has_collision_chars("a_b"));
  EXPECT_FALSE(has_collision_chars("a-b"));
  EXPECT_EQ(unify_collision_chars("a.b_c"), "a_b_c");
  EXPECT_EQ(unify_collision_chars("a_b.c"), unify_collision_chars("a.b_c"));
}

}  // namespace
}  // namespace mala::controller
