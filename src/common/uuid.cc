#include "mala/common/uuid.h"

#include <random>

namespace mala {

namespace {
constexpr char base64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}
}  // namespace

bool uuid::is_zero() const {
  for (auto b : bytes)
    if (b != 0) return false;
  return true;
}

std::string uuid::to_string() const {
  std::string out;
  out.reserve(22);
  uint32_t acc = 0;
  int bits = 0;
  for (uint8_t b : bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(base64_url[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(base64_url[(acc << (6 - bits)) & 0x3f]);
  return out;
}

std::optional<uuid> uuid::parse(std::string_view text) {
  if (text.size() != 22) return std::nullopt;
  uuid id;
  uint32_t acc = 0;
  int bits = 0;
  size_t out = 0;
  for (char c : text) {
    int v = base64_value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (out < 16) id.bytes[out++] = static_cast<uint8_t>(acc >> bits);
    }
  }
  if (out != 16 || (acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return id;
}

uuid uuid::random() {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  for (;;) {
    uuid id;
    uint64_t hi = gen(), lo = gen();
    for (int i = 0; i < 8; ++i) {
      id.bytes[i] = static_cast<uint8_t>(hi >> (56 - 8 * i));
      id.bytes[8 + i] = static_cast<uint8_t>(lo >> (56 - 8 * i));
    }
    id.bytes[6] = static_cast<uint8_t>((id.bytes[6] & 0x0f) | 0x40);
    id.bytes[8] = static_cast<uint8_t>((id.bytes[8] & 0x3f) | 0x80);
    uuid metadata_topic_id;
    metadata_topic_id.bytes[15] = 1;
    if (id.is_zero() || id == metadata_topic_id) continue;
    if (id.to_string().front() == '-') continue;
    return id;
  }
}

}  // namespace mala
