// What compaction keeps of a batch: the latest record of each key, records beyond the map, tombstones until
// their delete horizon (set by the first round that keeps them, KIP-534), no keyless records; whole batches
// copied unchanged, partial ones rebuilt with their offsets, producer fields and codec, emptied batches kept
// as a header for a producer's last batch or the round's end; corrupt input refused.
#include "mala/storage/compaction_filter.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "mala/protocol/record_batch.h"

namespace mala::storage {
namespace {

namespace proto = mala::protocol;

constexpr int64_t t0 = 1'700'000'000'000;
constexpr int64_t day = 86'400'000;

std::span<const uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

struct rec {
  std::optional<std::string> key;
  std::optional<std::string> value;
};

struct batch_spec {
  int64_t base_offset = 0;
  std::vector<rec> records;
  proto::compression_codec codec = proto::compression_codec::none;
  int64_t producer_id = -1;
  bool control = false;
};

std::vector<uint8_t> make_batch(const batch_spec& spec) {
  proto::record_batch_builder b;
  b.base_offset(spec.base_offset).partition_leader_epoch(4).compression(spec.codec).control(spec.control);
  if (spec.producer_id >= 0) b.producer(spec.producer_id, 2, 10);
  int64_t ts = t0;
  for (const auto& r : spec.records) {
    std::optional<std::span<const uint8_t>> k;
    std::optional<std::span<const uint8_t>> v;
    if (r.key) k = bytes(*r.key);
    if (r.value) v = bytes(*r.value);
    b.add(ts++, k, v);
  }
  return b.build();
}

// The records of the one batch in `out`: (offset, key, value, timestamp).
struct read_record {
  int64_t offset;
  std::optional<std::string> key;
  std::optional<std::string> value;
  int64_t timestamp;
};
std::vector<read_record> records_of(const std::vector<uint8_t>& out) {
  std::vector<read_record> result;
  proto::record_batch_view view(out);
  EXPECT_TRUE(view.ok()) << proto::batch_status_name(view.status());
  EXPECT_EQ(view.bytes().size(), out.size());
  std::vector<uint8_t> buffer;
  auto reader = view.records(buffer);
  while (auto r = reader.next()) {
    read_record x{view.offset_of(*r), std::nullopt, std::nullopt, view.timestamp_of(*r)};
    if (r->key) x.key = std::string(r->key->begin(), r->key->end());
    if (r->value) x.value = std::string(r->value->begin(), r->value->end());
    result.push_back(x);
  }
  EXPECT_TRUE(reader.ok());
  return result;
}

class compaction_filter_test : public ::testing::Test {
 protected:
  compaction_filter_test() : map(1 << 16) {}

  filtered_batch run(const std::vector<uint8_t>& batch, batch_facts facts = {}) {
    out.clear();
    compaction_round round;
    round.latest = &map;
    round.now_ms = now;
    round.delete_retention_ms = day;
    round.upper_bound = upper_bound;
    return filter_batch(batch, round, facts, out, buffers);
  }

  key_offset_map map;
  int64_t now = t0 + 1000;
  int64_t upper_bound = 1'000'000;
  std::vector<uint8_t> out;
  filter_buffers buffers;
};

TEST_F(compaction_filter_test, keeps_the_latest_record_of_each_key_and_drops_keyless_ones) {
  // Offsets 10..15: a, b, a, (no key), c, a. The map covers the whole batch.
  auto batch =
      make_batch({10, {{"a", "1"}, {"b", "2"}, {"a", "3"}, {std::nullopt, "x"}, {"c", "4"}, {"a", "5"}}});
  map.put(bytes("a"), 15);
  map.put(bytes("b"), 11);
  map.put(bytes("c"), 14);
  map.set_latest_offset(15);
  auto result = run(batch);
  EXPECT_EQ(result.outcome, batch_outcome::rebuilt);
  EXPECT_EQ(result.records_kept, 3);
  EXPECT_EQ(result.records_removed, 3);
  auto kept = records_of(out);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].offset, 11);
  EXPECT_EQ(kept[0].value, "2");
  EXPECT_EQ(kept[0].timestamp, t0 + 1);
  EXPECT_EQ(kept[1].offset, 14);
  EXPECT_EQ(kept[2].offset, 15);
  EXPECT_EQ(kept[2].value, "5");
  // The batch keeps its offsets, producer fields and leader epoch.
  auto in = *proto::parse_batch_header(batch);
  auto h = *proto::parse_batch_header(out);
  EXPECT_EQ(h.base_offset, 10);
  EXPECT_EQ(h.last_offset_delta, 5);
  EXPECT_EQ(h.partition_leader_epoch, 4);
  EXPECT_EQ(h.record_count, 3);
  EXPECT_EQ(h.base_timestamp, in.base_timestamp);
  EXPECT_EQ(h.max_timestamp, t0 + 5);
  EXPECT_FALSE(h.has_delete_horizon());
}

