// A message prefixed with its int16 schema version (Kafka's MessageUtil.toVersionPrefixedBytes): the framing
// of __consumer_offsets and __transaction_state keys and values. And the value of a Raft control record
// (Kafka's MessageUtil.toByteBuffer: the message alone, whose own first field is its Version).
//
// Threads: plain functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "mala/protocol/wire.h"

namespace mala::protocol {

template <typename Message>
std::vector<uint8_t> encode_versioned(const Message& message, int16_t version) {
  std::vector<uint8_t> out;
  out.reserve(2 + message.encoded_size(version));
  wire_writer w(out);
  w.write_int16(version);
  message.encode(w, version);
  return out;
}

// The message alone at `version`, no prefix (Kafka's MessageUtil.toByteBuffer).
template <typename Message>
std::vector<uint8_t> encode_message(const Message& message, int16_t version) {
  std::vector<uint8_t> out;
  out.reserve(message.encoded_size(version));
  wire_writer w(out);
  message.encode(w, version);
  return out;
}

// A control record's value (KRaftVersionRecord, VotersRecord, SnapshotHeaderRecord, SnapshotFooterRecord,
// LeaderChangeMessage) as Kafka's MemoryRecordsBuilder writes it: the message at `version`, no prefix.
template <typename Message>
std::vector<uint8_t> encode_control_value(const Message& message, int16_t version) {
  return encode_message(message, version);
}
// Reads a control record's value at `version` (ControlRecordUtils); nullopt unless it decodes exactly. Mala
// before 2026-12-07 wrote the KRaftVersion, Voters and snapshot header/footer records with an extra int16
// version prefix: such values are read too, so that the logs and snapshots it wrote still load.
template <typename Message>
std::optional<Message> decode_control_value(std::span<const uint8_t> value, int16_t version) {
  {
    wire_reader r(value);
    Message m;
    if (m.decode(r, version) == decode_status::ok && r.remaining() == 0) return m;
  }
  wire_reader r(value);
  if (r.read_int16() != version || !r.ok()) return std::nullopt;
  Message m;
  if (m.decode(r, version) == decode_status::ok && r.remaining() == 0) return m;
  return std::nullopt;
}

}  // namespace mala::protocol
