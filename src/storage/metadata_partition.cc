#include "mala/storage/metadata_partition.h"

#include <chrono>
#include <string>
#include <utility>

#include "mala/protocol/record_batch.h"
#include "mala/storage/segment_files.h"

namespace mala::storage {

namespace {

int64_t system_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

log_config metadata_log_config() {
  log_config c;
  c.max_message_bytes = max_metadata_batch_bytes;
  c.retention_ms = -1;
  c.retention_bytes = -1;
  return c;
}

std::filesystem::path metadata_partition_dir(const std::filesystem::path& metadata_log_dir) {
  return metadata_log_dir / partition_dir_name(metadata_topic_name, metadata_partition);
}

result<std::unique_ptr<partition_log>> open_metadata_partition(const std::filesystem::path& metadata_log_dir,
                                                               std::function<int64_t()> clock_ms,
                                                               metadata_segment_settings segments,
                                                               std::shared_ptr<file_worker> worker) {
  log_open_options options;
  options.worker = std::move(worker);
  options.clean_shutdown = false;
  options.recovery_point = 0;
  options.clock_ms = clock_ms ? std::move(clock_ms) : std::function<int64_t()>(system_clock_ms);
  log_config config = metadata_log_config();
  if (segments.segment_bytes) config.segment_bytes = *segments.segment_bytes;
  if (segments.segment_ms) config.segment_ms = *segments.segment_ms;
  return partition_log::open(metadata_partition_dir(metadata_log_dir),
                             {std::string(metadata_topic_name), metadata_partition}, config,
                             std::move(options));
}

std::array<uint8_t, 4> control_record_key(int16_t type) {
  return {0, 0, static_cast<uint8_t>(static_cast<uint16_t>(type) >> 8), static_cast<uint8_t>(type & 0xff)};
}

std::optional<int16_t> control_record_type(std::span<const uint8_t> key) {
  if (key.size() < 4) return std::nullopt;
  return static_cast<int16_t>((key[2] << 8) | key[3]);
}

result<std::vector<uint8_t>> build_metadata_batch(std::span<const metadata_batch_record> records,
                                                  int64_t timestamp_ms, bool control) {
  if (records.empty()) return status::error(error_code::invalid_request, "empty metadata batch");
  protocol::record_batch_builder builder;
  builder.control(control);
  for (const auto& r : records)
    builder.add(timestamp_ms, r.key, std::optional<std::span<const uint8_t>>(r.value));
  std::vector<uint8_t> batch = builder.build();
  if (batch.size() > static_cast<size_t>(max_metadata_batch_bytes)) {
    return status::error(error_code::record_list_too_large,
                         "metadata batch of " + std::to_string(batch.size()) + " bytes exceeds " +
                             std::to_string(max_metadata_batch_bytes));
  }
  return batch;
}

result<append_result> append_metadata_batches(partition_log& log, std::span<uint8_t> batches, int32_t epoch) {
  auto appended = log.append_as_leader(batches, epoch);
  if (!appended.ok()) {
    return status::error(error_code::kafka_storage_error,
                         "metadata log append failed: " + appended.error().message);
  }
  return appended;
}

}  // namespace mala::storage
