// A metadata log for unit tests of the controller and of the handlers that use it: an append is committed
// once it is written and fsynced to <dir>/__cluster_metadata-0 (no quorum, no Raft replica to run). The bytes
// are what raft::partition_raft_log reads: v2 record batches stamped with the epoch, each record with a null
// key and the metadata record envelope (metadata_records.h) as its value (Kafka's MetadataRecordSerde), so a
// log written here opens as a node's Raft log. One writer, one thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mala/controller/metadata_log.h"
#include "mala/protocol/record_batch.h"
#include "mala/storage/metadata_partition.h"
#include "mala/storage/partition_log.h"
#include "mala/storage/segment_files.h"

namespace mala::controller {

namespace local_metadata_log_detail {
inline int64_t system_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace local_metadata_log_detail

struct local_metadata_log_options {
  // The Raft epoch stamped on batches (Kafka's first epoch is 1).
  int32_t epoch = 1;
  std::function<int64_t()> clock_ms;  // batch timestamps; the system clock when unset
};

class local_metadata_log final : public metadata_log {
 public:
  // Opens (creating when absent) <metadata_log_dir>/__cluster_metadata-0 and recovers it (a torn tail left by
  // a crash is cut: it was never acknowledged as committed).
  static result<std::unique_ptr<local_metadata_log>> open(const std::filesystem::path& metadata_log_dir,
                                                          local_metadata_log_options options = {});
  ~local_metadata_log() override;

  int64_t end_offset() const override;
  int64_t committed_offset() const override;
  int32_t epoch() const override { return _epoch; }
  result<metadata_append_result> append(
      std::span<const metadata::versioned_metadata_record> records) override;
  status replay(int64_t from_offset, const metadata_replay_callback& callback) const override;

  // Flushes and closes the underlying log (also done by the destructor).
  status close();
  std::filesystem::path dir() const;

 private:
  local_metadata_log(std::unique_ptr<storage::partition_log> log, local_metadata_log_options options);

  std::unique_ptr<storage::partition_log> _log;
  int32_t _epoch;
  std::function<int64_t()> _clock_ms;
};

inline result<std::unique_ptr<local_metadata_log>> local_metadata_log::open(
    const std::filesystem::path& metadata_log_dir, local_metadata_log_options options) {
  // Every append is fsynced, so the recovery scan finds at most a torn last batch; it is cheap on a log this
  // small, and it never trusts a checkpoint that a crash may have left behind.
  auto log = storage::open_metadata_partition(metadata_log_dir, options.clock_ms);
  if (!log.ok()) return log.error();
  return std::unique_ptr<local_metadata_log>(new local_metadata_log(std::move(*log), std::move(options)));
}

inline local_metadata_log::local_metadata_log(std::unique_ptr<storage::partition_log> log,
                                              local_metadata_log_options options)
    : _log(std::move(log)),
      _epoch(options.epoch),
      _clock_ms(options.clock_ms ? std::move(options.clock_ms)
                                 : std::function<int64_t()>(local_metadata_log_detail::system_clock_ms)) {}

inline local_metadata_log::~local_metadata_log() {
  (void)close();
}

inline status local_metadata_log::close() {
  return _log ? _log->close() : status::success();
}

inline std::filesystem::path local_metadata_log::dir() const {
  return _log->dir();
}

inline int64_t local_metadata_log::end_offset() const {
  return _log->log_end_offset();
}

inline int64_t local_metadata_log::committed_offset() const {
  // Everything written and synced is committed; append() undoes anything it could not sync.
  return _log->log_end_offset() - 1;
}

inline result<metadata_append_result> local_metadata_log::append(
    std::span<const metadata::versioned_metadata_record> records) {
  if (records.empty()) return status::error(error_code::invalid_request, "empty metadata log append");
  const int64_t now = _clock_ms();
  std::vector<std::vector<uint8_t>> values;
  std::vector<storage::metadata_batch_record> batch_records;
  values.reserve(records.size());
  batch_records.reserve(records.size());
  for (const auto& r : records) {
    values.push_back(metadata::encode_metadata_record(r.record, r.version));
    batch_records.push_back({std::nullopt, values.back()});
  }
  auto batch = storage::build_metadata_batch(batch_records, now);
  if (!batch.ok()) return batch.error();
  const int64_t first = _log->log_end_offset();
  auto appended = storage::append_metadata_batches(*_log, *batch, _epoch);
  if (!appended.ok()) return appended.error();
  // Committed = written and synced. If the sync fails the batch was never committed: cut it so that
  // neither a later replay nor a later append sees it.
  if (auto synced = _log->flush(); !synced.ok()) {
    (void)_log->truncate_to(first);
    return status::error(error_code::kafka_storage_error, "metadata log fsync failed: " + synced.message);
  }
  return metadata_append_result{appended->first_offset, appended->last_offset, _epoch};
}

inline status local_metadata_log::replay(int64_t from_offset,
                                         const metadata_replay_callback& callback) const {
  int64_t next = std::max(from_offset, _log->log_start_offset());
  const int64_t end = _log->log_end_offset();
  std::vector<uint8_t> decompressed;
  while (next < end) {
    auto read = _log->read(next, max_metadata_batch_bytes, end, /*min_one_batch=*/true);
    if (!read.ok()) return read.error();
    if (!read->data) break;
    const auto& slice = *read->data;
    auto bytes = slice.file->read(slice.position, slice.size);
    if (!bytes.ok()) return bytes.error();
    protocol::batch_splitter splitter(*bytes);
    int64_t progressed = next;
    while (auto span = splitter.next()) {
      protocol::record_batch_view batch(*span);
      if (!batch.ok()) {
        return status::error(error_code::corrupt_message,
                             "metadata log batch at offset " + std::to_string(batch.base_offset()) + ": " +
                                 std::string(protocol::batch_status_name(batch.status())));
      }
      progressed = batch.header().next_offset();
      if (batch.is_control()) continue;
      const int32_t epoch = batch.header().partition_leader_epoch;
      auto reader = batch.records(decompressed);
      for (const auto& record : reader) {
        const int64_t offset = batch.offset_of(record);
        if (offset < next) continue;
        if (!record.value) {
          return status::error(error_code::corrupt_message,
                               "metadata log record at offset " + std::to_string(offset) + " has no value");
        }
        auto decoded = metadata::decode_metadata_record(*record.value);
        if (!decoded.ok()) {
          return status::error(
              decoded.error().code,
              "metadata log record at offset " + std::to_string(offset) + ": " + decoded.error().message);
        }
        if (auto st = callback(*decoded, offset, epoch); !st.ok()) return st;
      }
      if (!reader.ok()) {
        return status::error(error_code::corrupt_message,
                             "metadata log batch at offset " + std::to_string(batch.base_offset()) + ": " +
                                 std::string(protocol::batch_status_name(reader.status())));
      }
    }
    if (progressed <= next) {
      return status::error(error_code::corrupt_message,
                           "metadata log read made no progress at offset " + std::to_string(next));
    }
    next = progressed;
  }
  return status::success();
}

}  // namespace mala::controller
