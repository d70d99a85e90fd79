#include "handlers/create_topics.h"

#include <string>
#include <vector>

#include "handlers/admin_common.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

namespace {

using topic_result = create_topics_handler::response::creatable_topic_result;

// ControllerApis.createTopics on the active controller: a name given more than once is refused as a whole
// (one answer), the metadata topic cannot be created; neither reaches the controller.
create_topics_handler::response create_on_controller(controller::quorum_controller& controller,
                                                     const create_topics_handler::request& req,
                                                     int16_t version) {
  using request = create_topics_handler::request;
  create_topics_handler::response resp;
  request forwarded;
  forwarded.timeout_ms = req.timeout_ms;
  forwarded.validate_only = req.validate_only;
  std::vector<topic_result> refused;
  auto topics = req.topics;
  split_duplicate_names(
      topics,
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
  if (!forwarded.topics.empty()) resp = controller.create_topics(forwarded, version);
  for (auto& r : refused) resp.topics.push_back(std::move(r));
  return resp;
}

}  // namespace

asio::awaitable<std::optional<create_topics_handler::response>> create_topics_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  auto answer = co_await on_controller<response>(
      ctx, req, version,
      [&req, version](controller::quorum_controller& c) { return create_on_controller(c, req, version); },
      broker_propagation::every_live_broker);
  if (answer.ok()) co_return std::move(*answer.response);
  // CreateTopicsRequest.getErrorResponse: every topic gets the error and its message.
  response resp;
  resp.topics = not_controller_results<topic_result>(req.topics, answer.failure());
  co_return resp;
}

}  // namespace mala::broker::handlers