TEST_F(compaction_filter_test, a_batch_whose_records_all_stay_is_copied_unchanged) {
  auto batch = make_batch({0, {{"a", "1"}, {"b", "2"}}, proto::compression_codec::none, 7});
  map.put(bytes("a"), 0);
  map.put(bytes("b"), 1);
  auto result = run(batch);
  EXPECT_EQ(result.outcome, batch_outcome::kept_whole);
  EXPECT_EQ(out, batch);
}

TEST_F(compaction_filter_test, records_beyond_the_map_stay) {
  // Offsets 18..22, all of key a; the map covers offsets up to 19 only (it filled up there).
  auto batch = make_batch({18, {{"a", "1"}, {"a", "2"}, {"a", "3"}, {"a", "4"}, {"a", "5"}}});
  map.put(bytes("a"), 19);
  auto result = run(batch);
  EXPECT_EQ(result.outcome, batch_outcome::rebuilt);
  auto kept = records_of(out);
  ASSERT_EQ(kept.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(kept[i].offset, 19 + i);
}

TEST_F(compaction_filter_test, a_superseded_batch_goes_unless_it_is_a_producers_last_or_ends_the_round) {
  auto batch = make_batch({0, {{"a", "1"}, {"a", "2"}}, proto::compression_codec::none, 7});
  map.put(bytes("a"), 9);
  auto gone = run(batch);
  EXPECT_EQ(gone.outcome, batch_outcome::removed);
  EXPECT_EQ(gone.records_removed, 2);
  EXPECT_TRUE(out.empty());

  // The producer's last batch: a header keeps its offsets and sequence (Kafka's RETAIN_EMPTY).
  auto kept = run(batch, {.producers_last_batch = true});
  EXPECT_EQ(kept.outcome, batch_outcome::emptied);
  ASSERT_EQ(out.size(), proto::batch_layout::header_size);
  proto::record_batch_view view(out);
  ASSERT_TRUE(view.ok()) << proto::batch_status_name(view.status());
  EXPECT_EQ(view.header().base_offset, 0);
  EXPECT_EQ(view.header().last_offset_delta, 1);
  EXPECT_EQ(view.header().record_count, 0);
  EXPECT_EQ(view.header().producer_id, 7);
  EXPECT_EQ(view.header().producer_epoch, 2);
  EXPECT_EQ(view.header().base_sequence, 10);
  EXPECT_EQ(view.header().base_timestamp, -1);
  EXPECT_EQ(view.header().max_timestamp, t0 + 1);

  // A batch without a producer ending right below the round's upper bound stays too.
  auto plain = make_batch({0, {{"a", "1"}, {"a", "2"}}});
  upper_bound = 2;
  EXPECT_EQ(run(plain).outcome, batch_outcome::emptied);
  EXPECT_EQ(out.size(), proto::batch_layout::header_size);
  upper_bound = 3;
  EXPECT_EQ(run(plain).outcome, batch_outcome::removed);
}

TEST_F(compaction_filter_test, a_tombstone_gets_a_delete_horizon_and_goes_after_it) {
  // b's tombstone is the latest of b; a keeps its value.
  auto batch = make_batch({0, {{"a", "1"}, {"b", std::nullopt}, {"c", "3"}}});
  map.put(bytes("a"), 0);
  map.put(bytes("b"), 1);
  map.put(bytes("c"), 2);
  auto first = run(batch);
  EXPECT_EQ(first.outcome, batch_outcome::rebuilt);
  auto h = *proto::parse_batch_header(out);
  EXPECT_TRUE(h.has_delete_horizon());
  EXPECT_EQ(h.base_timestamp, now + day);
  EXPECT_EQ(h.max_timestamp, t0 + 2);
  auto kept = records_of(out);
  ASSERT_EQ(kept.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(kept[i].timestamp, t0 + i) << "timestamps survive the new base";
  EXPECT_FALSE(kept[1].value.has_value());

  // A later round before the horizon copies the cleaned batch as it is; after it the tombstone goes.
  const std::vector<uint8_t> cleaned = out;
  now += day - 1;
  EXPECT_EQ(run(cleaned).outcome, batch_outcome::kept_whole);
  EXPECT_EQ(out, cleaned);
  now += 1;
  auto after = run(cleaned);
  EXPECT_EQ(after.outcome, batch_outcome::rebuilt);
  kept = records_of(out);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].key, "a");
  EXPECT_EQ(kept[0].timestamp, t0);
  EXPECT_EQ(kept[1].key, "c");
  EXPECT_EQ(kept[1].timestamp, t0 + 2);
  EXPECT_TRUE(proto::parse_batch_header(out)->has_delete_horizon());  // the horizon stays with the batch
}

