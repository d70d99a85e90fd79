#include "mala/controller/controller_records.h"

namespace mala::controller {

api_error default_error(error_code code) {
  switch (code) {
    case error_code::unknown_topic_or_partition:
      return {code, "This server does not host this topic-partition."};
    case error_code::unknown_topic_id:
      return {code, "This server does not host this topic ID."};
    default:
      return {code, std::string(error_name(code))};
  }
}

error_code write_failure_code(const status& s) {
  return s.code == error_code::not_controller ? error_code::not_controller : error_code::unknown_server_error;
}

api_error write_user_operation(metadata_writer& writer, const record_list& records, bool too_large,
                               bool validate_only) {
  if (too_large)
    return {error_code::policy_violation, "Unable to perform excessively large batch operation."};
  if (validate_only) return {};
  if (auto st = writer.write(records); !st.ok()) return error_of(st);
  return {};
}

}  // namespace mala::controller
