#include "handlers/elect_leaders.h"

#include "handlers/authorization.h"

#include "handlers/admin_common.h"
#include "mala/controller/quorum_controller.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<elect_leaders_handler::response>> elect_leaders_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::alter)) co_return std::move(*refused);
  auto answer = co_await on_controller<response>(
      ctx, req, version,
      [&req, version](controller::quorum_controller& c) { return c.elect_leaders(req, version); });
  if (answer.ok()) co_return std::move(*answer.response);
  // No controller reachable: every named partition gets NOT_CONTROLLER (retriable for the admin client).
  response resp;
  resp.error_code = to_wire(answer.failure());
  if (req.topic_partitions) {
    for (const auto& t : *req.topic_partitions) {
      response::replica_election_result r;
      r.topic = t.topic;
      for (int32_t id : t.partitions) {
        response::partition_result_data p;
        p.partition_id = id;
        p.error_code = to_wire(answer.failure());
        r.partition_result.push_back(p);
      }
      resp.replica_election_results.push_back(std::move(r));
    }
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
