#include "handlers/list_transactions.h"

#include "handlers/authorization.h"

#include <string>

#include "handlers/transaction_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<list_transactions_handler::response>> list_transactions_handler::handle_async(
    request_context& ctx, request req, int16_t /*version*/) {
  response resp;
  if (!ctx.services.transactions) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
    co_return resp;
  }
  coordinator::list_transactions_filter filter;
  filter.states = req.state_filters;
  filter.producer_ids = req.producer_id_filters;
  filter.duration_ms = req.duration_filter;
  filter.id_pattern = req.transactional_id_pattern;
  auto call = [filter](coordinator::transaction_coordinator& c, auto done) { done(c.list(filter)); };
  auto listed = co_await call_transaction_coordinator<coordinator::list_transactions_result>(ctx.services,
                                                                                             std::move(call));
  resp.error_code = to_wire(listed.error);
  resp.unknown_state_filters = listed.unknown_state_filters;
  for (const auto& t : listed.transactions) {
    // KafkaApis.handleListTransactionsRequest: only the transactional ids the client may DESCRIBE.
    if (!authorized(ctx, acl_operation::describe, acl_resource_type::transactional_id, t.transactional_id))
      continue;
    auto& s = resp.transaction_states.emplace_back();
    s.transactional_id = t.transactional_id;
    s.producer_id = t.producer_id;
    s.transaction_state = std::string(coordinator::transaction_state_name(t.state));
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
