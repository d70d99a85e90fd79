#include "handlers/allocate_producer_ids.h"

#include "handlers/authorization.h"

#include "handlers/admin_common.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

allocate_producer_ids_handler::response allocate_producer_ids_handler::allocate_on_controller(
    controller::quorum_controller& controller, const request& req) {
  response resp;
  auto block = controller.allocate_producer_ids(req.broker_id, req.broker_epoch);
  if (!block.ok()) {
    resp.error_code = to_wire(block.error().code);
    resp.producer_id_start = -1;
    resp.producer_id_len = 0;
    return resp;
  }
  resp.producer_id_start = block->first_id;
  resp.producer_id_len = block->size;
  return resp;
}

asio::awaitable<std::optional<allocate_producer_ids_handler::response>>
allocate_producer_ids_handler::handle_async(request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::cluster_action))
    co_return std::move(*refused);
  auto answer = co_await on_controller<response>(
      ctx, req, version, [&req](controller::quorum_controller& c) { return allocate_on_controller(c, req); });
  if (answer.ok()) co_return std::move(*answer.response);
  response resp;
  resp.error_code = to_wire(answer.failure());
  resp.producer_id_start = -1;
  co_return resp;
}

}  // namespace mala::broker::handlers
