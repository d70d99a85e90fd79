#include "handlers/delete_topics.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "handlers/admin_common.h"
#include "handlers/authorization.h"
#include "mala/controller/quorum_controller.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

namespace {

using topic_result = delete_topics_handler::response::deletable_topic_result;

topic_result result_for(std::optional<std::string> name, const uuid& id, error_code code,
                        std::optional<std::string> message) {
  topic_result r;
  r.name = std::move(name);
  r.topic_id = id;
  r.error_code = to_wire(code);
  r.error_message = std::move(message);
  return r;
}

// uuid has no ordering of its own; its bytes do.
struct uuid_less {
  bool operator()(const uuid& a, const uuid& b) const { return a.bytes < b.bytes; }
};

// DeleteTopicsRequest.topics(): the names of v1-5 as states without ids, or the v6 states.
std::vector<protocol::delete_topics_request::delete_topic_state> topic_states(
    const delete_topics_handler::request& req, int16_t version) {
  if (version >= 6) return req.topics;
  std::vector<protocol::delete_topics_request::delete_topic_state> out;
  for (const auto& name : req.topic_names) {
    auto& s = out.emplace_back();
    s.name = name;
  }
  return out;
}

// DeleteTopicsRequest.getErrorResponse: every topic with the error code and no message.
delete_topics_handler::response error_response(const delete_topics_handler::request& req, int16_t version,
                                               error_code code) {
  delete_topics_handler::response resp;
  for (const auto& s : topic_states(req, version))
    resp.responses.push_back(result_for(s.name, s.topic_id, code, {}));
  return resp;
}

}  // namespace

