// image_to_records: the image written as metadata records (Kafka's MetadataImage.write) replays with
// metadata_delta into an equal image, in Kafka's order, at the controller's record versions, and every record
// survives the envelope codec.
#include "mala/metadata/image_records.h"

#include <gtest/gtest.h>

#include <variant>

#include "mala/metadata/metadata_delta.h"
#include "sample_image.h"

namespace mala::metadata {
namespace {

metadata_image replay(const std::vector<versioned_metadata_record>& records, const std::string& cluster_id) {
  auto base = std::make_shared<metadata_image>();
  base->cluster_id = cluster_id;
  metadata_delta delta(base);
  for (const auto& r : records) {
    auto st = delta.apply(r.record);
    EXPECT_TRUE(st.ok()) << st.message;
  }
  return *delta.build();
}

TEST(image_records_test, a_populated_image_round_trips) {
  const metadata_image image = testing::sample_image();
  const auto records = image_to_records(image);
  EXPECT_EQ(replay(records, image.cluster_id), image);
}

TEST(image_records_test, the_round_trip_also_holds_through_the_record_codec) {
  const metadata_image image = testing::sample_image();
  std::vector<versioned_metadata_record> decoded;
  for (const auto& r : image_to_records(image)) {
    auto bytes = encode_metadata_record(r.record, r.version);
    auto back = decode_metadata_record(bytes);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->version, r.version);
    decoded.push_back(std::move(*back));
  }
  EXPECT_EQ(replay(decoded, image.cluster_id), image);
}

TEST(image_records_test, an_empty_image_is_no_records) {
  EXPECT_TRUE(image_to_records(metadata_image{}).empty());
}

TEST(image_records_test, records_come_in_kafkas_order) {
  const auto records = image_to_records(testing::sample_image());
  ASSERT_FALSE(records.empty());
  // metadata.version first, then the other features.
  const auto* first = std::get_if<protocol::feature_level_record>(&records[0].record);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->name, "metadata.version");
  EXPECT_EQ(first->feature_level, 27);
  // Then brokers, controllers, topics (each followed by its partitions), configs, client quotas, producer
  // ids, delegation tokens.
  auto rank = [](const metadata_record& r) {
    return std::visit(
        [](const auto& x) -> int {
          using T = std::remove_cvref_t<decltype(x)>;
          if constexpr (std::is_same_v<T, protocol::feature_level_record>) return 0;
          if constexpr (std::is_same_v<T, protocol::register_broker_record>) return 1;
          if constexpr (std::is_same_v<T, protocol::register_controller_record>) return 2;
          if constexpr (std::is_same_v<T, protocol::topic_record> ||
                        std::is_same_v<T, protocol::partition_record>)
            return 3;
          if constexpr (std::is_same_v<T, protocol::config_record>) return 4;
          if constexpr (std::is_same_v<T, protocol::client_quota_record>) return 5;
          if constexpr (std::is_same_v<T, protocol::producer_ids_record>) return 6;
          if constexpr (std::is_same_v<T, protocol::delegation_token_record>) return 7;
          return 99;
        },
        r);
  };
  for (size_t i = 1; i < records.size(); ++i) EXPECT_LE(rank(records[i - 1].record), rank(records[i].record));
  EXPECT_EQ(rank(records.back().record), 7);
  for (const auto& r : records) {
    if (const auto* b = std::get_if<protocol::register_broker_record>(&r.record)) {
      // v4 (KIP-1066) only for a registration with cordoned dirs.
      EXPECT_EQ(r.version, b->cordoned_log_dirs ? 4 : 3);
    }
    if (std::holds_alternative<protocol::partition_record>(r.record)) {
      EXPECT_EQ(r.version, 2);
    }
  }
  const auto& ids = std::get<protocol::producer_ids_record>(records[records.size() - 2].record);
  EXPECT_EQ(ids.broker_id, -1);
  EXPECT_EQ(ids.broker_epoch, -1);
  EXPECT_EQ(ids.next_producer_id, 5000);
}

TEST(image_records_test, broker_state_survives) {
  const metadata_image image = testing::sample_image();
  const metadata_image back = replay(image_to_records(image), image.cluster_id);
  EXPECT_TRUE(back.brokers.at(3).fenced);
  EXPECT_FALSE(back.brokers.at(1).fenced);
  EXPECT_TRUE(back.brokers.at(2).in_controlled_shutdown);
  EXPECT_EQ(back.brokers.at(2).endpoints.at(1).security_protocol, "SASL_SSL");
  EXPECT_FALSE(back.brokers.at(4).rack.has_value());
  EXPECT_EQ(back.topics.at("orders").partitions.at(1).eligible_leader_replicas, (std::vector<int32_t>{3}));
  EXPECT_EQ(back.topics.at("__consumer_offsets").partitions.at(0).leader_recovery_state, leader_recovering);
}

}  // namespace
}  // namespace mala::metadata
