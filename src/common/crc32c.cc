#include "mala/common/crc32c.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#include <wmmintrin.h>
#endif

namespace mala {

namespace {

// Reflected Castagnoli polynomial: bit i stands for x^(31-i), so shifting right multiplies by x.
constexpr uint32_t reflected_poly = 0x82F63B78u;

constexpr uint32_t multiply_by_x(uint32_t v) {
  return (v & 1u) ? (v >> 1) ^ reflected_poly : v >> 1;
}

// ---------------------------------------------------------------------------------------------------------------
// Portable path: slicing-by-8 (eight 256-entry tables, one 8-byte word per step).

using slicing_tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr slicing_tables make_slicing_tables() {
  slicing_tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = multiply_by_x(c);
    t[0][i] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (size_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xffu];
  }
  return t;
}

constexpr slicing_tables tables = make_slicing_tables();

uint32_t load_le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

// Raw state update (no inversion).
uint32_t portable_update(uint32_t c, const uint8_t* p, size_t n) {
  while (n >= 8) {
    uint32_t lo = c ^ load_le32(p);
    uint32_t hi = load_le32(p + 4);
    c = tables[7][lo & 0xffu] ^ tables[6][(lo >> 8) & 0xffu] ^ tables[5][(lo >> 16) & 0xffu] ^
        tables[4][lo >> 24] ^ tables[3][hi & 0xffu] ^ tables[2][(hi >> 8) & 0xffu] ^
        tables[1][(hi >> 16) & 0xffu] ^ tables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ tables[0][(c ^ *p++) & 0xffu];
  return c;
}

#if defined(__x86_64__)
// ---------------------------------------------------------------------------------------------------------------
// Hardware path. crc32 has a latency of about three cycles and a throughput of one per cycle, so one
// dependent chain runs at a third of the possible speed. Large inputs are cut into three equal blocks
// checksummed as three independent chains (the second and third starting from zero); since the raw CRC state
// is linear,
//   state(A ++ B ++ C) = shift(state(A), |B|+|C|) ^ shift(state(B), |C|) ^ state(C)
// where shift(s, n) = s * x^(8n) mod P. The shift is one carry-less multiply by a constant and one crc32:
// crc32_u64(0, v) = v * x^32 mod P, and a reflected 32x32 clmul yields a * b * x, so the constant for n bytes
// is x^(8n - 33) mod P.

// Block sizes are multiples of 64 bytes, up to 8 KiB per chain; shifts reach two blocks, i.e. 16 KiB.
constexpr size_t block_unit = 64;
constexpr size_t max_block_units = 128;
constexpr size_t shift_table_size = 2 * max_block_units + 1;

constexpr std::array<uint32_t, shift_table_size> make_shift_constants() {
  std::array<uint32_t, shift_table_size> k{};
  uint32_t v = 0x80000000u;  // x^0
  for (size_t i = 0; i < 8 * block_unit - 33; ++i) v = multiply_by_x(v);
  for (size_t m = 1; m < shift_table_size; ++m) {
    k[m] = v;  // x^(8 * 64 * m - 33)
    for (size_t i = 0; i < 8 * block_unit; ++i) v = multiply_by_x(v);
  }
  return k;
}

constexpr std::array<uint32_t, shift_table_size> shift_constants = make_shift_constants();

uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

__attribute__((target("sse4.2,pclmul"))) uint64_t shift_state(uint64_t state, uint32_t constant) {
  __m128i product = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(state)),
                                         _mm_cvtsi32_si128(static_cast<int>(constant)), 0x00);
  return _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(product)));
}

__attribute__((target("sse4.2,pclmul"))) uint32_t hardware_update(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = crc;
  // Reach 8-byte alignment so that no 8-byte load straddles a cache line.
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7u) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  while (n >= 3 * block_unit) {
    const size_t units = std::min(n / (3 * block_unit), max_block_units);
    const size_t block = units * block_unit;
    const uint8_t* p1 = p + block;
    const uint8_t* p2 = p1 + block;
    const uint8_t* const end = p1;
    uint64_t c0 = c;
    uint64_t c1 = 0;
    uint64_t c2 = 0;
    while (p < end) {
      c0 = _mm_crc32_u64(c0, load_u64(p));
      c1 = _mm_crc32_u64(c1, load_u64(p1));
      c2 = _mm_crc32_u64(c2, load_u64(p2));
      c0 = _mm_crc32_u64(c0, load_u64(p + 8));
      c1 = _mm_crc32_u64(c1, load_u64(p1 + 8));
      c2 = _mm_crc32_u64(c2, load_u64(p2 + 8));
      p += 16;
      p1 += 16;
      p2 += 16;
    }
    c = shift_state(c0, shift_constants[2 * units]) ^ shift_state(c1, shift_constants[units]) ^ c2;
    p = p2;
    n -= 3 * block;
  }
  while (n >= 8) {
    c = _mm_crc32_u64(c, load_u64(p));
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  return static_cast<uint32_t>(c);
}
#endif

}  // namespace

namespace crc32c_detail {

bool hardware_available() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
#else
  return false;
#endif
}

uint32_t extend_hardware(uint32_t crc, std::span<const uint8_t> data) {
#if defined(__x86_64__)
  return ~hardware_update(~crc, data.data(), data.size());
#else
  return extend_portable(crc, data);
#endif
}

uint32_t extend_portable(uint32_t crc, std::span<const uint8_t> data) {
  return ~portable_update(~crc, data.data(), data.size());
}

}  // namespace crc32c_detail

uint32_t crc32c_extend(uint32_t crc, std::span<const uint8_t> data) {
  static const bool use_hardware = crc32c_detail::hardware_available();
  return use_hardware ? crc32c_detail::extend_hardware(crc, data) : crc32c_detail::extend_portable(crc, data);
}

uint32_t crc32c(std::span<const uint8_t> data) {
  return crc32c_extend(0, data);
}

}  // namespace mala
