#include "handlers/create_partitions.h"

#include <map>
#include <set>
#include <string>

#include "handlers/admin_common.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

namespace {

create_partitions_handler::response::create_partitions_topic_result error_result(
    const std::string& name, error_code code, std::optional<std::string> message) {
  create_partitions_handler::response::create_partitions_topic_result r;
  r.name = name;
  r.error_code = to_wire(code);
  r.error_message = std::move(message);
  return r;
}

}  // namespace

asio::awaitable<std::optional<create_partitions_handler::response>> create_partitions_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  response resp;
  auto* controller = ctx.services.controller;
  if (!controller) {
    for (const auto& t : req.topics) {
      resp.results.push_back(error_result(t.name, error_code::not_controller,
                                          std::string(default_error_message(error_code::not_controller))));
    }
    co_return resp;
  }
  std::map<std::string, int> occurrences;
  for (const auto& t : req.topics) ++occurrences[t.name];
  request forwarded;
  forwarded.timeout_ms = req.timeout_ms;
  forwarded.validate_only = req.validate_only;
  std::set<std::string> answered;
  for (auto& t : req.topics) {
    if (occurrences[t.name] > 1) {
      if (answered.insert(t.name).second) {
        resp.results.push_back(error_result(t.name, error_code::invalid_request, "Duplicate topic name."));
      }
    } else {
      forwarded.topics.push_back(std::move(t));
    }
  }
  if (!forwarded.topics.empty()) {
    auto created = co_await on_home_shard(ctx.services, [controller, &forwarded, version] {
      return controller->create_partitions(forwarded, version);
    });
    for (auto& r : created.results) resp.results.push_back(std::move(r));
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
