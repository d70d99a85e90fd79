#include "mala/storage/txn_marker.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mala/protocol/record_batch.h"

namespace mala::storage {
namespace {

namespace proto = mala::protocol;

TEST(txn_marker, commit_marker_has_kafkas_layout) {
  const txn_marker marker{.producer_id = 4242,
                          .producer_epoch = 7,
                          .type = txn_marker_type::commit,
                          .coordinator_epoch = 0x01020304,
                          .timestamp = 1'700'000'000'123};
  auto bytes = encode_txn_marker_batch(marker);
  proto::record_batch_view view(bytes);  // verifies the CRC
  ASSERT_TRUE(view.ok()) << proto::batch_status_name(view.status());
  const auto& h = view.header();
  EXPECT_EQ(h.attributes, 0x30);
  EXPECT_EQ(h.producer_id, 4242);
  EXPECT_EQ(h.producer_epoch, 7);
  EXPECT_EQ(h.base_sequence, -1);
  EXPECT_EQ(h.record_count, 1);
  EXPECT_EQ(h.last_offset_delta, 0);
  EXPECT_EQ(h.base_timestamp, 1'700'000'000'123);
  EXPECT_EQ(h.max_timestamp, 1'700'000'000'123);
  auto records = view.records();
  auto record = records.next();
  ASSERT_TRUE(record);
  ASSERT_TRUE(record->key);
  ASSERT_TRUE(record->value);
  EXPECT_EQ(std::vector<uint8_t>(record->key->begin(), record->key->end()),
            (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(std::vector<uint8_t>(record->value->begin(), record->value->end()),
            (std::vector<uint8_t>{0, 0, 1, 2, 3, 4}));
  EXPECT_TRUE(record->headers.empty());
  EXPECT_FALSE(records.next());
  EXPECT_TRUE(records.ok());
}

TEST(txn_marker, round_trips_both_types) {
  for (auto type : {txn_marker_type::abort, txn_marker_type::commit}) {
    const txn_marker marker{
        .producer_id = 1, .producer_epoch = 32766, .type = type, .coordinator_epoch = -1, .timestamp = 5};
    auto bytes = encode_txn_marker_batch(marker);
    ASSERT_TRUE(proto::stamp_base_offset(bytes, 99));  // the log's offset assignment keeps the CRC
    EXPECT_EQ(proto::record_batch_view(bytes).status(), proto::batch_status::ok);
    auto decoded = decode_txn_marker_batch(bytes);
    ASSERT_TRUE(decoded);
    EXPECT_EQ(*decoded, marker);
  }
}

TEST(txn_marker, data_batches_and_unknown_control_records_are_not_markers) {
  const std::string value = "v";
  const std::span<const uint8_t> v(reinterpret_cast<const uint8_t*>(value.data()), value.size());
  auto data = proto::record_batch_builder().producer(1, 0, 0).transactional().add(5, std::nullopt, v).build();
  EXPECT_FALSE(decode_txn_marker_batch(data));

  // A control record of a type Kafka does not define (ControlRecordType.UNKNOWN).
  const std::vector<uint8_t> key{0, 0, 0, 9};
  const std::vector<uint8_t> marker_value{0, 0, 0, 0, 0, 1};
  auto unknown = proto::record_batch_builder()
                     .producer(1, 0, -1)
                     .transactional()
                     .control()
                     .add(5, std::span<const uint8_t>(key), std::span<const uint8_t>(marker_value))
                     .build();
  EXPECT_FALSE(decode_txn_marker_batch(unknown));

  // A marker value cut short, and a control batch whose record was cleaned away.
  const std::vector<uint8_t> short_value{0, 0, 0};
  auto truncated = proto::record_batch_builder()
                       .producer(1, 0, -1)
                       .transactional()
                       .control()
                       .add(5, std::span<const uint8_t>(key.data(), 2), std::span<const uint8_t>(short_value))
                       .build();
  EXPECT_FALSE(decode_txn_marker_batch(truncated));
  auto empty = proto::record_batch_builder().producer(1, 0, -1).transactional().control().build();
  EXPECT_FALSE(decode_txn_marker_batch(empty));

  // Random bytes never read out of bounds.
  std::vector<uint8_t> garbage(40, 0xff);
  EXPECT_FALSE(decode_txn_marker_batch(garbage));
}

TEST(txn_marker, newer_value_version_with_trailing_bytes_is_read) {
  const std::vector<uint8_t> key{0, 1, 0, 0};
  const std::vector<uint8_t> value{0, 1, 0, 0, 0, 3, 0xaa, 0xbb};
  auto bytes = proto::record_batch_builder()
                   .producer(8, 2, -1)
                   .transactional()
                   .control()
                   .add(11, std::span<const uint8_t>(key), std::span<const uint8_t>(value))
                   .build();
  auto decoded = decode_txn_marker_batch(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->type, txn_marker_type::abort);
  EXPECT_EQ(decoded->coordinator_epoch, 3);
}

}  // namespace
}  // namespace mala::storage
