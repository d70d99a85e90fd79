#include "handlers/find_coordinator.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "handlers/admin_common.h"
#include "handlers/group_common.h"
#include "mala/broker/refused_requests.h"
#include "mala/common/error_code.h"
#include "mala/common/logging.h"
#include "mala/controller/quorum_controller.h"
#include "mala/coordinator/group_placement.h"

namespace mala::broker::handlers {

namespace {

// CoordinatorType ids.
constexpr int8_t group_key_type = 0;
constexpr int8_t transaction_key_type = 1;
constexpr int8_t share_key_type = 2;

// What a transactional producer is told until the transaction coordinator is built (issue: transactions).
constexpr std::string_view transactions_not_supported =
    "Transactions are not supported by Mala yet: there is no transaction coordinator, so a producer with a "
    "transactional.id (or Kafka Streams with processing.guarantee=exactly_once_v2) cannot run against it";

struct coordinator_answer {
  error_code error = error_code::none;
  std::optional<std::string> message;  // the error message; the error's default message when unset
  int32_t node_id = -1;
  std::string host;
  int32_t port = -1;
};

// The CreateTopics that makes __consumer_offsets with Kafka's settings
// (GroupCoordinatorService.groupMetadataTopicConfigs); nullopt when the image has it already.
std::optional<protocol::create_topics_request> offsets_topic_creation(const broker_services& services) {
  const auto image = services.metadata->current();
  if (image->find_topic(std::string(coordinator::offsets_topic_name))) return std::nullopt;
  int32_t live = 0;
  for (const auto& [id, b] : image->brokers) {
    if (!b.fenced) ++live;
  }
  const node_config* config = services.config;
  const int32_t wanted_rf = config ? config->get_int("offsets.topic.replication.factor").value_or(3) : 3;
  protocol::create_topics_request create;
  create.timeout_ms = 30'000;
  auto& t = create.topics.emplace_back();
  t.name = std::string(coordinator::offsets_topic_name);
  t.num_partitions = services.groups->config().offsets_topic_num_partitions;
  t.replication_factor = static_cast<int16_t>(std::max(1, std::min(wanted_rf, live)));
  const std::string segment_bytes = std::to_string(
      config ? config->get_int("offsets.topic.segment.bytes").value_or(104'857'600) : 104'857'600);
  t.configs.push_back({"cleanup.policy", "compact"});
  t.configs.push_back({"compression.type", "producer"});
  t.configs.push_back({"segment.bytes", segment_bytes});
  return create;
}

// Creates __consumer_offsets through the active controller (forwarded when it is on another node).
asio::awaitable<void> ensure_offsets_topic(request_context& ctx) {
  auto create = offsets_topic_creation(ctx.services);
  if (!create) co_return;
  constexpr int16_t version = protocol::create_topics_request::max_version;
  const auto& request = *create;
  auto answer = co_await on_controller<protocol::create_topics_response>(
      ctx, request, version,
      [&request](controller::quorum_controller& c) { return c.create_topics(request, version); },
      broker_propagation::every_live_broker);
  if (!answer.ok()) co_return;
  for (const auto& r : answer.response->topics) {
    if (r.error_code != to_wire(error_code::none) &&
        r.error_code != to_wire(error_code::topic_already_exists)) {
      subsystem_logger("broker")->warn("creation of {} failed: {} {}", r.name, r.error_code,
                                       r.error_message.value_or(""));
    } else {
      subsystem_logger("broker")->info("created {} with {} partitions, replication factor {}", r.name,
                                       request.topics.front().num_partitions,
                                       request.topics.front().replication_factor);
    }
  }
}

coordinator_answer group_coordinator_for(const request_context& ctx, const metadata::metadata_image& image,
                                         const std::string& group_id) {
  coordinator_answer a;
  a.error = error_code::coordinator_not_available;
  if (!ctx.services.groups) return a;
  const auto* topic = image.find_topic(std::string(coordinator::offsets_topic_name));
  if (!topic) return a;
  const int32_t partition =
      coordinator::group_partition(group_id, static_cast<int32_t>(topic->partitions.size()));
  const auto* p = find_partition(image, topic->name, partition);
  if (!p || p->leader < 0) return a;
  auto b = image.brokers.find(p->leader);
  if (b == image.brokers.end() || b->second.fenced) return a;
  const auto* ep = b->second.endpoint_for(ctx.connection.listener_name);
  if (!ep) return a;
  a.error = error_code::none;
  a.node_id = p->leader;
  a.host = ep->host;
  a.port = static_cast<int32_t>(ep->port);
  return a;
}

}  // namespace

asio::awaitable<std::optional<find_coordinator_handler::response>> find_coordinator_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  const auto& services = ctx.services;
  std::vector<std::string> keys;
  if (version < 4) {
    keys.push_back(req.key);
  } else {
    keys = req.coordinator_keys;
  }
  const int8_t key_type = req.key_type;

  if (key_type == group_key_type && !keys.empty() && services.groups &&
      (services.controller || services.controller_link) &&
      !services.metadata->current()->find_topic(std::string(coordinator::offsets_topic_name))) {
    co_await ensure_offsets_topic(ctx);
  }
  const auto image = services.metadata->current();

  std::vector<coordinator_answer> answers;
  for (const auto& key : keys) {
    coordinator_answer a;
    if (key_type == group_key_type) {
      a = group_coordinator_for(ctx, *image, key);
    } else if (key_type == transaction_key_type) {
      // No transaction coordinator yet. Not COORDINATOR_NOT_AVAILABLE, which clients retry silently until
      // their own timeout (Streams waited 300 s with no trace anywhere): an error the Java producer treats as
      // fatal, with a message that says why ("Could not find a coordinator ... due to unexpected error:
      // ...").
      a.error = error_code::unsupported_version;
      a.message = std::string(transactions_not_supported);
      log_refused_request(
          "transaction coordinator client " + ctx.header.client_id.value_or(""),
          fmt::format("FindCoordinator for transactional id '{}' from client id '{}' ({}): {}", key,
                      ctx.header.client_id.value_or(""), ctx.connection.peer, transactions_not_supported));
    } else if (key_type == share_key_type) {
      a.error = error_code::invalid_request;  // no share coordinator (and v<6 cannot ask for one)
    } else {
      // CoordinatorType.forId throws InvalidRequestException: the request fails as a whole.
      a.error = error_code::invalid_request;
    }
    answers.push_back(std::move(a));
  }

  response resp;
  if (version < 4) {
    const auto& a = answers.front();
    resp.error_code = to_wire(a.error);
    if (a.error != error_code::none) {
      // Kafka's error response for v0-v3: the error's default message and Node.noNode().
      resp.error_message = a.message.value_or(std::string(default_error_message(a.error)));
      resp.node_id = -1;
      resp.host = "";
      resp.port = -1;
    } else {
      resp.error_message = std::nullopt;
      resp.node_id = a.node_id;
      resp.host = a.host;
      resp.port = a.port;
    }
    co_return resp;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    auto& c = resp.coordinators.emplace_back();
    c.key = keys[i];
    c.error_code = to_wire(answers[i].error);
    c.error_message = answers[i].message;
    c.node_id = answers[i].node_id;
    c.host = answers[i].host;
    c.port = answers[i].port;
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
