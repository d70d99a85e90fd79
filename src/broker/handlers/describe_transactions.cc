#include "handlers/describe_transactions.h"

#include "handlers/authorization.h"

#include <string>
#include <vector>

#include "handlers/transaction_common.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<describe_transactions_handler::response>>
describe_transactions_handler::handle_async(request_context& ctx, request req, int16_t /*version*/) {
  response resp;
  std::vector<coordinator::transaction_description> described;
  // KafkaApis.handleDescribeTransactionsRequest: DESCRIBE on each transactional id.
  std::vector<std::string> allowed_ids;
  for (const auto& id : req.transactional_ids) {
    if (authorized(ctx, acl_operation::describe, acl_resource_type::transactional_id, id)) {
      allowed_ids.push_back(id);
    } else {
      coordinator::transaction_description d;
      d.transactional_id = id;
      d.error = error_code::transactional_id_authorization_failed;
      described.push_back(std::move(d));
    }
  }
  req.transactional_ids = std::move(allowed_ids);
  if (ctx.services.transactions && !req.transactional_ids.empty()) {
    auto ids = req.transactional_ids;
    auto call = [ids](coordinator::transaction_coordinator& c, auto done) {
      std::vector<coordinator::transaction_description> out;
      for (const auto& id : ids) out.push_back(c.describe(id));
      done(std::move(out));
    };
    for (auto& d : co_await call_transaction_coordinator<std::vector<coordinator::transaction_description>>(
             ctx.services, std::move(call))) {
      described.push_back(std::move(d));
    }
  } else {
    for (const auto& id : req.transactional_ids) {
      coordinator::transaction_description d;
      d.transactional_id = id;
      d.error = error_code::coordinator_not_available;
      described.push_back(std::move(d));
    }
  }
  for (const auto& d : described) {
    auto& s = resp.transaction_states.emplace_back();
    s.error_code = to_wire(d.error);
    s.transactional_id = d.transactional_id;
    if (d.error != error_code::none) {
      s.transaction_state = "";
      s.transaction_timeout_ms = 0;
      s.transaction_start_time_ms = -1;
      s.producer_id = -1;
      s.producer_epoch = -1;
      continue;
    }
    s.transaction_state = std::string(coordinator::transaction_state_name(d.state));
    s.transaction_timeout_ms = d.timeout_ms;
    s.transaction_start_time_ms = d.start_timestamp_ms;
    s.producer_id = d.producer_id;
    s.producer_epoch = d.producer_epoch;
    for (const auto& p : d.partitions) {
      if (s.topics.empty() || s.topics.back().topic != p.topic) s.topics.emplace_back().topic = p.topic;
      s.topics.back().partitions.push_back(p.partition);
    }
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
