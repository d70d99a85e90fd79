#include "mala/common/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

namespace mala {
namespace {

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

// Both implementations, so every vector checks the hardware and the portable path.
uint32_t hw(std::span<const uint8_t> d) {
  return crc32c_detail::extend_hardware(0, d);
}
uint32_t sw(std::span<const uint8_t> d) {
  return crc32c_detail::extend_portable(0, d);
}

TEST(crc32c, check_value) {
  EXPECT_EQ(crc32c(bytes_of("123456789")), 0xE3069283u);
  EXPECT_EQ(sw(bytes_of("123456789")), 0xE3069283u);
  if (crc32c_detail::hardware_available()) {
    EXPECT_EQ(hw(bytes_of("123456789")), 0xE3069283u);
  }
}

TEST(crc32c, empty_is_zero) {
  EXPECT_EQ(crc32c({}), 0u);
  EXPECT_EQ(crc32c_extend(0x12345678u, {}), 0x12345678u);
}

// RFC 3720 (iSCSI) appendix B.4 test vectors.
TEST(crc32c, rfc3720_vectors) {
  std::vector<uint8_t> zeros(32, 0x00);
  std::vector<uint8_t> ones(32, 0xff);
  std::vector<uint8_t> ascending(32);
  std::vector<uint8_t> descending(32);
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<uint8_t>(i);
    descending[i] = static_cast<uint8_t>(31 - i);
  }
  const std::vector<uint8_t> iscsi_read = {
      0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
      0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  struct vector_case {
    const std::vector<uint8_t>* data;
    uint32_t expected;
  };
  const vector_case cases[] = {{&zeros, 0x8A9136AAu},
                               {&ones, 0x62A8AB43u},
                               {&ascending, 0x46DD794Eu},
                               {&descending, 0x113FDB5Cu},
                               {&iscsi_read, 0xD9963A56u}};
  for (const auto& c : cases) {
    EXPECT_EQ(crc32c(*c.data), c.expected);
    EXPECT_EQ(sw(*c.data), c.expected);
    if (crc32c_detail::hardware_available()) {
      EXPECT_EQ(hw(*c.data), c.expected);
    }
  }
}

TEST(crc32c, hardware_matches_portable_all_small_sizes) {
  if (!crc32c_detail::hardware_available()) GTEST_SKIP() << "no SSE4.2/PCLMUL";
  auto data = random_bytes(1000 + 8, 1);
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n = 0; n <= 1000; ++n) {
      std::span<const uint8_t> s(data.data() + offset, n);
      ASSERT_EQ(hw(s), sw(s)) << "size " << n << " offset " << offset;
    }
  }
}

TEST(crc32c, hardware_matches_portable_large_odd_sizes) {
  if (!crc32c_detail::hardware_available()) GTEST_SKIP() << "no SSE4.2/PCLMUL";
  auto data = random_bytes((1u << 20) + 64, 2);
  // Around every block-size boundary of the three-way loop (192 bytes per unit, 8 KiB blocks) and large odd
  // sizes.
  const size_t sizes[] = {191,
                          192,
                          193,
                          383,
                          384,
                          385,
                          4095,
                          4096,
                          4097,
                          24575,
                          24576,
                          24577,
                          49151,
                          49153,
                          65535,
                          65536,
                          65537,
                          100003,
                          262147,
                          999999,
                          (1u << 20) - 1,
                          1u << 20,
                          (1u << 20) + 7,
                          3 * 16384 + 5,
                          3 * 8192 * 5 + 191};
  for (size_t size : sizes) {
    for (size_t offset : {0, 1, 3, 7, 13, 57}) {
      if (offset + size > data.size()) continue;
      std::span<const uint8_t> s(data.data() + offset, size);
      ASSERT_EQ(hw(s), sw(s)) << "size " << size << " offset " << offset;
    }
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    size_t size = rng() % (1u << 20);
    size_t offset = rng() % 64;
    std::span<const uint8_t> s(data.data() + offset, size);
    ASSERT_EQ(hw(s), sw(s)) << "size " << size << " offset " << offset;
  }
}

TEST(crc32c, extend_equals_one_shot) {
  auto data = random_bytes(70000, 4);
  const uint32_t whole = crc32c(data);
  EXPECT_EQ(whole, sw(data));
  std::mt19937 rng(5);
  for (int i = 0; i < 300; ++i) {
    size_t cut = rng() % (data.size() + 1);
    std::span<const uint8_t> all(data);
    uint32_t first = crc32c(all.first(cut));
    EXPECT_EQ(crc32c_extend(first, all.subspan(cut)), whole) << "cut " << cut;
    EXPECT_EQ(
        crc32c_detail::extend_portable(crc32c_detail::extend_portable(0, all.first(cut)), all.subspan(cut)),
        whole);
  }
  // Byte by byte.
  uint32_t c = 0;
  for (size_t i = 0; i < 3000; ++i) c = crc32c_extend(c, std::span<const uint8_t>(data).subspan(i, 1));
  EXPECT_EQ(c, crc32c(std::span<const uint8_t>(data).first(3000)));
}

}  // namespace
}  // namespace mala
