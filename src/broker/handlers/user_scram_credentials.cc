#include "handlers/user_scram_credentials.h"

#include <set>

#include "handlers/admin_common.h"
#include "handlers/authorization.h"
#include "mala/controller/quorum_controller.h"
#include "mala/controller/scram_control.h"

namespace mala::broker::handlers {

describe_user_scram_credentials_handler::response describe_user_scram_credentials_handler::handle(
    request_context& ctx, const request& req, int16_t) {
  // KafkaApis.handleDescribeUserScramCredentialsRequest: DESCRIBE on the cluster.
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::describe)) return std::move(*refused);
  return controller::describe_user_scram_credentials(*ctx.services.metadata->current(), req);
}

asio::awaitable<std::optional<alter_user_scram_credentials_handler::response>>
alter_user_scram_credentials_handler::handle_async(request_context& ctx, request req, int16_t version) {
  // ControllerApis.handleAlterUserScramCredentials: ALTER on the cluster, else every user named answers
  // CLUSTER_AUTHORIZATION_FAILED (AlterUserScramCredentialsRequest.getErrorResponse).
  const bool allowed = authorized_cluster(ctx, acl_operation::alter);
  if (!allowed) {
    response resp;
    std::set<std::string> users;
    for (const auto& d : req.deletions) users.insert(d.name);
    for (const auto& u : req.upsertions) users.insert(u.name);
    for (const auto& user : users) {
      auto& r = resp.results.emplace_back();
      r.user = user;
      r.error_code = to_wire(error_code::cluster_authorization_failed);
      r.error_message = std::string(default_error_message(error_code::cluster_authorization_failed));
    }
    co_return resp;
  }
  // Named, not a prvalue argument of the coroutine (GCC bug 100611).
  auto local = [&req](controller::quorum_controller& c) { return c.alter_user_scram_credentials(req); };
  auto answer = co_await on_controller<response>(ctx, req, version, std::move(local),
                                                 broker_propagation::every_live_broker);
  if (answer.ok()) co_return std::move(*answer.response);
  // No controller reachable: every user named gets the error (NOT_CONTROLLER / REQUEST_TIMED_OUT).
  response resp;
  std::set<std::string> users;
  for (const auto& d : req.deletions) users.insert(d.name);
  for (const auto& u : req.upsertions) users.insert(u.name);
  for (const auto& user : users) {
    auto& r = resp.results.emplace_back();
    r.user = user;
    r.error_code = to_wire(answer.failure());
    r.error_message = std::string(default_error_message(answer.failure()));
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
