#include "mala/storage/segment_files.h"

#include <gtest/gtest.h>

#include <limits>

namespace mala::storage {
namespace {

TEST(segment_files_test, file_stem_is_the_base_offset_in_twenty_digits) {
  EXPECT_EQ(offset_file_stem(0), "00000000000000000000");
  EXPECT_EQ(offset_file_stem(42), "00000000000000000042");
  EXPECT_EQ(offset_file_stem(std::numeric_limits<int64_t>::max()), "09223372036854775807");
}

TEST(segment_files_test, segment_file_path_joins_dir_stem_and_suffix) {
  EXPECT_EQ(segment_file_path("/data/t-0", 1234, log_suffix), "/data/t-0/00000000000000001234.log");
  EXPECT_EQ(segment_file_path("/data/t-0", 0, time_index_suffix), "/data/t-0/00000000000000000000.timeindex");
}

TEST(segment_files_test, parses_base_offsets_of_segment_file_names) {
  EXPECT_EQ(parse_segment_base_offset("00000000000000000042.log", log_suffix), 42);
  EXPECT_EQ(parse_segment_base_offset("00000000000000000042.index", offset_index_suffix), 42);
  EXPECT_EQ(parse_segment_base_offset("09223372036854775807.log", log_suffix),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(parse_segment_base_offset("7.log", log_suffix), 7);  // Kafka parses any digit count
  EXPECT_EQ(parse_segment_base_offset("00000000000000000042.log.deleted", ".log.deleted"), 42);

  EXPECT_FALSE(parse_segment_base_offset("00000000000000000042.log.deleted", log_suffix));
  EXPECT_FALSE(parse_segment_base_offset("00000000000000000042.index", log_suffix));
  EXPECT_FALSE(parse_segment_base_offset(".log", log_suffix));
  EXPECT_FALSE(parse_segment_base_offset("-0000000000000000042.log", log_suffix));
  EXPECT_FALSE(parse_segment_base_offset("0000000000000000004x.log", log_suffix));
  EXPECT_FALSE(parse_segment_base_offset("99999999999999999999.log", log_suffix));  // beyond int64
  EXPECT_FALSE(parse_segment_base_offset("leader-epoch-checkpoint", log_suffix));
}

TEST(segment_files_test, partition_dir_names_round_trip) {
  EXPECT_EQ(partition_dir_name("orders", 3), "orders-3");
  EXPECT_EQ(partition_dir_name("my-topic", 12), "my-topic-12");
  EXPECT_EQ(parse_partition_dir_name("my-topic-12"), (topic_partition{"my-topic", 12}));
  EXPECT_EQ(parse_partition_dir_name("__consumer_offsets-49"), (topic_partition{"__consumer_offsets", 49}));
  EXPECT_EQ(parse_partition_dir_name("a.b-0"), (topic_partition{"a.b", 0}));
}

TEST(segment_files_test, rejects_names_that_are_not_partition_dirs) {
  EXPECT_FALSE(parse_partition_dir_name("orders"));
  EXPECT_FALSE(parse_partition_dir_name("-3"));
  EXPECT_FALSE(parse_partition_dir_name("orders-"));
  EXPECT_FALSE(parse_partition_dir_name("orders-x"));
  EXPECT_FALSE(parse_partition_dir_name("orders-99999999999"));  // beyond int32
  EXPECT_FALSE(parse_partition_dir_name("orders-0.8c0f4a3e2b1d4c5e9f7a6b5c4d3e2f1a-delete"));
  EXPECT_FALSE(parse_partition_dir_name("lost+found"));
}

}  // namespace
}  // namespace mala::storage
