#include "mala/controller/metadata_log.h"

#include <chrono>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/storage/segment_files.h"

namespace mala::controller {

namespace {

int64_t system_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::filesystem::path metadata_log_partition_dir(const std::filesystem::path& metadata_log_dir) {
  return storage::metadata_partition_dir(metadata_log_dir);
}

result<std::unique_ptr<local_metadata_log>> local_metadata_log::open(
    const std::filesystem::path& metadata_log_dir, local_metadata_log_options options) {
  // Every append is fsynced, so the recovery scan finds at most a torn last batch; it is cheap on a log this
  // small, and it never trusts a checkpoint that a crash may have left behind.
  auto log = storage::open_metadata_partition(metadata_log_dir, options.clock_ms);
  if (!log.ok()) return log.error();
  return std::unique_ptr<local_metadata_log>(new local_metadata_log(std::move(*log), std::move(options)));
}

local_metadata_log::local_metadata_log(std::unique_ptr<storage::partition_log> log,
                                       local_metadata_log_options options)
    : _log(std::move(log)),
      _epoch(options.epoch),
      _clock_ms(options.clock_ms ? std::move(options.clock_ms) : std::function<int64_t()>(system_clock_ms)) {}

local_metadata_log::~local_metadata_log() {
  (void)close();
}

status local_metadata_log::close() {
  return _log ? _log->close() : status::success();
}

const std::filesystem::path& local_metadata_log::dir() const {
  return _log->dir();
}

int64_t local_metadata_log::end_offset() const {
  return _log->log_end_offset();
}

int64_t local_metadata_log::committed_offset() const {
  // A single voter commits what it has written and synced; append() undoes anything it could not sync.
  return _log->log_end_offset() - 1;
}

result<metadata_append_result> local_metadata_log::append(
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
  // Commit = durable on the only voter. If the sync fails the batch was never committed: cut it so that
  // neither a later replay nor a later append sees it.
  if (auto synced = _log->flush(); !synced.ok()) {
    (void)_log->truncate_to(first);
    return status::error(error_code::kafka_storage_error, "metadata log fsync failed: " + synced.message);
  }
  return metadata_append_result{appended->first_offset, appended->last_offset, _epoch};
}

status local_metadata_log::replay(int64_t from_offset, const metadata_replay_callback& callback) const {
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
