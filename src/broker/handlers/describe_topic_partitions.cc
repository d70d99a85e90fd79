#include "handlers/describe_topic_partitions.h"

#include "handlers/authorization.h"

#include <algorithm>
#include <set>
#include <string>

#include "handlers/admin_common.h"

namespace mala::broker::handlers {

namespace {

using topic_t = describe_topic_partitions_handler::response::describe_topic_partitions_response_topic;
using partition_t = describe_topic_partitions_handler::response::describe_topic_partitions_response_partition;

// DescribeTopicPartitionsRequest.getErrorResponse: every named topic with the error and no partitions.
describe_topic_partitions_handler::response error_response(
    const describe_topic_partitions_handler::request& req, error_code code) {
  describe_topic_partitions_handler::response resp;
  for (const auto& t : req.topics) {
    auto& out = resp.topics.emplace_back();
    out.name = t.name;
    out.error_code = to_wire(code);
  }
  return resp;
}

partition_t describe_partition(const request_context& ctx, const metadata::metadata_image& image,
                               const metadata::topic_metadata& topic, const metadata::partition_state& p) {
  const std::string& listener = ctx.connection.listener_name;
  // KRaftMetadataCache.isReplicaOffline: unregistered or fenced broker, no endpoint on this listener, or (for
  // this node) a replica whose log dir is offline, or one whose dir its broker reported failed (KIP-858).
  auto offline = [&](int32_t replica) {
    auto it = image.brokers.find(replica);
    if (it == image.brokers.end() || it->second.fenced || !it->second.endpoint_for(listener) ||
        image.replica_in_offline_dir(p, replica))
      return true;
    return replica == ctx.services.node_id && ctx.services.local_replica_offline &&
           ctx.services.local_replica_offline(topic.name, p.partition);
  };
  partition_t out;
  out.partition_index = p.partition;
  // getAliveEndpoint: a registered leader with this listener (Kafka does not check fencing here).
  auto leader = image.brokers.find(p.leader);
  const bool leader_reachable = leader != image.brokers.end() && leader->second.endpoint_for(listener);
  out.leader_id = leader_reachable ? p.leader : -1;
  out.leader_epoch = p.leader_epoch;
  out.replica_nodes = p.replicas;
  out.isr_nodes = p.isr;
  out.eligible_leader_replicas = p.eligible_leader_replicas;
  out.last_known_elr = p.last_known_elr;
  for (int32_t r : p.replicas) {
    if (offline(r)) out.offline_replicas.push_back(r);
  }
  return out;
}

}  // namespace

describe_topic_partitions_handler::response describe_topic_partitions_handler::handle(request_context& ctx,
                                                                                      const request& req,
                                                                                      int16_t /*version*/) {
  const auto image = ctx.services.metadata->current();
  const bool all_topics = req.topics.empty();
  const std::string cursor_topic = req.cursor ? req.cursor->topic_name : std::string();
  std::set<std::string> names;  // sorted, as Kafka sorts before paging
  const acl_checker acls(ctx);
  auto may_describe = [&acls](const std::string& name) {
    return acls.allows(acl_operation::describe, acl_resource_type::topic, name);
  };
  if (all_topics) {
    // Topics the client may not DESCRIBE are left out (KafkaApis.handleDescribeTopicPartitionsRequest).
    for (const auto& [name, topic] : image->topics) {
      if (name >= cursor_topic && may_describe(name)) names.insert(name);
    }
  } else {
    for (const auto& t : req.topics) {
      if (t.name >= cursor_topic) names.insert(t.name);
    }
    if (req.cursor && !names.count(req.cursor->topic_name))
      return error_response(req, error_code::invalid_request);
  }
  if (req.cursor && req.cursor->partition_index < 0) return error_response(req, error_code::invalid_request);

  int32_t broker_limit = 2000;  // max.request.partition.size.limit
  if (ctx.services.config) {
    broker_limit = ctx.services.config->get_int("max.request.partition.size.limit").value_or(broker_limit);
  }
  int32_t remaining = std::max(std::min(broker_limit, req.response_partition_limit), 1);

  // KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse.
  response resp;
  for (const auto& name : names) {
    if (remaining == 0) {
      // Every partition of the previous topics fit: the next answer starts at this topic (which need not
      // exist).
      resp.next_cursor.emplace();
      resp.next_cursor->topic_name = name;
      resp.next_cursor->partition_index = 0;
      break;
    }
    if (!all_topics && !may_describe(name)) {
      auto& t = resp.topics.emplace_back();
      t.name = name;
      t.error_code = to_wire(error_code::topic_authorization_failed);
      t.is_internal = is_internal_topic(name);
      continue;
    }
    const auto* topic = image->find_topic(name);
    if (!topic) {
      if (!all_topics) {
        auto& t = resp.topics.emplace_back();
        t.name = name;
        t.error_code = to_wire(invalid_topic_name_reason(name) ? error_code::invalid_topic_exception
                                                               : error_code::unknown_topic_or_partition);
        t.is_internal = is_internal_topic(name);
        t.topic_authorized_operations = all_topic_operations;
      }
      continue;
    }
    const int32_t start = (req.cursor && name == cursor_topic) ? req.cursor->partition_index : 0;
    const int32_t count = static_cast<int32_t>(topic->partitions.size());
    const int32_t upper = static_cast<int32_t>(std::min<int64_t>(count, int64_t{start} + remaining));
    auto& t = resp.topics.emplace_back();
    t.name = name;
    t.topic_id = topic->id;
    t.is_internal = is_internal_topic(name);
    t.topic_authorized_operations =
        authorized_operations(ctx, acl_resource_type::topic, name, all_topic_operations);
    for (int32_t i = start; i < upper; ++i) {
      t.partitions.push_back(
          describe_partition(ctx, *image, *topic, topic->partitions[static_cast<size_t>(i)]));
    }
    if (upper < count) {
      resp.next_cursor.emplace();
      resp.next_cursor->topic_name = name;
      resp.next_cursor->partition_index = upper;
      break;
    }
    remaining -= static_cast<int32_t>(t.partitions.size());
  }
  return resp;
}

}  // namespace mala::broker::handlers
