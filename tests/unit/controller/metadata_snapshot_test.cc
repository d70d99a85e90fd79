// The controller's snapshot payload (KIP-630, Kafka's RecordsSnapshotWriter layout): header control batch,
// data batches of the image's records, footer control batch. Round trips of a populated image, the layout
// byte by byte where Kafka fixes it, batch splitting, and every malformed payload refused.
#include "mala/controller/metadata_snapshot.h"

#include <gtest/gtest.h>

#include <vector>

#include "../metadata/sample_image.h"
#include "mala/metadata/image_records.h"
#include "mala/protocol/record_batch.h"

namespace mala::controller {
namespace {

using metadata::versioned_metadata_record;

constexpr raft::offset_and_epoch snapshot_id{1234, 7};
constexpr int64_t timestamp = 1'700'000'000'123;

std::vector<std::span<const uint8_t>> batches_of(std::span<const uint8_t> payload) {
  std::vector<std::span<const uint8_t>> out;
  protocol::batch_splitter splitter(payload);
  while (auto b = splitter.next()) out.push_back(*b);
  EXPECT_TRUE(splitter.ok());
  return out;
}

std::vector<uint8_t> concat(const std::vector<std::span<const uint8_t>>& parts) {
  std::vector<uint8_t> out;
  for (auto p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

result<snapshot_header> load_counting(std::span<const uint8_t> payload, size_t& count) {
  count = 0;
  return load_snapshot_payload(payload, [&](const versioned_metadata_record&) {
    ++count;
    return status::success();
  });
}

TEST(metadata_snapshot_test, a_populated_image_round_trips) {
  const metadata::metadata_image image = metadata::testing::sample_image();
  auto payload = build_snapshot_payload(image, snapshot_id, timestamp);
  ASSERT_TRUE(payload.ok()) << payload.error().message;
  auto loaded = load_snapshot_image(*payload, snapshot_id, image.cluster_id);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  metadata::metadata_image expected = image;
  expected.metadata_offset = snapshot_id.offset - 1;
  expected.metadata_epoch = snapshot_id.epoch;
  EXPECT_EQ(**loaded, expected);
}

TEST(metadata_snapshot_test, finalized_transaction_version_is_in_the_snapshot) {
  metadata::metadata_image image = metadata::testing::sample_image();
  image.finalized_features["transaction.version"] = 2;
  auto payload = build_snapshot_payload(image, snapshot_id, timestamp);
  ASSERT_TRUE(payload.ok()) << payload.error().message;
  auto loaded = load_snapshot_image(*payload, snapshot_id, image.cluster_id);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ((*loaded)->feature_level("transaction.version"), 2);
  EXPECT_EQ((*loaded)->feature_level("metadata.version"), 27);
  // Removed (level 0): not in the snapshot, so not finalized after loading it.
  image.finalized_features.erase("transaction.version");
  payload = build_snapshot_payload(image, snapshot_id, timestamp);
  ASSERT_TRUE(payload.ok());
  loaded = load_snapshot_image(*payload, snapshot_id, image.cluster_id);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ((*loaded)->finalized_features.count("transaction.version"), 0u);
}

TEST(metadata_snapshot_test, records_come_back_in_order_with_their_versions) {
  const metadata::metadata_image image = metadata::testing::sample_image();
  const auto records = metadata::image_to_records(image);
  auto payload = build_snapshot_payload(image, snapshot_id, timestamp);
  ASSERT_TRUE(payload.ok());
  std::vector<std::vector<uint8_t>> seen;
  auto header = load_snapshot_payload(*payload, [&](const versioned_metadata_record& r) {
    seen.push_back(metadata::encode_metadata_record(r.record, r.version));
    return status::success();
  });
  ASSERT_TRUE(header.ok()) << header.error().message;
  EXPECT_EQ(header->last_contained_log_timestamp, timestamp);
  ASSERT_EQ(seen.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(seen[i], metadata::encode_metadata_record(records[i].record, records[i].version)) << i;
  }
}

TEST(metadata_snapshot_test, layout_is_kafkas) {
  auto payload = build_snapshot_payload(metadata::testing::sample_image(), snapshot_id, timestamp);
  ASSERT_TRUE(payload.ok());
  const auto batches = batches_of(*payload);
  ASSERT_EQ(batches.size(), 3u);  // everything fits one data batch
  int64_t next = 0;
  std::vector<uint8_t> buffer;
  for (size_t i = 0; i < batches.size(); ++i) {
    protocol::record_batch_view batch(batches[i]);
    ASSERT_TRUE(batch.ok());
    EXPECT_EQ(batch.base_offset(), next);
    EXPECT_EQ(batch.header().partition_leader_epoch, snapshot_id.epoch);
    EXPECT_EQ(batch.is_control(), i != 1);
    next = batch.header().next_offset();
  }
  // Header: key (version 0, type 3), value Version 0, LastContainedLogTimestamp, no tags (MessageUtil
  // .toByteBuffer, no version prefix: Kafka 4.4's checkpoints hold 0000 <8-byte timestamp> 00).
  {
    protocol::record_batch_view header(batches[0]);
    auto reader = header.records(buffer);
    auto record = reader.next();
    ASSERT_TRUE(record);
    ASSERT_TRUE(record->key);
    EXPECT_EQ(std::vector<uint8_t>(record->key->begin(), record->key->end()),
              (std::vector<uint8_t>{0, 0, 0, 3}));
    ASSERT_TRUE(record->value);
    const std::vector<uint8_t> expected{0, 0, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x7b, 0};
    EXPECT_EQ(std::vector<uint8_t>(record->value->begin(), record->value->end()), expected);
  }
  // Footer: key (version 0, type 4), value Version 0, no tags.
  {
    protocol::record_batch_view footer(batches[2]);
    auto reader = footer.records(buffer);
    auto record = reader.next();
    ASSERT_TRUE(record);
    EXPECT_EQ(std::vector<uint8_t>(record->key->begin(), record->key->end()),
              (std::vector<uint8_t>{0, 0, 0, 4}));
    EXPECT_EQ(std::vector<uint8_t>(record->value->begin(), record->value->end()),
              (std::vector<uint8_t>{0, 0, 0}));
  }
  // Data records have null keys.
  {
    protocol::record_batch_view data(batches[1]);
    for (const auto& record : data.records(buffer)) EXPECT_FALSE(record.key);
  }
}

TEST(metadata_snapshot_test, data_batches_are_split_at_the_bound) {
  const metadata::metadata_image image = metadata::testing::sample_image();
  constexpr int32_t bound = 400;
  auto payload = build_snapshot_payload(image, snapshot_id, timestamp, bound);
  ASSERT_TRUE(payload.ok()) << payload.error().message;
  const auto batches = batches_of(*payload);
  EXPECT_GT(batches.size(), 4u);
  for (auto b : batches) EXPECT_LE(b.size(), static_cast<size_t>(bound));
  auto loaded = load_snapshot_image(*payload, snapshot_id, image.cluster_id);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ((*loaded)->topics, image.topics);
  EXPECT_EQ((*loaded)->brokers, image.brokers);
  EXPECT_EQ((*loaded)->configs, image.configs);
  // A record that does not fit a batch on its own is refused.
  auto too_small = build_snapshot_payload(image, snapshot_id, timestamp, 120);
  ASSERT_FALSE(too_small.ok());
  EXPECT_EQ(too_small.error().code, error_code::record_list_too_large);
}

TEST(metadata_snapshot_test, an_empty_image_is_a_header_and_a_footer) {
  auto payload = build_snapshot_payload(metadata::metadata_image{}, {0, 0}, timestamp);
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(batches_of(*payload).size(), 2u);
  size_t count = 99;
  EXPECT_TRUE(load_counting(*payload, count).ok());
  EXPECT_EQ(count, 0u);
}

// KIP-853: a kraft.version 1 quorum's snapshots carry the voter set after the header; the metadata load skips
// it, reads the same image, and the Raft layer finds the voters in the same bytes.
TEST(metadata_snapshot_test, the_voter_set_rides_in_the_header_batch) {
  const std::vector<raft::voter_info> voters{{1, uuid{}, "CONTROLLER", {"node-1", 9093}},
                                             {2, uuid{}, "CONTROLLER", {"node-2", 9093}}};
  const auto records = raft::voter_set_control_records(voters);
  const auto image = metadata::testing::sample_image();
  auto payload =
      build_snapshot_payload(image, snapshot_id, timestamp, storage::max_metadata_batch_bytes, records);
  ASSERT_TRUE(payload.ok());
  auto loaded = load_snapshot_image(*payload, snapshot_id, image.cluster_id);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  auto plain = build_snapshot_payload(image, snapshot_id, timestamp);
  ASSERT_TRUE(plain.ok());
  auto expected = load_snapshot_image(*plain, snapshot_id, image.cluster_id);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(**loaded, **expected);
  auto found = raft::voter_set_in_snapshot(*payload);
  ASSERT_TRUE(found.ok());
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ(**found, voters);

  // The bootstrap checkpoint a formatted controller starts from is an empty image.
  auto checkpoint = raft::bootstrap_checkpoint(voters, timestamp);
  ASSERT_TRUE(checkpoint.ok());
  size_t count = 99;
  EXPECT_TRUE(load_counting(*checkpoint, count).ok());
  EXPECT_EQ(count, 0u);

  // Other control records after the header stay refused.
  std::vector<raft::control_record> leader_change{{{0, 0, 0, 2}, {0, 0}}};
  auto odd =
      build_snapshot_payload(image, snapshot_id, timestamp, storage::max_metadata_batch_bytes, leader_change);
  ASSERT_TRUE(odd.ok());
  EXPECT_FALSE(load_counting(*odd, count).ok());
}

class metadata_snapshot_corrupt_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto built = build_snapshot_payload(metadata::testing::sample_image(), snapshot_id, timestamp, 400);
    ASSERT_TRUE(built.ok());
    _payload = std::move(*built);
    _batches = batches_of(_payload);
    ASSERT_GE(_batches.size(), 4u);
  }
  void expect_refused(std::span<const uint8_t> bytes, const char* what) {
    size_t count = 0;
    auto loaded = load_counting(bytes, count);
    ASSERT_FALSE(loaded.ok()) << what;
    EXPECT_EQ(loaded.error().code, error_code::corrupt_message) << what << ": " << loaded.error().message;
  }
  std::vector<uint8_t> _payload;
  std::vector<std::span<const uint8_t>> _batches;
};

TEST_F(metadata_snapshot_corrupt_test, every_malformed_payload_is_refused) {
  expect_refused({}, "empty");
  // A flipped bit anywhere a CRC covers.
  for (size_t pos : {size_t{70}, _payload.size() / 2, _payload.size() - 3}) {
    auto bytes = _payload;
    bytes[pos] ^= 0x10;
    expect_refused(bytes, "flipped byte");
  }
  // Cut short, or with bytes after the footer.
  expect_refused(std::span(_payload).first(_payload.size() - 1), "truncated");
  {
    auto bytes = _payload;
    bytes.push_back(0);
    expect_refused(bytes, "trailing byte");
  }
  // Header or footer missing, batches out of place.
  auto without = [&](size_t skip) {
    std::vector<std::span<const uint8_t>> parts;
    for (size_t i = 0; i < _batches.size(); ++i)
      if (i != skip) parts.push_back(_batches[i]);
    return concat(parts);
  };
  expect_refused(without(0), "no header");
  expect_refused(without(_batches.size() - 1), "no footer");
  expect_refused(without(1), "offsets do not run on");
  {
    auto parts = _batches;
    parts.push_back(_batches.back());
    expect_refused(concat(parts), "a batch after the footer");
  }
  {
    auto parts = _batches;
    std::swap(parts[0], parts[1]);
    expect_refused(concat(parts), "data before the header");
  }
}

TEST_F(metadata_snapshot_corrupt_test, other_control_records_and_keys_are_refused) {
  auto with_batch_at = [&](size_t index, std::vector<uint8_t> batch) {
    // Renumber: the replacement takes the offsets of the batch it replaces (one record).
    protocol::record_batch_view original(_batches[index]);
    protocol::stamp_base_offset(batch, original.base_offset());
    protocol::stamp_partition_leader_epoch(batch, snapshot_id.epoch);
    std::vector<std::span<const uint8_t>> parts = _batches;
    parts[index] = batch;
    return concat(parts);
  };
  const std::vector<uint8_t> value{0, 0, 0, 0, 0};
  // A LEADER_CHANGE control record where the footer should be.
  {
    const auto key = storage::control_record_key(2);
    const storage::metadata_batch_record r{std::span<const uint8_t>(key), value};
    auto batch = storage::build_metadata_batch(std::span(&r, 1), timestamp, true);
    ASSERT_TRUE(batch.ok());
    expect_refused(with_batch_at(_batches.size() - 1, *batch), "other control type");
  }
  // A footer whose version is not 0.
  {
    const auto key = storage::control_record_key(snapshot_footer_control_type);
    const std::vector<uint8_t> v1{0, 1, 0, 1, 0};
    const storage::metadata_batch_record r{std::span<const uint8_t>(key), v1};
    auto batch = storage::build_metadata_batch(std::span(&r, 1), timestamp, true);
    ASSERT_TRUE(batch.ok());
    expect_refused(with_batch_at(_batches.size() - 1, *batch), "footer version");
  }
  // A data record with a key (metadata records have none): header, the keyed record, the footer.
  {
    protocol::feature_level_record feature;
    feature.name = "metadata.version";
    feature.feature_level = 27;
    const auto record_value = metadata::encode_metadata_record(feature, 0);
    const std::vector<uint8_t> key{1};
    const storage::metadata_batch_record r{std::span<const uint8_t>(key), record_value};
    auto data = storage::build_metadata_batch(std::span(&r, 1), timestamp, false);
    ASSERT_TRUE(data.ok());
    protocol::stamp_base_offset(*data, 1);
    std::vector<uint8_t> footer(_batches.back().begin(), _batches.back().end());
    protocol::stamp_base_offset(footer, 2);
    const auto bytes = concat({_batches[0], *data, footer});
    expect_refused(bytes, "keyed data record");
    // The same record without the key loads.
    const storage::metadata_batch_record unkeyed{std::nullopt, record_value};
    auto good = storage::build_metadata_batch(std::span(&unkeyed, 1), timestamp, false);
    ASSERT_TRUE(good.ok());
    protocol::stamp_base_offset(*good, 1);
    size_t count = 0;
    EXPECT_TRUE(load_counting(concat({_batches[0], *good, footer}), count).ok());
    EXPECT_EQ(count, 1u);
  }
  // A header batch that holds a data record instead.
  {
    const storage::metadata_batch_record r{std::nullopt, value};
    auto batch = storage::build_metadata_batch(std::span(&r, 1), timestamp, false);
    ASSERT_TRUE(batch.ok());
    expect_refused(with_batch_at(0, *batch), "no header record");
  }
}

TEST_F(metadata_snapshot_corrupt_test, the_callbacks_error_stops_the_load) {
  size_t calls = 0;
  auto loaded = load_snapshot_payload(_payload, [&](const versioned_metadata_record&) {
    ++calls;
    return status::error(error_code::unknown_topic_id, "refused by the caller");
  });
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().code, error_code::unknown_topic_id);
  EXPECT_EQ(calls, 1u);
}

}  // namespace
}  // namespace mala::controller
