#include "handlers/broker_registration.h"

#include "handlers/authorization.h"

#include <string>

#include "handlers/admin_common.h"
#include "mala/common/listener.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

namespace {

metadata::broker_registration registration_of(const protocol::broker_registration_request& req) {
  metadata::broker_registration r;
  r.id = req.broker_id;
  r.rack = req.rack;
  r.incarnation_id = req.incarnation_id;
  r.log_dirs = req.log_dirs;
  for (const auto& l : req.listeners) {
    r.endpoints.push_back({l.name, l.host, l.port,
                           std::string(to_string(static_cast<security_protocol>(l.security_protocol)))});
  }
  for (const auto& f : req.features) {
    r.supported_features[f.name] =
        metadata::supported_feature{f.min_supported_version, f.max_supported_version};
  }
  return r;
}

}  // namespace

broker_registration_handler::response broker_registration_handler::register_on_controller(
    controller::quorum_controller& c, const request& req, int64_t now_ms) {
  response resp;
  if (req.cluster_id != c.image()->cluster_id) {
    resp.error_code = to_wire(error_code::inconsistent_cluster_id);
    return resp;
  }
  auto epoch = c.register_broker(registration_of(req), req.previous_broker_epoch, now_ms);
  if (!epoch.ok()) {
    resp.error_code = to_wire(epoch.error().code);
  } else {
    resp.broker_epoch = *epoch;
  }
  return resp;
}

asio::awaitable<std::optional<broker_registration_handler::response>>
broker_registration_handler::handle_async(request_context& ctx, request req, int16_t version) {
  if (auto refused = cluster_refusal<response>(ctx, acl_operation::cluster_action))
    co_return std::move(*refused);
  auto clock = ctx.services.clock_ms;
  auto answer =
      co_await on_controller<response>(ctx, req, version, [&req, &clock](controller::quorum_controller& c) {
        return register_on_controller(c, req, clock ? clock() : 0);
      });
  if (answer.ok()) co_return std::move(*answer.response);
  response resp;
  resp.error_code = to_wire(answer.failure());
  co_return resp;
}

}  // namespace mala::broker::handlers
