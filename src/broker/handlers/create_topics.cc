#include "handlers/create_topics.h"

#include <string>
#include <vector>

#include "handlers/admin_common.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

namespace {

using topic_result = create_topics_handler::response::creatable_topic_result;

}  // namespace

asio::awaitable<std::optional<create_topics_handler::response>> create_topics_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  response resp;
  auto* controller = ctx.services.controller;
  if (!controller) {
    // CreateTopicsRequest.getErrorResponse: every topic gets the error and its message.
    resp.topics = not_controller_results<topic_result>(req.topics);
    co_return resp;
  }

  // ControllerApis.createTopics: a name given more than once is refused as a whole (one answer), the metadata
  // topic cannot be created; neither reaches the controller.
  request forwarded;
  forwarded.timeout_ms = req.timeout_ms;
  forwarded.validate_only = req.validate_only;
  std::vector<topic_result> refused;
  split_duplicate_names(
      req.topics,
      [&](const std::string& name) {
        refused.push_back(
            topic_error_result<topic_result>(name, error_code::invalid_request, "Duplicate topic name."));
      },
      [&](request::creatable_topic&& t) {
        if (t.name == cluster_metadata_topic) {
          refused.push_back(topic_error_result<topic_result>(
              t.name, error_code::invalid_request,
              "Creation of internal topic __cluster_metadata is prohibited."));
        } else {
          forwarded.topics.push_back(std::move(t));
        }
      });
  if (!forwarded.topics.empty()) {
    resp = co_await on_home_shard(ctx.services, [controller, &forwarded, version] {
      return controller->create_topics(forwarded, version);
    });
  }
  for (auto& r : refused) resp.topics.push_back(std::move(r));
  co_return resp;
}

}  // namespace mala::broker::handlers
