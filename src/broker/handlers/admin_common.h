// Pieces shared by the administrative and cluster handlers (CreateTopics ... DescribeLogDirs,
// InitProducerId): the hop to the home shard, Kafka's topic-name checks with its messages, the
// authorized-operations bitfields reported without an authorizer, and the default messages of the errors
// these handlers produce themselves.
//
// Threads: everything here is stateless; on_home_shard resumes the caller on its own shard.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>

#include "mala/broker/client_quota_manager.h"
#include "mala/broker/controller_channel.h"
#include "mala/broker/request_context.h"
#include "mala/common/error_code.h"
#include "mala/controller/configuration_control.h"
#include "mala/controller/topic_names.h"
#include "mala/net/shard_pool.h"

namespace mala::broker::handlers {

// Runs fn() on the home shard (the shard that owns the controller and the coordinators) and returns its
// result on the caller's shard. Without a shard pool (unit tests of a single thread) fn runs in place.
template <typename Fn>
auto on_home_shard(const broker_services& services, Fn fn) -> asio::awaitable<decltype(fn())> {
  if (!services.shards) co_return fn();
  co_return co_await services.shards->invoke_on(services.home_shard, std::move(fn));
}

// Whether a request that came in on this connection may be forwarded to the active controller: not when it
// came in on a controller listener (it was forwarded to this node already).
bool may_forward_to_controller(const request_context& ctx);

// Runs local(controller) on the active controller, or forwards `req` there (controller_channel.h). Without a
// controller channel (handler unit tests) the local controller, when there is one, is called directly on the
// home shard.
// `propagation`: every_live_broker for changes clients look for on other brokers next (topics, partitions,
// configs): see controller_channel::call.
template <typename Response, typename Request, typename Local>
asio::awaitable<controller_answer<Response>> on_controller(
    request_context& ctx, const Request& req, int16_t version, Local local,
    broker_propagation propagation = broker_propagation::commit_only) {
  if (auto* link = ctx.services.controller_link) {
    co_return co_await link->call<Response>(req, version, may_forward_to_controller(ctx), std::move(local),
                                            -1, propagation);
  }
  controller_answer<Response> answer;
  auto* controller = ctx.services.controller;
  if (!controller) co_return answer;
  answer.response = co_await on_home_shard(ctx.services, [&local, controller] { return local(*controller); });
  answer.outcome = controller_outcome::answered;
  co_return answer;
}

// KIP-599: the controller_mutation_rate quota of this request's connection (principal, client id); strict for
// the versions that know THROTTLING_QUOTA_EXCEEDED. Unbounded without quotas. Kafka applies it on the
// controller to the forwarded request's principal; Mala forwards without Kafka's envelope, so the broker that
// received the request applies it before forwarding.
controller_mutation_quota mutation_quota_for(const request_context& ctx, bool strict);
// Answers the request with the quota's throttle time and mutes the connection for it (KIP-219); returns it.
int32_t throttle_for_mutations(request_context& ctx, const controller_mutation_quota& quota);
// THROTTLING_QUOTA_EXCEEDED's message.
inline constexpr const char* throttling_quota_exceeded_message = "The throttling quota has been exceeded.";

// AclOperation codes as bits (Kafka's Utils.to32BitField over AclEntry.supportedOperations). Without an
// authorizer every supported operation is allowed, and Kafka reports exactly these sets.
constexpr int32_t acl_operation_bit(int code) {
  return int32_t{1} << code;
}
// TOPIC: READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS.
inline constexpr int32_t all_topic_operations =
    acl_operation_bit(3) | acl_operation_bit(4) | acl_operation_bit(5) | acl_operation_bit(6) |
    acl_operation_bit(7) | acl_operation_bit(8) | acl_operation_bit(10) | acl_operation_bit(11);
// CLUSTER: CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE CREATE_TOKENS
// DESCRIBE_TOKENS.
inline constexpr int32_t all_cluster_operations =
    acl_operation_bit(5) | acl_operation_bit(7) | acl_operation_bit(8) | acl_operation_bit(9) |
    acl_operation_bit(10) | acl_operation_bit(11) | acl_operation_bit(12) | acl_operation_bit(13) |
    acl_operation_bit(14);

// Kafka's Topic rules (controller/topic_names.h).
using controller::invalid_topic_name_reason;
using controller::is_internal_topic;
// Kafka's metadata topic; CreateTopics refuses it by name.
inline constexpr std::string_view cluster_metadata_topic = "__cluster_metadata";

// The message Kafka's Errors enum carries for a code (what ApiError.fromThrowable gives for an exception
// created without a message); "" for codes these handlers never produce without their own message.
std::string_view default_error_message(error_code code);

// The answer of a request with a top-level error_code and error_message when no controller answered:
// NOT_CONTROLLER or REQUEST_TIMED_OUT (both retriable), with Kafka's default message.
template <typename Response>
Response controller_unreachable(const controller_answer<Response>& answer) {
  Response resp;
  resp.error_code = to_wire(answer.failure());
  resp.error_message = std::string(default_error_message(answer.failure()));
  return resp;
}

// The per-topic answer (CreateTopics, CreatePartitions) with a name, an error code and a message.
template <typename Result>
Result topic_error_result(const std::string& name, error_code code, std::optional<std::string> message) {
  Result r;
  r.name = name;
  r.error_code = to_wire(code);
  r.error_message = std::move(message);
  return r;
}

// The request's getErrorResponse for NOT_CONTROLLER (no controller on this node): every topic, in request
// order and duplicates included, gets the error with its default message.
template <typename Result, typename Topic>
std::vector<Result> not_controller_results(const std::vector<Topic>& topics,
                                           error_code code = error_code::not_controller) {
  std::vector<Result> out;
  for (const auto& t : topics) {
    out.push_back(topic_error_result<Result>(t.name, code, std::string(default_error_message(code))));
  }
  return out;
}

// ControllerApis (createTopics, createPartitions): a topic name given more than once is refused as a whole,
// none of its entries reaches the controller; the rest is forwarded. Walks `topics` in request order, calling
// on_duplicate(name) once per repeated name (at its first entry) and on_unique(std::move(topic)) for each
// other entry.
template <typename Topic, typename OnDuplicate, typename OnUnique>
void split_duplicate_names(std::vector<Topic>& topics, OnDuplicate on_duplicate, OnUnique on_unique) {
  std::map<std::string, int> occurrences;
  for (const auto& t : topics) ++occurrences[t.name];
  std::set<std::string> answered;
  for (auto& t : topics) {
    if (occurrences[t.name] > 1) {
      if (answered.insert(t.name).second) on_duplicate(t.name);
    } else {
      on_unique(std::move(t));
    }
  }
}

// ConfigResource.Type ids a request may carry; anything else is UNKNOWN.
bool is_known_config_resource_type(int8_t type);

// Java's Integer.parseInt (controller/configuration_control.h).
using controller::parse_java_int;

}  // namespace mala::broker::handlers
