#include "handlers/create_partitions.h"

#include <map>
#include <string>
#include <vector>

#include "handlers/admin_common.h"
#include "handlers/authorization.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

namespace {

using topic_result = create_partitions_handler::response::create_partitions_topic_result;

// KIP-599 (strict from v3): a topic's new partitions take as many tokens; once the connection's
// controller_mutation_rate quota is exhausted the remaining topics are answered THROTTLING_QUOTA_EXCEEDED.
// Unknown topics, repeated names and counts that do not grow go on to be refused by the controller.
std::vector<topic_result> apply_mutation_quota(const request_context& ctx, controller_mutation_quota& quota,
                                               create_partitions_handler::request& req) {
  std::vector<topic_result> throttled;
  if (!quota.bounded()) return throttled;
  const auto image = ctx.services.metadata->current();
  std::map<std::string, int> occurrences;
  for (const auto& t : req.topics) ++occurrences[t.name];
  auto topics = std::move(req.topics);
  req.topics.clear();
  for (auto& t : topics) {
    const auto* known = image->find_topic(t.name);
    const int64_t permits = known ? int64_t{t.count} - static_cast<int64_t>(known->partitions.size()) : 0;
    if (occurrences[t.name] == 1 && permits > 0 && !quota.record(static_cast<double>(permits))) {
      throttled.push_back(topic_error_result<topic_result>(t.name, error_code::throttling_quota_exceeded,
                                                           throttling_quota_exceeded_message));
      continue;
    }
    req.topics.push_back(std::move(t));
  }
  return throttled;
}

}  // namespace

asio::awaitable<std::optional<create_partitions_handler::response>> create_partitions_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  // ControllerApis.createPartitions: ALTER on each topic (TOPIC_AUTHORIZATION_FAILED), after the duplicate
  // check (a repeated name stays for the controller path's INVALID_REQUEST).
  std::vector<topic_result> unauthorized;
  if (authorization_enabled(ctx)) {
    std::map<std::string, int> occurrences;
    for (const auto& t : req.topics) ++occurrences[t.name];
    std::vector<request::create_partitions_topic> kept;
    for (auto& t : req.topics) {
      if (occurrences[t.name] == 1 &&
          !authorized(ctx, acl_operation::alter, acl_resource_type::topic, t.name)) {
        unauthorized.push_back(topic_error_result<topic_result>(
            t.name, error_code::topic_authorization_failed, "Authorization failed."));
      } else {
        kept.push_back(std::move(t));
      }
    }
    req.topics = std::move(kept);
    if (req.topics.empty()) {
      response resp;
      resp.results = std::move(unauthorized);
      co_return resp;
    }
  }
  auto quota = mutation_quota_for(ctx, version >= 3);
  auto throttled = apply_mutation_quota(ctx, quota, req);
  if (!throttled.empty() && req.topics.empty()) {
    response resp;
    resp.results = std::move(throttled);
    for (auto& r : unauthorized) resp.results.push_back(std::move(r));
    resp.throttle_time_ms = throttle_for_mutations(ctx, quota);
    co_return resp;
  }
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
  response resp;
  if (answer.ok()) {
    resp = std::move(*answer.response);
    if (quota.bounded()) resp.throttle_time_ms = throttle_for_mutations(ctx, quota);
  } else {
    resp.results = not_controller_results<topic_result>(req.topics, answer.failure());
  }
  for (auto& t : throttled) resp.results.push_back(std::move(t));
  for (auto& r : unauthorized) resp.results.push_back(std::move(r));
  co_return resp;
}

}  // namespace mala::broker::handlers
