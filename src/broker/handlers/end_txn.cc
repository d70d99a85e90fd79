#include "handlers/end_txn.h"

#include <string>

#include "handlers/authorization.h"
#include "handlers/transaction_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<end_txn_handler::response>> end_txn_handler::handle_async(request_context& ctx,
                                                                                        request req,
                                                                                        int16_t version) {
  response resp;
  resp.producer_id = coordinator::no_producer_id;
  resp.producer_epoch = coordinator::no_producer_epoch;
  if (!ctx.services.transactions) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
    co_return resp;
  }
  if (!authorized(ctx, acl_operation::write, acl_resource_type::transactional_id, req.transactional_id)) {
    resp.error_code = to_wire(error_code::transactional_id_authorization_failed);
    co_return resp;
  }
  const int16_t client_tv = version >= 5 ? 2 : 0;
  // Transactions v2 may move to a new producer id when the epoch is exhausted.
  if (client_tv >= 2 && !co_await ensure_producer_id_block(ctx)) {
    resp.error_code = to_wire(error_code::coordinator_load_in_progress);
    co_return resp;
  }
  const std::string id = req.transactional_id;
  const int64_t pid = req.producer_id;
  const int16_t epoch = req.producer_epoch;
  const bool commit = req.committed;
  auto call = [id, pid, epoch, commit, client_tv](coordinator::transaction_coordinator& c, auto done) {
    c.end_transaction(id, pid, epoch, commit, client_tv, std::move(done));
  };
  auto answer =
      co_await call_transaction_coordinator<coordinator::end_txn_result>(ctx.services, std::move(call));
  resp.error_code = to_wire(fenced_for_version(answer.error, version, 2));
  if (answer.error == error_code::none) {
    resp.producer_id = answer.producer.producer_id;
    resp.producer_epoch = answer.producer.producer_epoch;
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
