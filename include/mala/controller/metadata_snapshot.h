// The controller's snapshots of __cluster_metadata (KIP-630) in Kafka's layout, the payload that
// raft::raft_log::write_snapshot stores as a <offset>-<epoch>.checkpoint file (Kafka's RecordsSnapshotWriter
// / RecordsSnapshotReader):
//
//   a control batch holding one SnapshotHeaderRecord   (control record type 3; Version 0,
//                                                        LastContainedLogTimestamp), followed on a
//                                                        kraft.version 1 quorum by a KRaftVersionRecord and
//                                                        a VotersRecord (raft/voter_set.h; skipped on load)
//   data batches of metadata records                    (null keys, MetadataRecordSerde values, as
//                                                        storage::build_metadata_batch builds them, none
//                                                        larger than storage::max_metadata_batch_bytes)
//   a control batch holding one SnapshotFooterRecord    (control record type 4; Version 0)
//
// Control record values are MessageUtil.toByteBuffer: the int16 schema version (0), then the body. Batch
// offsets run from 0 across the whole snapshot and every batch carries the snapshot id's epoch as its
// partition leader epoch, as Kafka's BatchAccumulator writes them.
//
// Pure functions on bytes: callable from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "mala/common/result.h"
#include "mala/metadata/metadata_image.h"
#include "mala/metadata/metadata_records.h"
#include "mala/raft/log.h"
#include "mala/raft/voter_set.h"
#include "mala/storage/metadata_partition.h"

namespace mala::controller {

// Kafka's ControlRecordType.SNAPSHOT_HEADER / SNAPSHOT_FOOTER.
inline constexpr int16_t snapshot_header_control_type = 3;
inline constexpr int16_t snapshot_footer_control_type = 4;
// ControlRecordUtils.SNAPSHOT_HEADER_CURRENT_VERSION / SNAPSHOT_FOOTER_CURRENT_VERSION (the schema version
// and the records' own Version field).
inline constexpr int16_t snapshot_header_version = 0;
inline constexpr int16_t snapshot_footer_version = 0;

// The snapshot `id` of `image`: its records (metadata::image_to_records) between a header and a footer.
// `timestamp_ms` is the header's LastContainedLogTimestamp (the append time of the last entry the snapshot
// contains) and every batch's timestamp. `max_batch_bytes` bounds each data batch (tests use small ones).
// record_list_too_large when one record alone does not fit a batch.
// `raft_records` (raft::voter_set_control_records on a kraft.version 1 quorum) go into the header's batch
// after the header, as Kafka's RecordsSnapshotWriter puts them.
result<std::vector<uint8_t>> build_snapshot_payload(
    const metadata::metadata_image& image, raft::offset_and_epoch id, int64_t timestamp_ms,
    int32_t max_batch_bytes = storage::max_metadata_batch_bytes,
    std::span<const raft::control_record> raft_records = {});

// What a snapshot's header says.
struct snapshot_header {
  int64_t last_contained_log_timestamp = -1;
};

// Reads a payload built as above, calling `on_record` for each metadata record in order (its error stops
// the load and is returned). Refuses, with corrupt_message, anything but exactly that layout: bytes that do
// not split into whole batches, a batch whose CRC or records do not check, offsets that do not run on from
// 0, a first batch other than the header control batch or a last one other than the footer, any other
// control batch, more than one record in a header/footer batch, a keyed data record, header or footer
// versions other than 0, bytes after the footer; and a record metadata::decode_metadata_record refuses with
// its error. Returns the header on success.
result<snapshot_header> load_snapshot_payload(
    std::span<const uint8_t> bytes,
    const std::function<status(const metadata::versioned_metadata_record&)>& on_record);

// load_snapshot_payload into an empty image with `cluster_id` through metadata_delta; the image's
// metadata_offset / metadata_epoch are id.offset - 1 and id.epoch (the last entry the snapshot contains).
result<metadata::metadata_image_ptr> load_snapshot_image(std::span<const uint8_t> bytes,
                                                         raft::offset_and_epoch id,
                                                         const std::string& cluster_id);

}  // namespace mala::controller
