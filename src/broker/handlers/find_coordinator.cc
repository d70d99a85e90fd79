#include "handlers/find_coordinator.h"

#include <algorithm>
#include <string>
#include <vector>

#include "handlers/admin_common.h"
#include "handlers/group_common.h"
#include "mala/common/error_code.h"
#include "mala/common/logging.h"
#include "mala/controller/quorum_controller.h"
#include "mala/coordinator/group_placement.h"
#include "mala/coordinator/transaction_records.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

namespace {

// CoordinatorType ids.
constexpr int8_t group_key_type = 0;
constexpr int8_t transaction_key_type = 1;
constexpr int8_t share_key_type = 2;

struct coordinator_answer {
  error_code error = error_code::none;
  std::optional<std::string> message;  // the error message; the error's default message when unset
  int32_t node_id = -1;
  std::string host;
  int32_t port = -1;
};

// An internal topic a coordinator keeps its state in, as Kafka creates it on the first FindCoordinator.
struct internal_topic {
  std::string name;
  int32_t partitions = 50;
  int32_t replication_factor = 3;
  std::vector<std::pair<std::string, std::string>> configs;
};

int32_t config_int(const node_config* config, const char* key, int32_t fallback) {
  return config ? config->get_int(key).value_or(fallback) : fallback;
}

// __consumer_offsets with Kafka's settings (GroupCoordinatorService.groupMetadataTopicConfigs).
internal_topic offsets_topic(const broker_services& services) {
  const node_config* config = services.config;
  internal_topic t;
  t.name = std::string(coordinator::offsets_topic_name);
  t.partitions = services.groups->config().offsets_topic_num_partitions;
  t.replication_factor = config_int(config, "offsets.topic.replication.factor", 3);
  t.configs = {
      {"cleanup.policy", "compact"},
      {"compression.type", "producer"},
      {"segment.bytes", std::to_string(config_int(config, "offsets.topic.segment.bytes", 104'857'600))}};
  return t;
}

// __transaction_state with Kafka's settings (TransactionStateManager.transactionTopicConfigs). Its
// min.insync.replicas (transaction.state.log.min.isr, 2) is capped at the replication factor, so that a
// single node serves transactions without a setting (Kafka's own single-node examples lower it to 1).
internal_topic transaction_state_topic(const broker_services& services) {
  const node_config* config = services.config;
  internal_topic t;
  t.name = std::string(coordinator::transaction_state_topic_name);
  t.partitions = config_int(config, "transaction.state.log.num.partitions", 50);
  t.replication_factor = config_int(config, "transaction.state.log.replication.factor", 3);
  t.configs = {
      {"cleanup.policy", "compact"},
      {"compression.type", "uncompressed"},
      {"unclean.leader.election.enable", "false"},
      {"segment.bytes",
       std::to_string(config_int(config, "transaction.state.log.segment.bytes", 104'857'600))},
      {"min.insync.replicas", std::to_string(config_int(config, "transaction.state.log.min.isr", 2))}};
  return t;
}

// The CreateTopics that makes `topic`; nullopt when the image has it already.
std::optional<protocol::create_topics_request> internal_topic_creation(const broker_services& services,
                                                                       internal_topic topic) {
  const auto image = services.metadata->current();
  if (image->find_topic(topic.name)) return std::nullopt;
  int32_t live = 0;
  for (const auto& [id, b] : image->brokers) {
    if (!b.fenced) ++live;
  }
  protocol::create_topics_request create;
  create.timeout_ms = 30'000;
  auto& t = create.topics.emplace_back();
  t.name = topic.name;
  t.num_partitions = topic.partitions;
  const int32_t rf = std::max(1, std::min(topic.replication_factor, live));
  t.replication_factor = static_cast<int16_t>(rf);
  for (auto& [key, value] : topic.configs) {
    if (key == "min.insync.replicas") value = std::to_string(std::min(rf, std::max(1, std::stoi(value))));
    t.configs.push_back({key, value});
  }
  return create;
}

// Creates an internal topic through the active controller (forwarded when it is on another node).
asio::awaitable<void> ensure_internal_topic(request_context& ctx, internal_topic topic) {
  auto create = internal_topic_creation(ctx.services, std::move(topic));
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

// The leader of the partition of `topic_name` that `partition_of` picks for a key (from the partition count).
template <typename PartitionOf>
coordinator_answer coordinator_for(const request_context& ctx, const metadata::metadata_image& image,
                                   std::string_view topic_name, PartitionOf partition_of) {
  coordinator_answer a;
  a.error = error_code::coordinator_not_available;
  const auto* topic = image.find_topic(std::string(topic_name));
  if (!topic || topic->partitions.empty()) return a;
  const int32_t partition = partition_of(static_cast<int32_t>(topic->partitions.size()));
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

  const bool can_create = !keys.empty() && (services.controller || services.controller_link);
  if (key_type == group_key_type && can_create && services.groups) {
    co_await ensure_internal_topic(ctx, offsets_topic(services));
  } else if (key_type == transaction_key_type && can_create && services.transactions) {
    co_await ensure_internal_topic(ctx, transaction_state_topic(services));
  }
  const auto image = services.metadata->current();

  std::vector<coordinator_answer> answers;
  for (const auto& key : keys) {
    coordinator_answer a;
    // KafkaApis.handleFindCoordinatorRequest: DESCRIBE on the group or the transactional id.
    if (key_type == group_key_type && !group_allowed(ctx, acl_operation::describe, key)) {
      a.error = error_code::group_authorization_failed;
    } else if (key_type == transaction_key_type &&
               !authorized(ctx, acl_operation::describe, acl_resource_type::transactional_id, key)) {
      a.error = error_code::transactional_id_authorization_failed;
    } else if (key_type == group_key_type) {
      if (services.groups) {
        a = coordinator_for(ctx, *image, coordinator::offsets_topic_name,
                            [&key](int32_t n) { return coordinator::group_partition(key, n); });
      } else {
        a.error = error_code::coordinator_not_available;
      }
    } else if (key_type == transaction_key_type) {
      if (services.transactions) {
        a = coordinator_for(ctx, *image, coordinator::transaction_state_topic_name,
                            [&key](int32_t n) { return coordinator::transaction_partition(key, n); });
      } else {
        a.error = error_code::coordinator_not_available;
      }
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
