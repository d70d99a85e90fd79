#include "handlers/transaction_common.h"

#include <optional>

#include "handlers/admin_common.h"
#include "handlers/allocate_producer_ids.h"
#include "mala/broker/producer_id_allocator.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

asio::awaitable<bool> ensure_producer_id_block(request_context& ctx) {
  const auto& services = ctx.services;
  auto* allocator = services.producer_ids;
  if (!allocator || (!services.controller && !services.controller_link)) co_return false;
  const bool needs_block =
      co_await on_home_shard(services, [allocator] { return allocator->remaining() <= 0; });
  if (!needs_block) co_return true;
  const int32_t node_id = services.node_id;
  allocate_producer_ids_handler::request allocate;
  allocate.broker_id = node_id;
  const auto image = services.metadata->current();
  auto self = image->brokers.find(node_id);
  allocate.broker_epoch = self == image->brokers.end() ? -1 : self->second.epoch;
  auto answer = co_await on_controller<allocate_producer_ids_handler::response>(
      ctx, allocate, 0, [&allocate](controller::quorum_controller& c) {
        return allocate_producer_ids_handler::allocate_on_controller(c, allocate);
      });
  if (!answer.ok() || answer.response->error_code != 0) co_return false;
  const controller::producer_id_block block{node_id, answer.response->producer_id_start,
                                            answer.response->producer_id_len};
  co_return co_await on_home_shard(services, [allocator, block] { return allocator->install(block).ok(); });
}

}  // namespace mala::broker::handlers
