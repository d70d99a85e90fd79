#include "handlers/create_topics.h"

#include <map>
#include <string>
#include <vector>

#include "handlers/admin_common.h"
#include "handlers/authorization.h"
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

// KIP-599 (strict from v6): each new topic takes as many tokens as it has partitions; once the connection's
// controller_mutation_rate quota is exhausted the remaining topics are answered THROTTLING_QUOTA_EXCEEDED and
// not created. Topics that already exist or repeat a name go on to be refused by the controller and take
// none.
std::vector<topic_result> apply_mutation_quota(const request_context& ctx, controller_mutation_quota& quota,
                                               create_topics_handler::request& req) {
  std::vector<topic_result> throttled;
  if (!quota.bounded()) return throttled;
  const auto image = ctx.services.metadata->current();
  const int32_t default_partitions = ctx.services.config ? ctx.services.config->num_partitions() : 1;
  std::map<std::string, int> occurrences;
  for (const auto& t : req.topics) ++occurrences[t.name];
  auto topics = std::move(req.topics);
  req.topics.clear();
  for (auto& t : topics) {
    const int64_t permits = !t.assignments.empty()   ? static_cast<int64_t>(t.assignments.size())
                            : t.num_partitions == -1 ? default_partitions
                                                     : t.num_partitions;
    const bool refused_anyway = occurrences[t.name] > 1 || image->find_topic(t.name) || permits <= 0;
    if (!refused_anyway && !quota.record(static_cast<double>(permits))) {
      throttled.push_back(topic_error_result<topic_result>(t.name, error_code::throttling_quota_exceeded,
                                                           throttling_quota_exceeded_message));
      continue;
    }
    req.topics.push_back(std::move(t));
  }
  return throttled;
}

}  // namespace

asio::awaitable<std::optional<create_topics_handler::response>> create_topics_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  // ControllerApis.createTopics: CREATE on the cluster, or else on each topic (TOPIC_AUTHORIZATION_FAILED,
  // "Authorization failed."); a repeated name is the controller path's INVALID_REQUEST whatever the ACLs.
  std::vector<topic_result> unauthorized;
  if (authorization_enabled(ctx) && !authorized_cluster(ctx, acl_operation::create)) {
    std::map<std::string, int> occurrences;
    for (const auto& t : req.topics) ++occurrences[t.name];
    std::vector<request::creatable_topic> kept;
    for (auto& t : req.topics) {
      if (occurrences[t.name] == 1 &&
          !authorized(ctx, acl_operation::create, acl_resource_type::topic, t.name)) {
        unauthorized.push_back(topic_error_result<topic_result>(
            t.name, error_code::topic_authorization_failed, "Authorization failed."));
      } else {
        kept.push_back(std::move(t));
      }
    }
    req.topics = std::move(kept);
  }
  auto quota = mutation_quota_for(ctx, version >= 6);
  auto throttled = apply_mutation_quota(ctx, quota, req);
  response resp;
  if (!req.topics.empty()) {
    // A named callable (GCC bug 100611).
    auto local = [&req, version](controller::quorum_controller& c) {
      return create_on_controller(c, req, version);
    };
    auto answer =
        co_await on_controller<response>(ctx, req, version, local, broker_propagation::every_live_broker);
    if (answer.ok()) {
      resp = std::move(*answer.response);
    } else {
      // CreateTopicsRequest.getErrorResponse: every topic gets the error and its message.
      resp.topics = not_controller_results<topic_result>(req.topics, answer.failure());
    }
  }
  for (auto& t : throttled) resp.topics.push_back(std::move(t));
  if (quota.bounded()) resp.throttle_time_ms = throttle_for_mutations(ctx, quota);
  for (auto& r : unauthorized) resp.topics.push_back(std::move(r));
  co_return resp;
}

}  // namespace mala::broker::handlers
