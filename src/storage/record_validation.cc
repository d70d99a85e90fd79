#include "mala/storage/record_validation.h"

#include <limits>

namespace mala::storage {

namespace {

namespace proto = mala::protocol;

constexpr int64_t int64_max = std::numeric_limits<int64_t>::max();
constexpr int64_t int64_min = std::numeric_limits<int64_t>::min();

int64_t saturating_sub(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_sub_overflow(a, b, &out)) return b > 0 ? int64_min : int64_max;
  return out;
}

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out)) return b > 0 ? int64_max : int64_min;
  return out;
}

// Kafka's recordHasInvalidTimestamp, without overflowing on hostile timestamps: the distance between the
// broker's clock and the record is compared as an unsigned number.
bool outside_bounds(int64_t timestamp, int64_t now_ms, const log_config& config) {
  if (timestamp < now_ms) {
    const uint64_t behind = static_cast<uint64_t>(now_ms) - static_cast<uint64_t>(timestamp);
    return config.message_timestamp_before_max_ms >= 0 &&
           behind > static_cast<uint64_t>(config.message_timestamp_before_max_ms);
  }
  const uint64_t ahead = static_cast<uint64_t>(timestamp) - static_cast<uint64_t>(now_ms);
  return config.message_timestamp_after_max_ms >= 0 &&
         ahead > static_cast<uint64_t>(config.message_timestamp_after_max_ms);
}

std::string out_of_range_message(int64_t timestamp, int64_t offset, int64_t now_ms,
                                 const log_config& config) {
  return "Timestamp " + std::to_string(timestamp) + " of message with offset " + std::to_string(offset) +
         " is out of range. The timestamp should be within [" +
         std::to_string(saturating_sub(now_ms, config.message_timestamp_before_max_ms)) + ", " +
         std::to_string(saturating_add(now_ms, config.message_timestamp_after_max_ms)) + "]";
}

bool compacted(const log_config& config) {
  return config.cleanup == cleanup_policy::compact || config.cleanup == cleanup_policy::compact_and_delete;
}

// A record error and the error code it stands for (Kafka's ApiRecordError).
struct api_record_error {
  error_code code;
  record_error error;
};

// LogValidator.validateKey then validateTimestamp for one record.
std::optional<api_record_error> check_record(const proto::record_batch_header& header,
                                             const proto::record_view& r, int64_t timestamp, int32_t index,
                                             const log_config& config, int64_t now_ms) {
  if (compacted(config) && !r.key) {
    return api_record_error{error_code::invalid_record,
                            {index, "Compacted topic cannot accept message without key"}};
  }
  if (!config.log_append_time && timestamp != proto::no_timestamp) {
    if (outside_bounds(timestamp, now_ms, config)) {
      return api_record_error{
          error_code::invalid_timestamp,
          {index, out_of_range_message(timestamp, header.base_offset + r.offset_delta, now_ms, config)}};
    }
  } else if (header.timestamp_kind() == proto::timestamp_type::log_append_time) {
    return api_record_error{error_code::invalid_timestamp,
                            {index, "Invalid timestamp type in message at index " + std::to_string(index) +
                                        ". Producer should not set timestamp type to LogAppendTime."}};
  }
  return std::nullopt;
}

record_validation_failure failure_of(const std::vector<api_record_error>& found) {
  record_validation_failure out;
  bool timestamps = false;
  std::vector<record_error> errors;
  for (const auto& e : found) {
    timestamps = timestamps || e.code == error_code::invalid_timestamp;
    errors.push_back(e.error);
  }
  if (timestamps) {
    out.code = error_code::invalid_timestamp;
    out.message = "One or more records have been rejected due to invalid timestamp";
  } else {
    out.code = error_code::invalid_record;
    out.message = "One or more records have been rejected due to " + std::to_string(errors.size()) +
                  " record errors in total, and only showing the first three errors at most: [";
    for (size_t i = 0; i < errors.size() && i < 3; ++i) {
      out.message += (i ? ", " : "") + std::string("RecordError(batchIndex=") +
                     std::to_string(errors[i].batch_index) + ", message='" + errors[i].message + "')";
    }
    out.message += "]";
  }
  out.record_errors = std::move(errors);
  return out;
}

}  // namespace

