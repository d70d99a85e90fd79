#include "mala/storage/txn_marker.h"

#include <array>

#include "mala/protocol/record_batch.h"

namespace mala::storage {

namespace proto = mala::protocol;

namespace {

int16_t read_int16(std::span<const uint8_t> bytes, size_t pos) {
  return static_cast<int16_t>((bytes[pos] << 8) | bytes[pos + 1]);
}

int32_t read_int32(std::span<const uint8_t> bytes, size_t pos) {
  return static_cast<int32_t>((uint32_t{bytes[pos]} << 24) | (uint32_t{bytes[pos + 1]} << 16) |
                              (uint32_t{bytes[pos + 2]} << 8) | uint32_t{bytes[pos + 3]});
}

}  // namespace

std::vector<uint8_t> encode_txn_marker_batch(const txn_marker& marker) {
  const auto type = static_cast<uint16_t>(marker.type);
  const auto epoch = static_cast<uint32_t>(marker.coordinator_epoch);
  const std::array<uint8_t, txn_marker_key_size> key{0, 0, static_cast<uint8_t>(type >> 8),
                                                     static_cast<uint8_t>(type)};
  const std::array<uint8_t, txn_marker_value_size> value{0,
                                                         0,
                                                         static_cast<uint8_t>(epoch >> 24),
                                                         static_cast<uint8_t>(epoch >> 16),
                                                         static_cast<uint8_t>(epoch >> 8),
                                                         static_cast<uint8_t>(epoch)};
  static_assert(txn_marker_key_version == 0 && txn_marker_value_version == 0);
  proto::record_batch_builder builder;
  builder.producer(marker.producer_id, marker.producer_epoch, proto::no_sequence)
      .transactional()
      .control()
      .add(marker.timestamp, std::span<const uint8_t>(key), std::span<const uint8_t>(value));
  return builder.build();
}

std::optional<txn_marker> decode_txn_marker_batch(std::span<const uint8_t> batch) {
  proto::record_batch_view view(batch, proto::crc_check::skip);
  if (!view.ok() || !view.is_control() || !view.is_transactional()) return std::nullopt;
  std::vector<uint8_t> buffer;
  auto reader = view.records(buffer);
  auto record = reader.next();
  if (!record || !record->key || record->key->size() < txn_marker_key_size || !record->value ||
      record->value->size() < txn_marker_value_size) {
    return std::nullopt;
  }
  const int16_t type = read_int16(*record->key, 2);
  if (type != static_cast<int16_t>(txn_marker_type::abort) &&
      type != static_cast<int16_t>(txn_marker_type::commit)) {
    return std::nullopt;
  }
  const auto& header = view.header();
  return txn_marker{.producer_id = header.producer_id,
                    .producer_epoch = header.producer_epoch,
                    .type = static_cast<txn_marker_type>(type),
                    .coordinator_epoch = read_int32(*record->value, 2),
                    .timestamp = view.timestamp_of(*record)};
}

}  // namespace mala::storage
