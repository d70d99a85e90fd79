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

// Kafka's metadata log settings: metadata.log.segment.bytes / metadata.log.segment.ms (1 GiB, 7 days), no
// time or size retention (segments go only after a snapshot covers them), and batches up to the Raft limit.
storage::log_config metadata_log_config() {
  storage::log_config c;
  c.max_message_bytes = max_metadata_batch_bytes;
  c.retention_ms = -1;
  c.retention_bytes = -1;
  return c;
}

}  // namespace

std::filesystem::path metadata_log_partition_dir(const std::filesystem::path& metadata_log_dir) {
  return metadata_log_dir / storage::partition_dir_name(metadata_topic_name, metadata_partition);
}

result<std::unique_ptr<local_metadata_log>> local_metadata_log::open(const std::filesystem::path& metadata_log_dir,
                                                                     local_metadata_log_options options) {
  storage::log_open_options open_options;
  // Every append is fsynced, so the recovery scan finds at most a torn last batch; it is cheap on a log this
  // small, and it never trusts a checkpoint that a crash may have left behind.
  open_options.clean_shutdown = false;
  open_options.recovery_point = 0;
  if (options.clock_ms) open_options.clock_ms = options.clock_ms;
  auto log = storage::partition_log::open(metadata_log_partition_dir(metadata_log_dir),
                                          {std::string(metadata_topic_name), metadata_partition},
                                          metadata_log_config(), std::move(open_options));
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
  protocol::record_batch_builder builder;
  std::vector<uint8_t> value;
  for (const auto& r : records) {
    value = metadata::encode_metadata_record(r.record, r.version);
    builder.add(now, std::nullopt, std::span<const uint8_t>(value));
  }
  std::vector<uint8_t> batch = builder.build();
  if (batch.size() > static_cast<size_t>(max_metadata_batch_bytes)) {
    return status::error(error_code::record_list_too_large,
                         "metadata batch of " + std::to_string(batch.size()) + " bytes exceeds " +
                             std::to_string(max_metadata_batch_bytes));
  }
  const int64_t first = _log->log_end_offset();
  auto appended = _log->append_as_leader(batch, _epoch);
  if (!appended.ok()) {
    return status::error(error_code::kafka_storage_error,
                         "metadata log append failed: " + appended.error().message);
  }
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
          return status::error(decoded.error().code, "metadata log record at offset " + std::to_string(offset) +
                                                         ": " + decoded.error().message);
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
