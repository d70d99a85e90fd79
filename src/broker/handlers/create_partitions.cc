#include "handlers/create_partitions.h"

#include <string>

#include "handlers/admin_common.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

namespace {

using topic_result = create_partitions_handler::response::create_partitions_topic_result;

}  // namespace

asio::awaitable<std::optional<create_partitions_handler::response>> create_partitions_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  response resp;
  auto* controller = ctx.services.controller;
  if (!controller) {
    resp.results = not_controller_results<topic_result>(req.topics);
    co_return resp;
  }
  // ControllerApis.createPartitions: duplicate names are answered first, then the controller's results.
  request forwarded;
  forwarded.timeout_ms = req.timeout_ms;
  forwarded.validate_only = req.validate_only;
  split_duplicate_names(
      req.topics,
      [&](const std::string& name) {
        resp.results.push_back(
            topic_error_result<topic_result>(name, error_code::invalid_request, "Duplicate topic name."));
      },
      [&](request::create_partitions_topic&& t) { forwarded.topics.push_back(std::move(t)); });
  if (!forwarded.topics.empty()) {
    auto created = co_await on_home_shard(ctx.services, [controller, &forwarded, version] {
      return controller->create_partitions(forwarded, version);
    });
    for (auto& r : created.results) resp.results.push_back(std::move(r));
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
