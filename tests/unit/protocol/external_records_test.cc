// External records fields (zero-copy Fetch): the encoder writes their length and leaves a gap where the
// bytes go; filling the gaps gives exactly the encoding of the same message with the bytes in memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mala/protocol/messages/fetch_response.h"
#include "mala/protocol/wire.h"

namespace mala::protocol {
namespace {

fetch_response two_partitions(records_view first, records_view second) {
  fetch_response resp;
  auto& topic = resp.responses.emplace_back();
  topic.topic = "orders";
  topic.partitions.emplace_back().records = first;
  topic.partitions.back().partition_index = 0;
  topic.partitions.emplace_back().records = second;
  topic.partitions.back().partition_index = 1;
  return resp;
}

class external_records_test : public ::testing::TestWithParam<int16_t> {};

TEST_P(external_records_test, gaps_filled_give_the_in_memory_encoding) {
  const int16_t version = GetParam();
  const std::vector<uint8_t> a(300, 0xaa);
  const std::vector<uint8_t> b(17, 0xbb);

  const auto in_memory = two_partitions(records_view::of(a), records_view::of(b));
  std::vector<uint8_t> expected;
  wire_writer ew(expected);
  in_memory.encode(ew, version);
  EXPECT_TRUE(ew.gaps().empty());

  const auto external = two_partitions(records_view::external(0, 300), records_view::external(1, 17));
  EXPECT_EQ(external.encoded_size(version), in_memory.encoded_size(version));
  std::vector<uint8_t> out;
  wire_writer w(out);
  external.encode(w, version);
  ASSERT_EQ(w.gaps().size(), 2u);
  EXPECT_EQ(out.size() + a.size() + b.size(), expected.size());
  EXPECT_EQ(w.gaps()[0].external_id, 0);
  EXPECT_EQ(w.gaps()[0].size, 300u);
  EXPECT_EQ(w.gaps()[1].external_id, 1);
  EXPECT_LT(w.gaps()[0].position, w.gaps()[1].position);

  std::vector<uint8_t> filled(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(w.gaps()[0].position));
  filled.insert(filled.end(), a.begin(), a.end());
  filled.insert(filled.end(), out.begin() + static_cast<std::ptrdiff_t>(w.gaps()[0].position),
                out.begin() + static_cast<std::ptrdiff_t>(w.gaps()[1].position));
  filled.insert(filled.end(), b.begin(), b.end());
  filled.insert(filled.end(), out.begin() + static_cast<std::ptrdiff_t>(w.gaps()[1].position), out.end());
  EXPECT_EQ(filled, expected);
}

// v4 (classic encoding, int32 lengths), v12 and v17 (flexible, compact lengths).
INSTANTIATE_TEST_SUITE_P(versions, external_records_test, ::testing::Values<int16_t>(4, 12, 17));

TEST(external_records, null_and_empty_records_leave_no_gap) {
  std::vector<uint8_t> out;
  wire_writer w(out);
  w.write_records(records_view{}, true);
  w.write_records(records_view::of({}), true);
  w.write_records(records_view::external(3, 0), true);
  ASSERT_EQ(w.gaps().size(), 1u);  // an empty external range is still a (zero-length) gap
  EXPECT_EQ(w.gaps()[0].size, 0u);
  EXPECT_EQ(out, (std::vector<uint8_t>{0, 1, 1}));
}

}  // namespace
}  // namespace mala::protocol
