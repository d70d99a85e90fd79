#include "handlers/init_producer_id.h"

#include "handlers/admin_common.h"
#include "handlers/authorization.h"
#include "handlers/transaction_common.h"
#include "mala/broker/producer_id_allocator.h"
#include "mala/common/logging.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

namespace {

init_producer_id_handler::response error_response(error_code code) {
  init_producer_id_handler::response resp;
  resp.error_code = to_wire(code);
  resp.producer_id = coordinator::no_producer_id;
  resp.producer_epoch = coordinator::no_producer_epoch;
  return resp;
}

}  // namespace

asio::awaitable<std::optional<init_producer_id_handler::response>> init_producer_id_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  const auto& services = ctx.services;
  if ((req.producer_id == coordinator::no_producer_id) !=
      (req.producer_epoch == coordinator::no_producer_epoch)) {
    co_return error_response(error_code::invalid_request);
  }
  if (req.transactional_id) {
    if (req.transactional_id->empty()) co_return error_response(error_code::invalid_request);
    if (!authorized(ctx, acl_operation::write, acl_resource_type::transactional_id, *req.transactional_id))
      co_return error_response(error_code::transactional_id_authorization_failed);
    if (!services.transactions) co_return error_response(error_code::coordinator_not_available);
    // The coordinator draws ids for new transactional ids (and rotations) from this broker's block.
    if (!co_await ensure_producer_id_block(ctx))
      co_return error_response(error_code::coordinator_load_in_progress);
    std::optional<coordinator::producer_id_and_epoch> expected;
    if (req.producer_id != coordinator::no_producer_id) expected = {req.producer_id, req.producer_epoch};
    const std::string id = *req.transactional_id;
    const int32_t timeout = req.transaction_timeout_ms;
    auto call = [id, timeout, expected](coordinator::transaction_coordinator& c, auto done) {
      c.init_producer_id(id, timeout, expected, std::move(done));
    };
    auto answer = co_await call_transaction_coordinator<coordinator::init_producer_id_result>(
        services, std::move(call));
    if (answer.error != error_code::none) {
      co_return error_response(fenced_for_version(answer.error, version, 4));
    }
    response resp;
    resp.producer_id = answer.producer.producer_id;
    resp.producer_epoch = answer.producer.producer_epoch;
    co_return resp;
  }

  // An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
  if (!authorized_cluster(ctx, acl_operation::idempotent_write) &&
      !authorized_any(ctx, acl_operation::write, acl_resource_type::topic)) {
    co_return error_response(error_code::cluster_authorization_failed);
  }
  auto* allocator = services.producer_ids;
  if (!co_await ensure_producer_id_block(ctx))
    co_return error_response(error_code::coordinator_load_in_progress);
  // (co_spawn needs a default-constructible result, hence the optional.)
  auto id = co_await on_home_shard(services, [allocator]() -> std::optional<result<int64_t>> {
    return allocator->next_id([]() -> result<controller::producer_id_block> {
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
