// Hands out producer ids for idempotent producers (InitProducerId without a transactional id) from blocks of
// ids the controller allocates to this broker (AllocateProducerIds, KIP-730; Kafka's RPCProducerIdManager).
// A block is used up in order; the next one is fetched when the current one runs out. A block that is not
// above the previous one, or is empty or negative, is refused (Kafka's sanity checks), so an id is never
// handed out twice.
//
// Threads: used on the home shard only (where the controller lives); not synchronised.
#pragma once

#include <cstdint>
#include <functional>

#include "mala/common/result.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker {

class producer_id_allocator {
 public:
  // Fetches the next block for this broker (the controller's allocate_producer_ids).
  using block_source = std::function<result<controller::producer_id_block>()>;

  // The next unused producer id; asks `fetch_block` for a new block when the current one is exhausted. Fails
  // with the block source's error, or unknown_server_error for a block that fails the checks.
  result<int64_t> next_id(const block_source& fetch_block);

  // Makes `block` the current block when the current one is used up (nothing happens otherwise); fails the
  // same checks as next_id.
  status install(const controller::producer_id_block& block);

  // The ids left in the current block, for tests and logs.
  int64_t remaining() const { return _end - _next; }

 private:
  int64_t _next = 0;  // next id to hand out
  int64_t _end = 0;   // one past the current block
};

}  // namespace mala::broker
