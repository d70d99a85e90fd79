#include "mala/common/java_hash.h"

#include <cstddef>

namespace mala {

namespace {

constexpr uint32_t replacement_char = 0xFFFD;

// Decodes one code point starting at s[i] and advances i; malformed or truncated sequences decode to U+FFFD
// and consume one byte, as Java's UTF-8 decoder (with REPLACE) does for a bad lead byte.
uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) {
    ++i;
    return lead;
  }
  size_t extra = 0;
  uint32_t cp = 0;
  uint32_t min = 0;
  if ((lead & 0xE0) == 0xC0) {
    extra = 1;
    cp = lead & 0x1F;
    min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    extra = 2;
    cp = lead & 0x0F;
    min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    extra = 3;
    cp = lead & 0x07;
    min = 0x10000;
  } else {
    ++i;
    return replacement_char;
  }
  for (size_t k = 1; k <= extra; ++k) {
    if (i + k >= s.size() || (byte(i + k) & 0xC0) != 0x80) {
      ++i;
      return replacement_char;
    }
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return replacement_char;
  }
  i += extra + 1;
  return cp;
}

}  // namespace

int32_t java_string_hash(std::string_view s) {
  uint32_t h = 0;  // unsigned: Java's int overflow wraps, C++'s signed overflow would be undefined
  size_t i = 0;
  while (i < s.size()) {
    const uint32_t cp = next_code_point(s, i);
    if (cp >= 0x10000) {
      const uint32_t v = cp - 0x10000;
      h = h * 31 + (0xD800 + (v >> 10));
      h = h * 31 + (0xDC00 + (v & 0x3FF));
    } else {
      h = h * 31 + cp;
    }
  }
  return static_cast<int32_t>(h);
}

}  // namespace mala
