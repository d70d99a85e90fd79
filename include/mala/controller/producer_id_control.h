// Producer-id blocks (Kafka's ProducerIdControlManager, KIP-730): AllocateProducerIds hands each broker the
// next block of producer_id_block_size ids and records the new high-water mark as a ProducerIdsRecord.
//
// Threads: used on the controller's thread only (shard 0), like the metadata_writer it writes through.
#pragma once

#include <cstdint>

#include "mala/common/result.h"
#include "mala/controller/controller_records.h"

namespace mala::controller {

// A block of producer ids handed to one broker (AllocateProducerIds, KIP-730): [first_id, first_id + size).
struct producer_id_block {
  int32_t assigned_broker_id = -1;
  int64_t first_id = -1;
  int32_t size = 0;
};
// ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
inline constexpr int32_t producer_id_block_size = 1000;

// ProducerIdControlManager.generateNextProducerId: STALE_BROKER_EPOCH for an unregistered broker or another
// epoch, UNKNOWN_SERVER_ERROR once the ids are exhausted; otherwise the block, written before it is returned.
result<producer_id_block> allocate_producer_ids(metadata_writer& writer, int32_t broker_id,
                                                int64_t broker_epoch);

}  // namespace mala::controller