TEST_F(compaction_filter_test, a_superseded_tombstone_goes_at_once) {
  auto batch = make_batch({0, {{"a", std::nullopt}, {"a", "back"}}});
  map.put(bytes("a"), 1);
  auto result = run(batch);
  EXPECT_EQ(result.outcome, batch_outcome::rebuilt);
  EXPECT_FALSE(proto::parse_batch_header(out)->has_delete_horizon());
  auto kept = records_of(out);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].value, "back");
}

TEST_F(compaction_filter_test, compressed_batches_are_rebuilt_with_their_codec) {
  for (auto codec : {proto::compression_codec::gzip, proto::compression_codec::snappy,
                     proto::compression_codec::lz4, proto::compression_codec::zstd}) {
    map.clear();
    std::vector<rec> records;
    for (int i = 0; i < 50; ++i)
      records.push_back({"k" + std::to_string(i % 10), "value-" + std::to_string(i)});
    auto batch = make_batch({100, records, codec, 3});
    for (int i = 0; i < 10; ++i) map.put(bytes("k" + std::to_string(i)), 140 + i);
    auto result = run(batch);
    EXPECT_EQ(result.outcome, batch_outcome::rebuilt);
    EXPECT_EQ(result.records_kept, 10);
    auto h = *proto::parse_batch_header(out);
    EXPECT_EQ(h.compression(), codec);
    EXPECT_EQ(h.last_offset_delta, 49);
    auto kept = records_of(out);
    ASSERT_EQ(kept.size(), 10u);
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(kept[i].offset, 140 + i);
      EXPECT_EQ(kept[i].value, "value-" + std::to_string(40 + i));
    }
  }
}

TEST_F(compaction_filter_test, control_batches_stay_and_discardable_ones_follow_the_horizon) {
  // A control record's key is the marker type, never in the map.
  auto marker = make_batch({5, {{"marker-key", "marker-value"}}, proto::compression_codec::none, 9, true});
  EXPECT_EQ(run(marker).outcome, batch_outcome::kept_whole);
  // A marker whose transaction has no data left: the first round sets its horizon, a round after it removes
  // it.
  auto first = run(marker, {.discardable = true});
  EXPECT_EQ(first.outcome, batch_outcome::rebuilt);
  EXPECT_TRUE(proto::parse_batch_header(out)->has_delete_horizon());
  const std::vector<uint8_t> stamped = out;
  EXPECT_EQ(run(stamped, {.discardable = true}).outcome, batch_outcome::kept_whole);
  now += day;
  EXPECT_EQ(run(stamped, {.discardable = true}).outcome, batch_outcome::removed);
  // ... unless it is still its producer's last batch.
  EXPECT_EQ(run(stamped, {.producers_last_batch = true, .discardable = true}).outcome,
            batch_outcome::emptied);
  // Aborted data goes whatever the keys.
  auto data = make_batch({6, {{"a", "1"}}, proto::compression_codec::none, 9});
  map.put(bytes("a"), 6);
  EXPECT_EQ(run(data, {.discardable = true}).outcome, batch_outcome::removed);
}

TEST_F(compaction_filter_test, corrupt_batches_are_refused_and_nothing_is_written) {
  auto batch = make_batch({0, {{"a", "1"}, {"b", "2"}}});
  map.put(bytes("a"), 0);
  auto bad_crc = batch;
  bad_crc.back() ^= 0x01;
  out = {1, 2, 3};
  compaction_round round;
  round.latest = &map;
  auto result = filter_batch(bad_crc, round, {}, out, buffers);
  EXPECT_EQ(result.outcome, batch_outcome::corrupt);
  EXPECT_EQ(out, (std::vector<uint8_t>{1, 2, 3}));
  auto cut = std::vector<uint8_t>(batch.begin(), batch.end() - 3);
  EXPECT_EQ(run(cut).outcome, batch_outcome::corrupt);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace mala::storage
