// What the controller's managers (cluster_control, replication_control, configuration_control,
// producer_id_control, feature_control) have in common: the record batches they build, the record versions
// they write, the per-item answer of a request (api_error), and the metadata_writer through which a batch
// reaches the metadata log. quorum_controller implements metadata_writer over its log; unit tests of a
// manager implement it over a plain image.
//
// Threads: a manager and its writer are used on the controller's thread only (shard 0).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mala/common/result.h"
#include "mala/metadata/metadata_image.h"
#include "mala/metadata/metadata_records.h"

namespace mala::controller {

using record_list = std::vector<metadata::versioned_metadata_record>;

// The record versions Kafka writes at metadata.version 4.0-IV1 and later, as far as Mala's schemas go (see
// bootstrap_metadata_version): MetadataVersion.registerBrokerRecordVersion() / partitionRecordVersion() /
// partitionChangeRecordVersion(), v0 for every record Kafka always writes at v0 (FeatureLevelRecord "cannot
// advance beyond 0"); BrokerRegistrationChangeRecord v0 for fencing changes and v1 for InControlledShutdown,
// the version that field needs.
inline constexpr int16_t register_broker_record_version = 3;
inline constexpr int16_t partition_record_version = 2;
inline constexpr int16_t partition_change_record_version = 2;
inline constexpr int16_t controlled_shutdown_change_version = 1;
inline constexpr int16_t record_v0 = 0;

// QuorumController.MAX_RECORDS_PER_USER_OP: a request that would write more records fails as a whole with
// POLICY_VIOLATION "Unable to perform excessively large batch operation.".
inline constexpr size_t max_records_per_user_op = 10000;

template <typename T>
metadata::versioned_metadata_record versioned(T record, int16_t version) {
  return metadata::versioned_metadata_record{metadata::metadata_record(std::move(record)), version};
}

// Kafka's ApiError: a code and a message that is null when Kafka sends none (ApiError.NONE, or an exception
// created without a message).
struct api_error {
  error_code code = error_code::none;
  std::optional<std::string> message;
  bool ok() const { return code == error_code::none; }
};

inline api_error error_of(error_code code, std::string message) {
  return {code, std::move(message)};
}
inline api_error error_of(const status& s) {
  return {s.code, s.message};
}
// `new ApiError(Errors.X)`: the error's default message.
api_error default_error(error_code code);
// The code a failed metadata write answers with in APIs whose errors are per request or partition
// (AlterPartition, ElectLeaders, AlterPartitionReassignments): NOT_CONTROLLER when the leadership was lost
// (the client retries elsewhere), UNKNOWN_SERVER_ERROR for anything else.
error_code write_failure_code(const status& s);

// How a manager writes: the active controller's metadata log and the image of everything written so far.
class metadata_writer {
 public:
  virtual ~metadata_writer() = default;
  // The image after every write so far (committed or not).
  virtual const metadata::metadata_image_ptr& image() const = 0;
  // The offset the next record written gets (a broker epoch is its registration's offset).
  virtual int64_t next_offset() const = 0;
  // Applies `records` to a copy of the image (so that a record the image would refuse is never written),
  // appends them as one batch, and makes the result the image. Nothing changes when it fails.
  virtual status write(const record_list& records) = 0;
};

// The end of a user operation: a batch too large for one operation is refused whole
// (max_records_per_user_op, POLICY_VIOLATION), a validate_only request writes nothing, anything else is
// written. Returns the error that then answers every item of the request (none when it went through).
api_error write_user_operation(metadata_writer& writer, const record_list& records, bool too_large,
                               bool validate_only);

}  // namespace mala::controller
