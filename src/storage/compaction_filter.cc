#include "mala/storage/compaction_filter.h"

#include <algorithm>

#include "mala/protocol/compression.h"
#include "mala/protocol/record_batch.h"
#include "mala/protocol/wire.h"

namespace mala::storage {
namespace {

namespace layout = protocol::batch_layout;
namespace attributes = protocol::batch_attributes;

// A record of the batch with the timestamp delta taken relative to new_base_timestamp instead of the batch's
// base timestamp: the attributes, the deltas and the length prefix change, the key, value and headers are
// copied.
bool reencode_record(const protocol::record_view& r, int64_t old_base_timestamp, int64_t new_base_timestamp,
                     std::vector<uint8_t>& head, std::vector<uint8_t>& out) {
  protocol::wire_reader reader(r.encoded);
  reader.read_varint();   // length
  reader.read_int8();     // attributes
  reader.read_varlong();  // timestamp delta
  reader.read_varint();   // offset delta
  if (!reader.ok()) return false;
  const std::span<const uint8_t> rest = reader.rest();
  head.clear();
  protocol::wire_writer h(head);
  h.write_int8(r.attributes);
  h.write_varlong(old_base_timestamp + r.timestamp_delta - new_base_timestamp);
  h.write_varint(r.offset_delta);
  protocol::wire_writer w(out);
  w.write_varint(static_cast<int32_t>(head.size() + rest.size()));
  w.write_raw(head);
  w.write_raw(rest);
  return true;
}

// Writes a v2 header for `h` with the given attributes, timestamps and count at `at` (61 bytes already in
// out).
void write_header(std::vector<uint8_t>& out, size_t at, const protocol::record_batch_header& h, int16_t attrs,
                  int64_t base_timestamp, int64_t max_timestamp, int32_t count) {
  std::vector<uint8_t> header;
  header.reserve(layout::header_size);
  protocol::wire_writer w(header);
  w.write_int64(h.base_offset);
  w.write_int32(static_cast<int32_t>(out.size() - at - layout::log_overhead));
  w.write_int32(h.partition_leader_epoch);
  w.write_int8(protocol::current_magic);
  w.write_uint32(0);  // crc, below
  w.write_int16(attrs);
  w.write_int32(h.last_offset_delta);
  w.write_int64(base_timestamp);
  w.write_int64(max_timestamp);
  w.write_int64(h.producer_id);
  w.write_int16(h.producer_epoch);
  w.write_int32(h.base_sequence);
  w.write_int32(count);
  std::copy(header.begin(), header.end(), out.begin() + static_cast<std::ptrdiff_t>(at));
  protocol::rewrite_batch_crc(std::span<uint8_t>(out).subspan(at));
}

}  // namespace

filtered_batch filter_batch(std::span<const uint8_t> batch, const compaction_round& round,
                            const batch_facts& facts, std::vector<uint8_t>& out, filter_buffers& buffers) {
  protocol::record_batch_view view(batch);
  if (!view.ok()) return {batch_outcome::corrupt, 0, 0};
  const protocol::record_batch_header& h = view.header();
  const bool control = h.is_control();
  const bool has_horizon = h.has_delete_horizon();
  // Kafka's checkBatchRetention: a control batch's records go only once past its horizon, a data batch's as
  // soon as it is discardable (aborted).
  const bool discard_records =
      control ? facts.discardable && has_horizon && h.base_timestamp <= round.now_ms : facts.discardable;
  const bool retain_empty =
      (h.producer_id >= 0 && facts.producers_last_batch) || h.next_offset() == round.upper_bound;
  if (discard_records && !retain_empty) return {batch_outcome::removed, 0, h.record_count};

  // Kafka's shouldRetainRecord, record by record.
  const bool retain_deletes = !has_horizon || round.now_ms < h.base_timestamp;
  const int64_t map_end = round.latest ? round.latest->latest_offset() : -1;
  std::vector<protocol::record_view>& kept = buffers.kept;
  kept.clear();
  bool tombstone_kept = false;
  int64_t max_timestamp = protocol::no_timestamp;
  int32_t seen = 0;
  auto reader = view.records(buffers.decompressed);
  while (auto r = reader.next()) {
    ++seen;
    const int64_t offset = h.base_offset + r->offset_delta;
    bool keep = false;
    if (discard_records) {
      keep = false;
    } else if (control || offset > map_end) {
      keep = true;
    } else if (r->key) {
      keep = offset >= round.latest->get(*r->key) && (r->value.has_value() || retain_deletes);
    }
    if (!keep) continue;
    if (!r->value && !control) tombstone_kept = true;
    max_timestamp = std::max(max_timestamp, h.base_timestamp + r->timestamp_delta);
    kept.push_back(*r);
  }
  if (!reader.ok()) return {batch_outcome::corrupt, 0, 0};
  const int32_t kept_count = static_cast<int32_t>(kept.size());
  const int32_t removed_count = seen - kept_count;

  if (kept.empty()) {
    if (!retain_empty) return {batch_outcome::removed, 0, removed_count};
    // A header without records (Kafka's RETAIN_EMPTY): offsets, producer fields and max timestamp kept.
    const size_t at = out.size();
    out.resize(at + layout::header_size);
    const auto attrs =
        static_cast<int16_t>(h.attributes & ~(attributes::compression_mask | attributes::delete_horizon));
    write_header(out, at, h, attrs, protocol::no_timestamp, h.max_timestamp, 0);
    return {batch_outcome::emptied, 0, removed_count};
  }

  // A tombstone, or the marker of a transaction whose data is gone, gets a delete horizon the first time a
  // round keeps it (KIP-534).
  const bool set_horizon = (tombstone_kept || (facts.discardable && control)) && !has_horizon;
  if (removed_count == 0 && !set_horizon) {
    out.insert(out.end(), batch.begin(), batch.end());
    return {batch_outcome::kept_whole, kept_count, 0};
  }

  const int64_t base_timestamp = set_horizon ? round.now_ms + round.delete_retention_ms : h.base_timestamp;
  int16_t attrs = h.attributes;
  if (set_horizon) attrs = static_cast<int16_t>(attrs | attributes::delete_horizon);
  if (h.timestamp_kind() == protocol::timestamp_type::log_append_time ||
      max_timestamp == protocol::no_timestamp) {
    max_timestamp = h.max_timestamp;
  }

  const size_t at = out.size();
  out.resize(at + layout::header_size);
  const bool compressed = view.is_compressed();
  std::vector<uint8_t>& records = compressed ? buffers.records : out;
  if (compressed) records.clear();
  for (const auto& r : kept) {
    if (base_timestamp == h.base_timestamp) {
      records.insert(records.end(), r.encoded.begin(), r.encoded.end());
    } else if (!reencode_record(r, h.base_timestamp, base_timestamp, buffers.record_head, records)) {
      out.resize(at);
      return {batch_outcome::corrupt, 0, 0};
    }
  }
  if (compressed) {
    const std::vector<uint8_t> packed = protocol::compress(view.compression(), records);
    out.insert(out.end(), packed.begin(), packed.end());
  }
  write_header(out, at, h, attrs, base_timestamp, max_timestamp, kept_count);
  return {batch_outcome::rebuilt, kept_count, removed_count};
}

}  // namespace mala::storage
