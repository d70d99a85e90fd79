#include "mala/metadata/metadata_records.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "mala/common/assert.h"
#include "mala/protocol/message_catalog.h"
#include "mala/protocol/wire.h"

namespace mala::metadata {

namespace {

// A decoder for each alternative of metadata_record, found by record type.
template <size_t I = 0>
bool decode_alternative(int16_t type, int16_t version, protocol::wire_reader& reader, metadata_record& out,
                        protocol::decode_status& status) {
  if constexpr (I == std::variant_size_v<metadata_record>) {
    (void)type, (void)version, (void)reader, (void)out, (void)status;
    return false;
  } else {
    using record_t = std::variant_alternative_t<I, metadata_record>;
    if (record_t::api_key != type) return decode_alternative<I + 1>(type, version, reader, out, status);
    record_t record;
    status = record.decode(reader, version);
    out = std::move(record);
    return true;
  }
}

template <size_t I = 0>
bool holds_type(int16_t type) {
  if constexpr (I == std::variant_size_v<metadata_record>) {
    (void)type;
    return false;
  } else {
    return std::variant_alternative_t<I, metadata_record>::api_key == type || holds_type<I + 1>(type);
  }
}

template <size_t I = 0>
int16_t max_version_of(int16_t type) {
  if constexpr (I == std::variant_size_v<metadata_record>) {
    (void)type;
    return -1;
  } else {
    using record_t = std::variant_alternative_t<I, metadata_record>;
    return record_t::api_key == type ? record_t::max_version : max_version_of<I + 1>(type);
  }
}

status corrupt(std::string message) {
  return status::error(error_code::corrupt_message, std::move(message));
}

}  // namespace

int16_t metadata_record_type(const metadata_record& record) {
  return std::visit([](const auto& r) -> int16_t { return std::remove_cvref_t<decltype(r)>::api_key; },
                    record);
}

int16_t metadata_record_min_version(const metadata_record& record) {
  return std::visit([](const auto& r) -> int16_t { return std::remove_cvref_t<decltype(r)>::min_version; },
                    record);
}

int16_t metadata_record_max_version(const metadata_record& record) {
  return std::visit([](const auto& r) -> int16_t { return std::remove_cvref_t<decltype(r)>::max_version; },
                    record);
}

bool is_known_metadata_record_type(int16_t type) {
  return protocol::find_message(type, protocol::message_kind::metadata) != nullptr;
}

std::vector<uint8_t> encode_metadata_record(const metadata_record& record, int16_t version) {
  const int16_t type = metadata_record_type(record);
  // The writer chooses the version from the schema it links; getting it wrong would write a log no one can
  // read.
  MALA_ASSERT(
      version >= metadata_record_min_version(record) && version <= metadata_record_max_version(record),
      "metadata record type {} has no version {}", type, version);
  std::vector<uint8_t> out;
  const size_t body_size = std::visit([version](const auto& r) { return r.encoded_size(version); }, record);
  out.reserve(protocol::uvarint_size(metadata_record_frame_version) +
              protocol::uvarint_size(static_cast<uint32_t>(type)) +
              protocol::uvarint_size(static_cast<uint32_t>(version)) + body_size);
  protocol::wire_writer w(out);
  w.write_uvarint(metadata_record_frame_version);
  w.write_uvarint(static_cast<uint32_t>(type));
  w.write_uvarint(static_cast<uint32_t>(version));
  std::visit([&w, version](const auto& r) { r.encode(w, version); }, record);
  return out;
}

namespace {

// Reads the envelope from `reader`, leaving it at the body.
result<metadata_record_header> read_header(protocol::wire_reader& reader) {
  const uint32_t frame_version = reader.read_uvarint();
  const uint32_t type = reader.read_uvarint();
  const uint32_t version = reader.read_uvarint();
  if (!reader.ok()) {
    return corrupt(std::string("metadata record envelope: ") +
                   std::string(protocol::decode_status_name(reader.status())));
  }
  if (frame_version != metadata_record_frame_version) {
    // Frame version 0 was the KRaft preview of Kafka 2.8, which Kafka no longer reads either.
    return corrupt("metadata record frame version " + std::to_string(frame_version) +
                   ", only 1 is supported");
  }
  // Kafka reads both as unsigned varints and refuses values past Short.MAX_VALUE.
  if (type > 0x7fff || version > 0x7fff) {
    return corrupt("metadata record type " + std::to_string(type) + " or version " + std::to_string(version) +
                   " out of range");
  }
  return metadata_record_header{static_cast<int16_t>(type), static_cast<int16_t>(version)};
}

}  // namespace

result<metadata_record_header> peek_metadata_record_header(std::span<const uint8_t> bytes) {
  protocol::wire_reader reader(bytes);
  return read_header(reader);
}

result<versioned_metadata_record> decode_metadata_record(std::span<const uint8_t> bytes) {
  protocol::wire_reader reader(bytes);
  auto header = read_header(reader);
  if (!header) return header.error();
  const auto [type, version] = *header;
  if (!holds_type(type)) {
    return status::error(error_code::unsupported_version,
                         std::string(is_known_metadata_record_type(type) ? "metadata record type "
                                                                         : "unknown metadata "
                                                                           "record type ") +
                             std::to_string(type) + " is not applied by Mala");
  }
  if (version > max_version_of(type)) {
    return status::error(error_code::unsupported_version, "metadata record type " + std::to_string(type) +
                                                              " version " + std::to_string(version) +
                                                              " is newer than Mala knows");
  }
  versioned_metadata_record out;
  out.version = version;
  protocol::decode_status body_status = protocol::decode_status::ok;
  decode_alternative(type, version, reader, out.record, body_status);
  if (body_status != protocol::decode_status::ok) {
    return corrupt("metadata record type " + std::to_string(type) + " v" + std::to_string(version) + ": " +
                   std::string(protocol::decode_status_name(body_status)));
  }
  if (reader.remaining() != 0) {
    return corrupt(std::to_string(reader.remaining()) + " byte(s) after metadata record type " +
                   std::to_string(type));
  }
  return out;
}

}  // namespace mala::metadata
