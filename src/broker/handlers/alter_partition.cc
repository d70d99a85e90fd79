#include "handlers/alter_partition.h"

#include "handlers/authorization.h"

#include "handlers/admin_common.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<alter_partition_handler::response>> alter_partition_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::cluster_action))
    co_return std::move(*refused);
  auto answer = co_await on_controller<response>(
      ctx, req, version,
      [&req, version](controller::quorum_controller& c) { return c.alter_partition(req, version); });
  if (answer.ok()) co_return std::move(*answer.response);
  response resp;
  resp.error_code = to_wire(answer.failure());
  co_return resp;
}

}  // namespace mala::broker::handlers
