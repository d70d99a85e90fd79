#include "mala/controller/producer_id_control.h"

#include <limits>

namespace mala::controller {

result<producer_id_block> allocate_producer_ids(metadata_writer& writer, int32_t broker_id,
                                                int64_t broker_epoch) {
  const metadata::metadata_image_ptr image = writer.image();
  auto broker = image->brokers.find(broker_id);
  if (broker == image->brokers.end()) {
    return status::error(error_code::stale_broker_epoch,
                         "No broker registration found for broker id " + std::to_string(broker_id));
  }
  if (broker->second.epoch != broker_epoch) {
    return status::error(error_code::stale_broker_epoch,
                         "Expected broker epoch " + std::to_string(broker->second.epoch) +
                             ", but got broker epoch " + std::to_string(broker_epoch));
  }
  const int64_t first = image->next_producer_id;
  if (first > std::numeric_limits<int64_t>::max() - producer_id_block_size) {
    return status::error(
        error_code::unknown_server_error,
        "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type "
        "limit");
  }
  protocol::producer_ids_record record;
  record.broker_id = broker_id;
  record.broker_epoch = broker_epoch;
  record.next_producer_id = first + producer_id_block_size;
  if (auto st = writer.write({versioned(record, record_v0)}); !st.ok()) return st;
  return producer_id_block{broker_id, first, producer_id_block_size};
}

}  // namespace mala::controller
