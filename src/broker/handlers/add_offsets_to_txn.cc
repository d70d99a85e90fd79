#include "handlers/add_offsets_to_txn.h"

#include <string>

#include "handlers/authorization.h"
#include "handlers/transaction_common.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<add_offsets_to_txn_handler::response>> add_offsets_to_txn_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  response resp;
  if (!ctx.services.transactions) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
    co_return resp;
  }
  // KafkaApis.handleAddOffsetsToTxnRequest: WRITE on the transactional id, READ on the group.
  if (!authorized(ctx, acl_operation::write, acl_resource_type::transactional_id, req.transactional_id)) {
    resp.error_code = to_wire(error_code::transactional_id_authorization_failed);
    co_return resp;
  }
  if (!authorized(ctx, acl_operation::read, acl_resource_type::group, req.group_id)) {
    resp.error_code = to_wire(error_code::group_authorization_failed);
    co_return resp;
  }
  const std::string id = req.transactional_id;
  const std::string group = req.group_id;
  const int64_t pid = req.producer_id;
  const int16_t epoch = req.producer_epoch;
  auto call = [id, group, pid, epoch](coordinator::transaction_coordinator& c, auto done) {
    c.add_offsets(id, pid, epoch, group, std::move(done));
  };
  const error_code e = co_await call_transaction_coordinator<error_code>(ctx.services, std::move(call));
  resp.error_code = to_wire(fenced_for_version(e, version, 2));
  co_return resp;
}

}  // namespace mala::broker::handlers
