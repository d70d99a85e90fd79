#include "mala/controller/metadata_snapshot.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "mala/metadata/image_records.h"
#include "mala/metadata/metadata_delta.h"
#include "mala/protocol/messages/snapshot_footer_record.h"
#include "mala/protocol/messages/snapshot_header_record.h"
#include "mala/protocol/record_batch.h"
#include "mala/protocol/versioned_message.h"
#include "mala/protocol/wire.h"
#include "mala/raft/voter_set.h"

namespace mala::controller {

namespace {

// An upper bound of a record's framing around its value in a v2 batch (length, attributes, timestamp and
// offset deltas, null key, value length, header count, all varints at their widest), used to split the data
// batches before building them.
constexpr size_t record_overhead_bound = 5 + 1 + 10 + 5 + 1 + 5 + 1;

status corrupt(std::string why) {
  return status::error(error_code::corrupt_message, "metadata snapshot: " + std::move(why));
}

template <typename Message>
result<Message> read_control_value(std::span<const uint8_t> value, int16_t expected_version,
                                   std::string_view what) {
  auto m = protocol::decode_control_value<Message>(value, expected_version);
  if (!m) return corrupt(std::string(what) + " does not decode");
  if (m->version_ != expected_version) {
    return corrupt(std::string(what) + " of unsupported version " + std::to_string(m->version_));
  }
  return std::move(*m);
}

// One batch of the snapshot: offsets continue the previous batch, the epoch is the snapshot's.
status append_batch(std::vector<uint8_t>& out, std::span<const storage::metadata_batch_record> records,
                    int64_t timestamp_ms, bool control, int64_t& next_offset, int32_t epoch,
                    int32_t max_batch_bytes) {
  auto batch = storage::build_metadata_batch(records, timestamp_ms, control);
  if (!batch.ok()) return batch.error();
  if (batch->size() > static_cast<size_t>(max_batch_bytes)) {
    return status::error(error_code::record_list_too_large,
                         "metadata snapshot batch of " + std::to_string(batch->size()) + " bytes exceeds " +
                             std::to_string(max_batch_bytes));
  }
  protocol::stamp_base_offset(*batch, next_offset);
  protocol::stamp_partition_leader_epoch(*batch, epoch);
  next_offset += static_cast<int64_t>(records.size());
  out.insert(out.end(), batch->begin(), batch->end());
  return status::success();
}

}  // namespace

result<std::vector<uint8_t>> build_snapshot_payload(const metadata::metadata_image& image,
                                                    raft::offset_and_epoch id, int64_t timestamp_ms,
                                                    int32_t max_batch_bytes,
                                                    std::span<const raft::control_record> raft_records) {
  max_batch_bytes = std::min(max_batch_bytes, storage::max_metadata_batch_bytes);
  std::vector<uint8_t> out;
  int64_t next_offset = 0;

  protocol::snapshot_header_record header;
  header.version_ = snapshot_header_version;
  header.last_contained_log_timestamp = timestamp_ms;
  const auto header_key = storage::control_record_key(snapshot_header_control_type);
  const auto header_value = protocol::encode_control_value(header, snapshot_header_version);
  std::vector<storage::metadata_batch_record> header_batch{
      {std::span<const uint8_t>(header_key), header_value}};
  for (const auto& r : raft_records) header_batch.push_back({std::span<const uint8_t>(r.key), r.value});
  if (auto st = append_batch(out, header_batch, timestamp_ms, true, next_offset, id.epoch, max_batch_bytes);
      !st.ok())
    return st;

  // Data batches, filled up to the bound (Kafka's BatchAccumulator rolls a batch when the next record does
  // not fit).
  std::vector<std::vector<uint8_t>> values;
  for (const auto& r : metadata::image_to_records(image)) {
    values.push_back(metadata::encode_metadata_record(r.record, r.version));
  }
  std::vector<storage::metadata_batch_record> pending;
  size_t pending_bytes = protocol::batch_layout::header_size;
  auto flush_pending = [&]() -> status {
    if (pending.empty()) return status::success();
    auto st = append_batch(out, pending, timestamp_ms, false, next_offset, id.epoch, max_batch_bytes);
    pending.clear();
    pending_bytes = protocol::batch_layout::header_size;
    return st;
  };
  for (const auto& value : values) {
    const size_t bytes = value.size() + record_overhead_bound;
    if (!pending.empty() && pending_bytes + bytes > static_cast<size_t>(max_batch_bytes)) {
      if (auto st = flush_pending(); !st.ok()) return st;
    }
    pending.push_back({std::nullopt, value});
    pending_bytes += bytes;
  }
  if (auto st = flush_pending(); !st.ok()) return st;

  protocol::snapshot_footer_record footer;
  footer.version_ = snapshot_footer_version;
  const auto footer_key = storage::control_record_key(snapshot_footer_control_type);
  const auto footer_value = protocol::encode_control_value(footer, snapshot_footer_version);
  const storage::metadata_batch_record footer_record{std::span<const uint8_t>(footer_key), footer_value};
  if (auto st = append_batch(out, std::span(&footer_record, 1), timestamp_ms, true, next_offset, id.epoch,
                             max_batch_bytes);
      !st.ok())
    return st;
  return out;
}

result<snapshot_header> load_snapshot_payload(
    std::span<const uint8_t> bytes,
    const std::function<status(const metadata::versioned_metadata_record&)>& on_record) {
  protocol::batch_splitter splitter(bytes);
  std::vector<uint8_t> decompressed;
  int64_t next_offset = 0;
  std::optional<snapshot_header> header;
  bool footer_seen = false;
  while (auto span = splitter.next()) {
    const protocol::record_batch_view batch(*span);
    const std::string where = "batch at offset " + std::to_string(batch.base_offset());
    if (!batch.ok()) return corrupt(where + ": " + std::string(protocol::batch_status_name(batch.status())));
    if (footer_seen) return corrupt(where + " after the footer");
    if (batch.base_offset() != next_offset) {
      return corrupt(where + ": expected offset " + std::to_string(next_offset));
    }
    next_offset = batch.header().next_offset();
    auto reader = batch.records(decompressed);

    if (batch.is_control()) {
      // A header first (followed in its batch by the Raft layer's KRaftVersionRecord and VotersRecord on a
      // kraft.version 1 quorum, which are not metadata), a footer last and alone; no other control record.
      std::optional<int16_t> type;
      std::optional<std::span<const uint8_t>> value;
      int records = 0;
      bool other_than_kraft = false;
      for (const auto& record : reader) {
        const auto record_type = record.key ? storage::control_record_type(*record.key) : std::nullopt;
        if (records > 0 && record_type != raft::kraft_version_control_type &&
            record_type != raft::kraft_voters_control_type)
          other_than_kraft = true;
        if (records == 0) {
          type = record_type;
          value = record.value;
        }
        ++records;
      }
      if (!reader.ok())
        return corrupt(where + ": " + std::string(protocol::batch_status_name(reader.status())));
      const bool kraft_records_allowed = !header && type == snapshot_header_control_type;
      if (records == 0 || !value || (records > 1 && (!kraft_records_allowed || other_than_kraft)))
        return corrupt(where + ": a control batch of " + std::to_string(records) + " records");
      if (!header) {
        if (type != snapshot_header_control_type)
          return corrupt("the first batch is not a SnapshotHeaderRecord");
        auto h = read_control_value<protocol::snapshot_header_record>(*value, snapshot_header_version,
                                                                      "SnapshotHeaderRecord");
        if (!h.ok()) return h.error();
        if (h->version_ != snapshot_header_version)
          return corrupt("SnapshotHeaderRecord of an unknown version");
        header = snapshot_header{h->last_contained_log_timestamp};
        continue;
      }
      if (type != snapshot_footer_control_type) {
        return corrupt(where + ": control record of type " + (type ? std::to_string(*type) : "?") +
                       " inside the snapshot");
      }
      auto f = read_control_value<protocol::snapshot_footer_record>(*value, snapshot_footer_version,
                                                                    "SnapshotFooterRecord");
      if (!f.ok()) return f.error();
      if (f->version_ != snapshot_footer_version)
        return corrupt("SnapshotFooterRecord of an unknown version");
      footer_seen = true;
      continue;
    }

    if (!header) return corrupt("the first batch is not a SnapshotHeaderRecord");
    for (const auto& record : reader) {
      const int64_t offset = batch.offset_of(record);
      if (record.key) return corrupt("record at offset " + std::to_string(offset) + " has a key");
      if (!record.value) return corrupt("record at offset " + std::to_string(offset) + " has no value");
      auto decoded = metadata::decode_metadata_record(*record.value);
      if (!decoded.ok()) {
        return status::error(
            decoded.error().code,
            "metadata snapshot: record at offset " + std::to_string(offset) + ": " + decoded.error().message);
      }
      if (auto st = on_record(*decoded); !st.ok()) return st;
    }
    if (!reader.ok())
      return corrupt(where + ": " + std::string(protocol::batch_status_name(reader.status())));
  }
  if (!splitter.ok()) {
    return corrupt("bytes after offset " + std::to_string(next_offset) + ": " +
                   std::string(protocol::batch_status_name(splitter.status())));
  }
  if (splitter.position() != bytes.size()) return corrupt("trailing bytes after the last batch");
  if (!header) return corrupt("no SnapshotHeaderRecord");
  if (!footer_seen) return corrupt("no SnapshotFooterRecord");
  return *header;
}

result<metadata::metadata_image_ptr> load_snapshot_image(std::span<const uint8_t> bytes,
                                                         raft::offset_and_epoch id,
                                                         const std::string& cluster_id) {
  auto base = std::make_shared<metadata::metadata_image>();
  base->cluster_id = cluster_id;
  metadata::metadata_delta delta(std::move(base));
  auto loaded = load_snapshot_payload(
      bytes, [&](const metadata::versioned_metadata_record& r) { return delta.apply(r.record); });
  if (!loaded.ok()) return loaded.error();
  metadata::metadata_image image = *std::move(delta).build();
  image.metadata_offset = id.offset - 1;
  image.metadata_epoch = id.epoch;
  return metadata::metadata_image_ptr(std::make_shared<const metadata::metadata_image>(std::move(image)));
}

}  // namespace mala::controller