asio::awaitable<std::optional<delete_topics_handler::response>> delete_topics_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  if (!ctx.services.controller && !ctx.services.controller_link)
    co_return error_response(req, version, error_code::not_controller);
  const bool deletion_enabled = !ctx.services.config || ctx.services.config->delete_topic_enable();
  if (!deletion_enabled) {
    // Kafka throws InvalidRequestException("Topic deletion is disabled.") before v3 (clients of that age do
    // not know TOPIC_DELETION_DISABLED), TopicDeletionDisabledException from v3.
    co_return error_response(req, version,
                             version < 3 ? error_code::invalid_request : error_code::topic_deletion_disabled);
  }

  // ControllerApis.deleteTopics: DELETE on the cluster, or else on each topic (by id: the topic it names
  // here); an entry that is not is answered TOPIC_AUTHORIZATION_FAILED and is neither checked further nor
  // forwarded. Repeated entries are left to the checks below.
  std::vector<topic_result> unauthorized;
  if (authorization_enabled(ctx) && !authorized_cluster(ctx, acl_operation::remove)) {
    const auto image = ctx.services.metadata->current();
    std::map<std::string, int> names_seen;
    std::map<uuid, int, uuid_less> ids_seen;
    for (const auto& name : req.topic_names) ++names_seen[name];
    for (const auto& t : req.topics) {
      if (t.name) ++names_seen[*t.name];
      if (t.topic_id != uuid{}) ++ids_seen[t.topic_id];
    }
    auto may_delete = [&](const std::string& name) {
      return authorized(ctx, acl_operation::remove, acl_resource_type::topic, name);
    };
    std::vector<std::string> kept_names;
    for (auto& name : req.topic_names) {
      if (names_seen[name] == 1 && !may_delete(name)) {
        unauthorized.push_back(result_for(name, uuid{}, error_code::topic_authorization_failed, {}));
      } else {
        kept_names.push_back(std::move(name));
      }
    }
    req.topic_names = std::move(kept_names);
    std::vector<protocol::delete_topics_request::delete_topic_state> kept;
    for (auto& t : req.topics) {
      bool refuse = false;
      if (t.name && t.topic_id == uuid{}) {
        refuse = names_seen[*t.name] == 1 && !may_delete(*t.name);
      } else if (!t.name && t.topic_id != uuid{} && ids_seen[t.topic_id] == 1) {
        const auto* topic = image->find_topic(t.topic_id);
        refuse = topic && !may_delete(topic->name);
      }
      if (refuse) {
        unauthorized.push_back(result_for(t.name, t.topic_id, error_code::topic_authorization_failed, {}));
      } else {
        kept.push_back(std::move(t));
      }
    }
    req.topics = std::move(kept);
  }

  // ControllerApis.deleteTopics: sort the request into names and ids, answering the malformed entries.
  response resp;
  std::vector<std::string> names;  // request order, duplicates removed below
  std::vector<uuid> ids;
  std::map<std::string, int> name_count;
  std::map<uuid, int, uuid_less> id_count;
  auto add_name = [&](const std::string& name) {
    if (name_count[name]++ == 0) names.push_back(name);
  };
  for (const auto& name : req.topic_names) add_name(name);
  for (const auto& t : req.topics) {
    if (!t.name) {
      if (t.topic_id == uuid{}) {
        resp.responses.push_back(result_for(std::nullopt, uuid{}, error_code::invalid_request,
                                            "Neither topic name nor id were specified."));
      } else if (id_count[t.topic_id]++ == 0) {
        ids.push_back(t.topic_id);
      }
    } else if (t.topic_id == uuid{}) {
      add_name(*t.name);
    } else {
      resp.responses.push_back(result_for(t.name, t.topic_id, error_code::invalid_request,
                                          "You may not specify both topic name and topic id."));
    }
  }
  std::vector<std::string> unique_names;
  for (const auto& name : names) {
    if (name_count[name] > 1) {
      resp.responses.push_back(
          result_for(name, uuid{}, error_code::invalid_request, "Duplicate topic name."));
    } else {
      unique_names.push_back(name);
    }
  }
  std::vector<uuid> unique_ids;
  for (const auto& id : ids) {
    if (id_count[id] > 1) {
      resp.responses.push_back(
          result_for(std::nullopt, id, error_code::invalid_request, "Duplicate topic id."));
    } else {
      unique_ids.push_back(id);
    }
  }
  // The topics refused by the ACLs come first.
  auto with_unauthorized = [&unauthorized](response r) {
    for (auto& t : r.responses) unauthorized.push_back(std::move(t));
    r.responses = std::move(unauthorized);
    return r;
  };
  if (unique_names.empty() && unique_ids.empty()) co_return with_unauthorized(std::move(resp));

  // KIP-599 (strict from v5): a topic's deletion takes as many tokens as it has partitions; once the
  // connection's controller_mutation_rate quota is exhausted the remaining topics are answered
  // THROTTLING_QUOTA_EXCEEDED and kept. Unknown topics take none (the controller answers them).
  auto quota = mutation_quota_for(ctx, version >= 5);
  if (quota.bounded()) {
    const auto image = ctx.services.metadata->current();
    auto admit = [&](const metadata::topic_metadata* topic, const std::optional<std::string>& name,
                     const uuid& id) {
      if (!topic || topic->partitions.empty() || quota.record(static_cast<double>(topic->partitions.size())))
        return true;
      resp.responses.push_back(
          result_for(name, id, error_code::throttling_quota_exceeded, throttling_quota_exceeded_message));
      return false;
    };
    std::erase_if(unique_names,
                  [&](const std::string& name) { return !admit(image->find_topic(name), name, {}); });
    std::erase_if(unique_ids,
                  [&](const uuid& id) { return !admit(image->find_topic(id), std::nullopt, id); });
    // What is forwarded as it came (to a remote active controller) leaves the throttled topics out.
    std::erase_if(req.topic_names, [&](const std::string& name) {
      return std::find(unique_names.begin(), unique_names.end(), name) == unique_names.end() &&
             name_count[name] == 1;
    });
    std::erase_if(req.topics, [&](const protocol::delete_topics_request::delete_topic_state& t) {
      if (t.name && t.topic_id == uuid{}) {
        return name_count[*t.name] == 1 &&
               std::find(unique_names.begin(), unique_names.end(), *t.name) == unique_names.end();
      }
      if (!t.name && t.topic_id != uuid{}) {
        return id_count[t.topic_id] == 1 &&
               std::find(unique_ids.begin(), unique_ids.end(), t.topic_id) == unique_ids.end();
      }
      return false;
    });
    resp.throttle_time_ms = throttle_for_mutations(ctx, quota);
    if (unique_names.empty() && unique_ids.empty()) co_return with_unauthorized(std::move(resp));
  }

  auto answer = co_await on_controller<response>(
      ctx, req, version,
      [&](controller::quorum_controller& c) {
        auto* controller = &c;
        // A name that resolves to an id also given by id is refused once, for both (Kafka answers the name
        // with the id, and does not delete the topic).
        const auto image = controller->image();
        std::vector<topic_result> refused;
        std::set<uuid, uuid_less> refused_ids;
        std::vector<std::string> forward_names;
        for (const auto& name : unique_names) {
          const auto* topic = image->find_topic(name);
          if (topic && id_count.count(topic->id)) {
            refused.push_back(result_for(name, topic->id, error_code::invalid_request,
                                         "The provided topic name maps to an ID that was already supplied."));
            refused_ids.insert(topic->id);
          } else {
            forward_names.push_back(name);
          }
        }
        request forwarded;
        forwarded.timeout_ms = req.timeout_ms;
        if (version >= 6) {
          for (const auto& name : forward_names) forwarded.topics.emplace_back().name = name;
          for (const auto& id : unique_ids) {
            if (!refused_ids.count(id)) forwarded.topics.emplace_back().topic_id = id;
          }
        } else {
          forwarded.topic_names = std::move(forward_names);
        }
        response out;
        if (!forwarded.topics.empty() || !forwarded.topic_names.empty())
          out = controller->delete_topics(forwarded, version);
        for (auto& r : refused) out.responses.push_back(std::move(r));
        return out;
      },
      broker_propagation::every_live_broker);
  if (!answer.ok()) co_return with_unauthorized(error_response(req, version, answer.failure()));
  // A forwarded request comes back whole: the active controller answered the malformed entries too.
  if (answer.forwarded) {
    // The throttled topics were left out of the forwarded request: their answers go with the controller's.
    for (auto& r : resp.responses) {
      if (r.error_code == to_wire(error_code::throttling_quota_exceeded))
        answer.response->responses.push_back(std::move(r));
    }
    answer.response->throttle_time_ms = std::max(answer.response->throttle_time_ms, resp.throttle_time_ms);
    co_return with_unauthorized(std::move(*answer.response));
  }
  for (auto& r : answer.response->responses) resp.responses.push_back(std::move(r));
  co_return with_unauthorized(std::move(resp));
}

}  // namespace mala::broker::handlers
