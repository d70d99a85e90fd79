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
  auto answer = co_await on_controller<response>(
      ctx, req, version,
      [&req, version](controller::quorum_controller& c) {
        // ControllerApis.createPartitions: duplicate names are answered first, then the controller's results.
        response resp;
        request forwarded;
        forwarded.timeout_ms = req.timeout_ms;
        forwarded.validate_only = req.validate_only;
        auto topics = req.topics;
        split_duplicate_names(
            topics,
            [&](const std::string& name) {
              resp.results.push_back(topic_error_result<topic_result>(name, error_code::invalid_request,
                                                                      "Duplicate topic name."));
            },
            [&](request::create_partitions_topic&& t) { forwarded.topics.push_back(std::move(t)); });
        if (!forwarded.topics.empty()) {
          auto created = c.create_partitions(forwarded, version);
          for (auto& r : created.results) resp.results.push_back(std::move(r));
        }
        return resp;
      },
      broker_propagation::every_live_broker);
  if (answer.ok()) co_return std::move(*answer.response);
  response resp;
  resp.results = not_controller_results<topic_result>(req.topics, answer.failure());
  co_return resp;
}

}  // namespace mala::broker::handlers