std::optional<record_validation_failure> validate_record_contents(std::span<const uint8_t> batch,
                                                                  const log_config& config, int64_t now_ms) {
  proto::record_batch_view view(batch, proto::crc_check::skip);
  const auto& h = view.header();
  std::vector<api_record_error> errors;

  if (view.is_compressed() && !compacted(config)) {
    // Stored as sent: the header's timestamps stand for the records (the producer sets maxTimestamp to the
    // largest record timestamp, and baseTimestamp to the first).
    if (h.timestamp_kind() == proto::timestamp_type::log_append_time) {
      errors.push_back({error_code::invalid_timestamp,
                        {0,
                         "Invalid timestamp type in batch. Producer should not set timestamp type to "
                         "LogAppendTime."}});
    } else if (!config.log_append_time) {
      for (int64_t ts : {h.base_timestamp, h.max_timestamp}) {
        if (ts != proto::no_timestamp && outside_bounds(ts, now_ms, config)) {
          errors.push_back(
              {error_code::invalid_timestamp, {0, out_of_range_message(ts, h.base_offset, now_ms, config)}});
          break;
        }
      }
    }
    if (errors.empty()) return std::nullopt;
    return failure_of(errors);
  }

  std::vector<uint8_t> buffer;
  auto reader = view.records(buffer);
  int32_t index = 0;
  for (const auto& r : reader) {
    if (auto e = check_record(h, r, view.timestamp_of(r), index, config, now_ms))
      errors.push_back(std::move(*e));
    ++index;
  }
  if (!reader.ok()) {
    // Uncompressed records were already read by partition_log; only a compressed batch can fail here.
    record_validation_failure out;
    out.code = error_code::corrupt_message;
    out.message = "cannot read the records of a compressed batch: " +
                  std::string(proto::batch_status_name(reader.status()));
    return out;
  }
  if (errors.empty()) return std::nullopt;
  return failure_of(errors);
}

bool record_contents_need_check(const proto::record_batch_header& header, const proto::record_scan& scan,
                                const log_config& config, int64_t now_ms) {
  if (compacted(config) && scan.null_key) return true;
  if (header.timestamp_kind() == proto::timestamp_type::log_append_time) return true;
  if (config.log_append_time) return false;
  return outside_bounds(scan.min_timestamp, now_ms, config) ||
         outside_bounds(scan.max_timestamp, now_ms, config);
}

status validate_client_batch(const proto::record_batch_header& batch) {
  if (batch.is_control()) {
    return status::error(error_code::invalid_record, "Clients are not allowed to write control records");
  }
  if (batch.last_offset_delta < 0) {
    return status::error(error_code::invalid_record, "Batch has an invalid offset range: lastOffsetDelta " +
                                                         std::to_string(batch.last_offset_delta));
  }
  if (batch.record_count <= 0) {
    return status::error(error_code::invalid_record,
                         "Invalid reported count for record batch: " + std::to_string(batch.record_count));
  }
  if (static_cast<int64_t>(batch.last_offset_delta) + 1 != batch.record_count) {
    return status::error(error_code::invalid_record,
                         "Inconsistent batch offset range [0, " + std::to_string(batch.last_offset_delta) +
                             "] and count of records " + std::to_string(batch.record_count));
  }
  if (batch.producer_id > proto::no_producer_id && batch.base_sequence < 0) {
    return status::error(error_code::invalid_record,
                         "Invalid sequence number " + std::to_string(batch.base_sequence) +
                             " in record batch with producerId " + std::to_string(batch.producer_id));
  }
  return status::success();
}

result<produced_batch> validate_produced_records(std::span<uint8_t> records) {
  proto::batch_splitter splitter(records);
  auto first = splitter.next();
  if (!first) {
    if (splitter.status() == proto::batch_status::too_short) {
      return status::error(error_code::corrupt_message, "record batch size is smaller than a batch header");
    }
    return status::error(error_code::invalid_record,
                         "Produce requests with version 3 and above must have at least one record batch per "
                         "partition");
  }
  auto header = proto::parse_batch_header(*first);
  if (!header || header->magic != proto::current_magic) {
    return status::error(
        error_code::invalid_record,
        "Produce requests with version 3 and above are only allowed to contain record batches "
        "with magic version 2");
  }
  if (splitter.next()) {
    return status::error(error_code::invalid_record,
                         "Produce requests with version 3 and above are only allowed to contain exactly one "
                         "record batch per partition");
  }
  if (auto st = validate_client_batch(*header); !st.ok()) return st;
  // The whole field: bytes after the batch that do not make another one are the log's CORRUPT_MESSAGE.
  return produced_batch{records, *header};
}

}  // namespace mala::storage
