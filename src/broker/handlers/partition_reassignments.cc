#include "handlers/partition_reassignments.h"

#include "handlers/authorization.h"

#include "handlers/admin_common.h"
#include "mala/controller/quorum_controller.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<alter_partition_reassignments_handler::response>>
alter_partition_reassignments_handler::handle_async(request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::alter)) co_return std::move(*refused);
  auto answer =
      co_await on_controller<response>(ctx, req, version, [&req, version](controller::quorum_controller& c) {
        return c.alter_partition_reassignments(req, version);
      });
  if (answer.ok()) co_return std::move(*answer.response);
  co_return controller_unreachable(answer);
}

asio::awaitable<std::optional<list_partition_reassignments_handler::response>>
list_partition_reassignments_handler::handle_async(request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::describe)) co_return std::move(*refused);
  auto answer = co_await on_controller<response>(ctx, req, version, [&req](controller::quorum_controller& c) {
    return c.list_partition_reassignments(req);
  });
  if (answer.ok()) co_return std::move(*answer.response);
  co_return controller_unreachable(answer);
}

}  // namespace mala::broker::handlers
