// Big-endian integers in the storage library's own files (producer snapshots, the aborted-transaction index),
// which Kafka writes in Java's byte order. Internal to the storage library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

namespace mala::storage::detail {

template <typename T>
void append_be(std::string& out, T value) {
  auto v = static_cast<std::make_unsigned_t<T>>(value);
  for (int shift = static_cast<int>(sizeof(T) * 8) - 8; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>(static_cast<uint8_t>(v >> shift)));
  }
}

// The caller checked that bytes holds sizeof(T) bytes at pos.
template <typename T>
T read_be(std::span<const uint8_t> bytes, size_t pos) {
  std::make_unsigned_t<T> v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v = static_cast<std::make_unsigned_t<T>>((v << 8) | bytes[pos + i]);
  return static_cast<T>(v);
}

}  // namespace mala::storage::detail
