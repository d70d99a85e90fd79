#include "handlers/data_path.h"

#include "mala/common/current_shard.h"
#include "mala/net/request_meter.h"

namespace mala::broker::handlers {

int64_t now_ms(const broker_services& services) {
  if (services.clock_ms) return services.clock_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

const std::string& quota_client_id(const request_context& ctx) {
  static const std::string none;
  // Kafka's header client id, "" when null.
  return ctx.header.client_id ? *ctx.header.client_id : none;
}

}  // namespace

client_quota_manager::charge charge_client_quota(const request_context& ctx, client_quota_type type,
                                                 double value) {
  auto* quotas = ctx.services.quotas;
  if (!quotas) return {};
  const auto image = ctx.services.metadata->current();
  if (image->client_quotas.empty()) return {};
  return quotas->record(image->client_quotas, type, ctx.connection.principal_name, quota_client_id(ctx),
                        value);
}

void mute_for_quota(request_context& ctx, int32_t throttle_ms) {
  if (throttle_ms > 0) ctx.connection.throttle_for(std::chrono::milliseconds(throttle_ms));
}

int32_t record_client_quota(request_context& ctx, client_quota_type type, double value) {
  const auto charge = charge_client_quota(ctx, type, value);
  mute_for_quota(ctx, charge.throttle_ms);
  return charge.throttle_ms;
}

int32_t record_request_quota(request_context& ctx) {
  const net::request_meter* meter = net::current_request_meter();
  if (!meter || !ctx.services.quotas) return 0;
  if (is_controller_listener(ctx.services, ctx.connection.listener_name)) return 0;
  // ClientRequestQuotaManager.nanosToPercentage: 100 % is one thread for one second.
  const double percentage = static_cast<double>(meter->elapsed_ns()) * 100.0 / 1e9;
  return record_client_quota(ctx, client_quota_type::request, percentage);
}

std::function<void(int64_t send_ns)> request_quota_send_recorder(const request_context& ctx) {
  auto* quotas = ctx.services.quotas;
  if (!net::current_request_meter() || !quotas) return {};
  if (is_controller_listener(ctx.services, ctx.connection.listener_name)) return {};
  auto image = ctx.services.metadata->current();
  if (image->client_quotas.empty()) return {};
  return [quotas, image = std::move(image), user = ctx.connection.principal_name,
          client_id = quota_client_id(ctx)](int64_t send_ns) {
    quotas->record(image->client_quotas, client_quota_type::request, user, client_id,
                   static_cast<double>(send_ns) * 100.0 / 1e9);
  };
}

std::optional<double> client_quota_max_in_window(const request_context& ctx, client_quota_type type) {
  auto* quotas = ctx.services.quotas;
  if (!quotas) return std::nullopt;
  const auto image = ctx.services.metadata->current();
  if (image->client_quotas.empty()) return std::nullopt;
  return quotas->max_value_in_window(image->client_quotas, type, ctx.connection.principal_name,
                                     quota_client_id(ctx));
}

const metadata::partition_state* find_partition(const metadata::metadata_image& image,
                                                const std::string& topic, int32_t partition) {
  const auto* t = image.find_topic(topic);
  if (!t || partition < 0 || static_cast<size_t>(partition) >= t->partitions.size()) return nullptr;
  // Indexed by partition number (the image keeps them so): no scan, which made a request naming every
  // partition of a 5,000-partition topic quadratic (a follower's fetch, 1,600 partitions each time).
  const auto& p = t->partitions[static_cast<size_t>(partition)];
  return p.partition == partition ? &p : nullptr;
}

result<replication::partition*> hosted_partition(const broker_services& services, const std::string& topic,
                                                 int32_t partition) {
  // The name is built only for an error: this runs for every partition of every Fetch and Produce.
  auto name = [&] { return topic + "-" + std::to_string(partition); };
  if (services.local_replica_offline && services.local_replica_offline(topic, partition)) {
    return status::error(error_code::kafka_storage_error,
                         name() + ": the log dir of this replica is offline");
  }
  // The handler runs on the shard it hopped to for this partition: that shard's replicas, not a second lookup
  // (a partition removed meanwhile may be placed elsewhere by now). Off the shards (unit tests): the owner.
  const int here = current_shard();
  auto* replicas =
      services.replicas_on(here >= 0 ? static_cast<size_t>(here) : services.shard_of(topic, partition));
  replication::partition* p = replicas ? replicas->get({topic, partition}) : nullptr;
  if (!p) {
    return status::error(error_code::not_leader_or_follower,
                         name() + ": not hosted on node " + std::to_string(services.node_id));
  }
  return p;
}

current_leader find_current_leader(const metadata::metadata_image& image, const std::string& topic,
                                   int32_t partition, const std::string& listener_name) {
  current_leader out;
  const auto* p = find_partition(image, topic, partition);
  if (!p) return out;
  out.leader_id = p->leader;
  out.leader_epoch = p->leader_epoch;
  auto broker = image.brokers.find(p->leader);
  if (broker != image.brokers.end()) {
    if (const auto* e = broker->second.endpoint_for(listener_name)) {
      out.endpoint = *e;
      out.rack = broker->second.rack;
    }
  }
  return out;
}

}  // namespace mala::broker::handlers
