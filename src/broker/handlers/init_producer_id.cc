#include "handlers/init_producer_id.h"

#include "handlers/admin_common.h"
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

  auto* controller = services.controller;
  auto* allocator = services.producer_ids;
  if (!controller || !allocator) co_return error_response(error_code::coordinator_load_in_progress);
  const int32_t node_id = services.node_id;
  // (co_spawn needs a default-constructible result, hence the optional.)
  auto id =
      co_await on_home_shard(services, [controller, allocator, node_id]() -> std::optional<result<int64_t>> {
        return allocator->next_id([controller, node_id]() -> result<controller::producer_id_block> {
          // The controller checks the broker epoch of the registration (STALE_BROKER_EPOCH otherwise).
          const auto image = controller->image();
          auto it = image->brokers.find(node_id);
          const int64_t broker_epoch = it == image->brokers.end() ? -1 : it->second.epoch;
          return controller->allocate_producer_ids(node_id, broker_epoch);
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
