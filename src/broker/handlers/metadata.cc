#include "handlers/metadata.h"

#include <climits>
#include <set>
#include <string>

#include "handlers/admin_common.h"
#include "handlers/authorization.h"
#include "mala/common/error_code.h"
#include "mala/common/logging.h"
#include "mala/controller/quorum_controller.h"
#include "mala/net/coroutine_frame_warning.h"
#include "mala/net/shard_pool.h"

namespace mala::broker::handlers {

namespace {

// AclOperation codes (Kafka's AclOperation enum); without an authorizer every operation is allowed, and Kafka
// then reports these bitfields when a client asks for authorized operations.
constexpr int32_t op_bit(int code) {
  return int32_t{1} << code;
}
constexpr int32_t topic_operations = op_bit(3) | op_bit(4) | op_bit(5) | op_bit(6) | op_bit(7) | op_bit(8) |
                                     op_bit(10) |
                                     op_bit(11);  // READ WRITE CREATE DELETE ALTER DESCRIBE D/A_CONFIGS
constexpr int32_t cluster_operations = op_bit(5) | op_bit(7) | op_bit(8) | op_bit(9) | op_bit(10) |
                                       op_bit(11) | op_bit(12) | op_bit(13) | op_bit(14);

void add_topic(const request_context& ctx, const metadata::metadata_image& image,
               const metadata::topic_metadata& topic, int16_t version, bool include_ops,
               metadata_handler::response& out) {
  const int32_t self = ctx.services.node_id;
  auto offline = [&](int32_t replica, const metadata::partition_state& p) {
    if (!image.broker_alive(replica) || image.replica_in_offline_dir(p, replica)) return true;
    return replica == self && ctx.services.local_replica_offline &&
           ctx.services.local_replica_offline(topic.name, p.partition);
  };
  auto& t = out.topics.emplace_back();
  t.error_code = to_wire(error_code::none);
  t.name = topic.name;
  t.topic_id = topic.id;
  t.is_internal = topic.internal;
  t.topic_authorized_operations =
      include_ops ? authorized_operations(ctx, acl_resource_type::topic, topic.name, topic_operations)
                  : INT32_MIN;
  for (const auto& p : topic.partitions) {
    auto& part = t.partitions.emplace_back();
    part.partition_index = p.partition;
    part.leader_id = p.leader;
    part.leader_epoch = p.leader_epoch;
    part.replica_nodes = p.replicas;
    part.isr_nodes = p.isr;
    for (int32_t r : p.replicas)
      if (offline(r, p)) part.offline_replicas.push_back(r);
    // Kafka answers LEADER_NOT_AVAILABLE for a partition without a live leader (v0+), and still lists it; a
    // leader whose log is offline cannot serve.
    const bool leader_ok = p.leader >= 0 && !offline(p.leader, p);
    if (!leader_ok) part.leader_id = -1;
    part.error_code = to_wire(leader_ok ? error_code::none : error_code::leader_not_available);
  }
  (void)version;
}

void add_error_topic(std::optional<std::string> name, const uuid& id, error_code code,
                     metadata_handler::response& out) {
  auto& t = out.topics.emplace_back();
  t.error_code = to_wire(code);
  t.name = std::move(name);
  t.topic_id = id;
}

// Whether this client may create the topic (CREATE on the cluster or on the topic), as auto-creation needs.
bool may_create_topic(const request_context& ctx, const std::string& name) {
  return authorized_cluster(ctx, acl_operation::create) ||
         authorized(ctx, acl_operation::create, acl_resource_type::topic, name);
}

// Whether the request asks for unknown topics to be created and this node would.
bool auto_creation_wanted(const request_context& ctx, const metadata_handler::request& req, int16_t version) {
  const bool allowed = version < 4 || req.allow_auto_topic_creation;
  return allowed && ctx.services.config &&
         ctx.services.config->get_bool("auto.create.topics.enable").value_or(true);
}

}  // namespace

bool is_valid_topic_name(const std::string& name) {
  if (name.empty() || name.size() > 249 || name == "." || name == "..") return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

asio::awaitable<std::optional<metadata_handler::response>> metadata_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  // Automatic topic creation (auto.create.topics.enable, on by default; the request's
  // allow_auto_topic_creation from v4, implicitly true before): unknown, validly named topics are created
  // with num.partitions and default.replication.factor through the controller. Kafka's broker answers
  // LEADER_NOT_AVAILABLE while its asynchronous creation runs; here the creation has committed and been
  // published before the answer is built, so the answer already describes the new topic.
  const bool allowed = version < 4 || req.allow_auto_topic_creation;
  const bool enabled =
      ctx.services.config && ctx.services.config->get_bool("auto.create.topics.enable").value_or(true);
  if (allowed && enabled && req.topics && ctx.services.shards &&
      (ctx.services.controller || ctx.services.controller_link)) {
    const auto image = ctx.services.metadata->current();
    protocol::create_topics_request create;
    create.timeout_ms = 30'000;
    for (const auto& wanted : *req.topics) {
      if (!wanted.name || !is_valid_topic_name(*wanted.name) || image->find_topic(*wanted.name)) continue;
      // KafkaApis: only topics the client may DESCRIBE, and CREATE (cluster or topic), are auto-created.
      if (!authorized(ctx, acl_operation::describe, acl_resource_type::topic, *wanted.name) ||
          !may_create_topic(ctx, *wanted.name)) {
        continue;
      }
      // The coordinators' internal topics are created by their coordinators, with their own settings.
      if (*wanted.name == "__consumer_offsets" || *wanted.name == "__transaction_state") continue;
      auto& t = create.topics.emplace_back();
      t.name = *wanted.name;
      t.num_partitions = -1;
      t.replication_factor = -1;
    }
    if (!create.topics.empty()) {
      constexpr int16_t create_version = protocol::create_topics_request::max_version;
      auto answer = co_await on_controller<protocol::create_topics_response>(
          ctx, create, create_version,
          [&create](controller::quorum_controller& c) { return c.create_topics(create, create_version); },
          broker_propagation::every_live_broker);
      if (!answer.ok()) co_return handle(ctx, req, version);
      std::set<std::string> created;
      for (const auto& t : answer.response->topics) {
        if (t.error_code != to_wire(error_code::none) &&
            t.error_code != to_wire(error_code::topic_already_exists)) {
          subsystem_logger("broker")->warn("auto-creation of topic {} failed: {} {}", t.name, t.error_code,
                                           t.error_message.value_or(""));
        } else {
          created.insert(t.name);
        }
      }
      // Created by a controller on another node: this node's image has it once the commit reaches it.
      // Until then the topic is LEADER_NOT_AVAILABLE, as Kafka answers while an auto-creation is under way.
      auto resp = handle(ctx, req, version);
      for (auto& t : resp.topics) {
        if (t.name && created.count(*t.name) &&
            t.error_code == to_wire(error_code::unknown_topic_or_partition))
          t.error_code = to_wire(error_code::leader_not_available);
      }
      co_return resp;
    }
  }
  co_return handle(ctx, req, version);
}

metadata_handler::response metadata_handler::handle(request_context& ctx, const request& req,
                                                    int16_t version) {
  const auto image = ctx.services.metadata->current();
  response resp;
  for (const auto& [id, broker] : image->brokers) {
    if (broker.fenced) continue;
    // Clients are told the endpoints of the listener they connected through (Kafka:
    // MetadataCache.getAliveBrokerNodes by listener name); a broker without that listener is left out.
    const auto* ep = broker.endpoint_for(ctx.connection.listener_name);
    if (!ep) continue;
    auto& b = resp.brokers.emplace_back();
    b.node_id = id;
    b.host = ep->host;
    b.port = ep->port;
    b.rack = broker.rack;
  }
  resp.cluster_id = image->cluster_id;
  // Kafka names a live broker (brokers forward controller-bound requests); Mala names the active controller
  // when it is a live broker too (combined mode), which saves the forwarding hop, and another live broker
  // otherwise.
  resp.controller_id = -1;
  for (const auto& b : resp.brokers) {
    if (b.node_id == image->controller_id) resp.controller_id = b.node_id;
  }
  if (resp.controller_id < 0 && !resp.brokers.empty()) resp.controller_id = resp.brokers.front().node_id;
  resp.cluster_authorized_operations =
      (version >= 8 && version <= 10 && req.include_cluster_authorized_operations)
          ? authorized_operations(ctx, acl_resource_type::cluster, metadata::cluster_resource_name,
                                  cluster_operations)
          : INT32_MIN;
  const bool include_topic_ops = version >= 8 && req.include_topic_authorized_operations;

  // v0: an empty list means every topic; v1+: null means every topic and an empty list none.
  const bool all_topics = !req.topics.has_value() || (version == 0 && req.topics->empty());
  if (all_topics) {
    // Topics the client may not DESCRIBE are left out.
    const acl_checker acls(ctx);
    for (const auto& [name, topic] : image->topics) {
      if (!acls.allows(acl_operation::describe, acl_resource_type::topic, name)) continue;
      add_topic(ctx, *image, topic, version, include_topic_ops, resp);
    }
    return resp;
  }
  const bool creation_wanted = authorization_enabled(ctx) && auto_creation_wanted(ctx, req, version);
  for (const auto& wanted : *req.topics) {
    if (wanted.name.has_value()) {
      const std::string& name = *wanted.name;
      if (!authorized(ctx, acl_operation::describe, acl_resource_type::topic, name)) {
        add_error_topic(name, uuid{}, error_code::topic_authorization_failed, resp);
        continue;
      }
      if (!is_valid_topic_name(name)) {
        add_error_topic(name, uuid{}, error_code::invalid_topic_exception, resp);
        continue;
      }
      if (const auto* topic = image->find_topic(name)) {
        add_topic(ctx, *image, *topic, version, include_topic_ops, resp);
      } else if (creation_wanted && !may_create_topic(ctx, name)) {
        // KafkaApis: an unknown topic the client may not create.
        add_error_topic(name, uuid{}, error_code::topic_authorization_failed, resp);
      } else {
        // Not created: auto-creation is off (or failed, or not allowed by the request).
        add_error_topic(name, uuid{}, error_code::unknown_topic_or_partition, resp);
      }
      continue;
    }
    // v10+: by topic id, name null.
    if (const auto* topic = image->find_topic(wanted.topic_id)) {
      if (!authorized(ctx, acl_operation::describe, acl_resource_type::topic, topic->name)) {
        add_error_topic(std::nullopt, wanted.topic_id, error_code::topic_authorization_failed, resp);
        continue;
      }
      add_topic(ctx, *image, *topic, version, include_topic_ops, resp);
    } else {
      add_error_topic(std::nullopt, wanted.topic_id, error_code::unknown_topic_id, resp);
    }
  }
  return resp;
}

}  // namespace mala::broker::handlers
