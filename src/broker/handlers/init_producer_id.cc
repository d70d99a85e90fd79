#include "handlers/init_producer_id.h"

#include "handlers/admin_common.h"
#include "handlers/allocate_producer_ids.h"
#include "mala/broker/producer_id_allocator.h"
#include "mala/common/logging.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

namespace {

// RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH.
constexpr int64_t no_producer_id = -1;
constexpr int16_t no_producer_epoch = -1;
// transaction.max.timeout.ms default (15 minutes).
constexpr int32_t default_transaction_max_timeout_ms = 900'000;

init_producer_id_handler::response error_response(error_code code) {
  init_producer_id_handler::response resp;
  resp.error_code = to_wire(code);
  resp.producer_id = no_producer_id;
  resp.producer_epoch = no_producer_epoch;
  return resp;
}

}  // namespace

asio::awaitable<std::optional<init_producer_id_handler::response>> init_producer_id_handler::handle_async(
    request_context& ctx, request req, int16_t /*version*/) {
  const auto& services = ctx.services;
  if ((req.producer_id == no_producer_id) != (req.producer_epoch == no_producer_epoch)) {
    co_return error_response(error_code::invalid_request);
  }
  if (req.transactional_id) {
    if (req.transactional_id->empty()) co_return error_response(error_code::invalid_request);
    const int32_t max_timeout = services.config ? services.config->get_int("transaction.max.timeout.ms")
                                                      .value_or(default_transaction_max_timeout_ms)
                                                : default_transaction_max_timeout_ms;
    if (req.transaction_timeout_ms <= 0 || req.transaction_timeout_ms > max_timeout) {
      co_return error_response(error_code::invalid_transaction_timeout);
    }
    co_return error_response(error_code::coordinator_not_available);
  }

  auto* allocator = services.producer_ids;
  if (!allocator || (!services.controller && !services.controller_link)) {
    co_return error_response(error_code::coordinator_load_in_progress);
  }
  const int32_t node_id = services.node_id;
  // A new block from the active controller when this broker's is used up (AllocateProducerIds, forwarded
  // when the controller is on another node); the controller checks the broker epoch of the registration.
  const bool needs_block =
      co_await on_home_shard(services, [allocator] { return allocator->remaining() <= 0; });
  std::optional<controller::producer_id_block> block;
  if (needs_block) {
    allocate_producer_ids_handler::request allocate;
    allocate.broker_id = node_id;
    const auto image = services.metadata->current();
    auto self = image->brokers.find(node_id);
    allocate.broker_epoch = self == image->brokers.end() ? -1 : self->second.epoch;
    auto answer = co_await on_controller<allocate_producer_ids_handler::response>(
        ctx, allocate, 0, [&allocate](controller::quorum_controller& c) {
          return allocate_producer_ids_handler::allocate_on_controller(c, allocate);
        });
    if (answer.ok() && answer.response->error_code == 0) {
      block = controller::producer_id_block{node_id, answer.response->producer_id_start,
                                            answer.response->producer_id_len};
    }
  }
  // (co_spawn needs a default-constructible result, hence the optional.)
  auto id = co_await on_home_shard(services, [allocator, &block]() -> std::optional<result<int64_t>> {
    return allocator->next_id([&block]() -> result<controller::producer_id_block> {
      if (block) return *block;
      return status::error(error_code::coordinator_load_in_progress,
                           "no producer id block from the controller");
    });
  });
  if (!id->ok()) {
    subsystem_logger("broker")->warn("no producer id for an idempotent producer: {}", id->error().message);
    co_return error_response(error_code::coordinator_load_in_progress);
  }
  response resp;
  resp.producer_id = id->value();
  resp.producer_epoch = 0;
  co_return resp;
}

}  // namespace mala::broker::handlers
