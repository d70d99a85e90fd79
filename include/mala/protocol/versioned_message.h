// A message prefixed with its int16 schema version (Kafka's MessageUtil.toVersionPrefixedBytes): the framing
// of
// __consumer_offsets keys and values and of the Raft control records (SnapshotHeader/Footer, LeaderChange).
//
// Threads: plain functions.
#pragma once

#include <cstdint>
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

}  // namespace mala::protocol
