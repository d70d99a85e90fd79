#include "handlers/describe_producers.h"

#include "handlers/authorization.h"

#include <string>
#include <utility>
#include <vector>

#include "handlers/data_path.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

namespace {

using partition_response = protocol::describe_producers_response::partition_response;

partition_response error_response(int32_t index, error_code code) {
  partition_response r;
  r.partition_index = index;
  r.error_code = to_wire(code);
  return r;
}

struct lookup {
  size_t slot = 0;
  std::string topic;
  int32_t partition = 0;
};

// On the partitions' shard.
std::vector<std::pair<size_t, partition_response>> describe_on_shard(const broker_services& services,
                                                                     const std::vector<lookup>& lookups) {
  std::vector<std::pair<size_t, partition_response>> out;
  for (const auto& l : lookups) {
    auto hosted = hosted_partition(services, l.topic, l.partition);
    if (!hosted) {
      out.emplace_back(l.slot, error_response(l.partition, hosted.error().code));
      continue;
    }
    auto producers = (*hosted)->describe_producers();
    if (!producers) {
      out.emplace_back(l.slot, error_response(l.partition, producers.error().code));
      continue;
    }
    partition_response r = error_response(l.partition, error_code::none);
    r.active_producers.reserve(producers->size());
    for (const auto& p : *producers) {
      r.active_producers.push_back({p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp,
                                    p.coordinator_epoch, p.current_txn_start_offset});
    }
    out.emplace_back(l.slot, std::move(r));
  }
  return out;
}

}  // namespace

asio::awaitable<std::optional<describe_producers_handler::response>> describe_producers_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  (void)version;
  const auto& services = ctx.services;
  const auto image = services.metadata->current();
  response resp;
  std::vector<lookup> lookups;
  answer_slots slots;
  for (const auto& t : req.topics) {
    auto& topic = resp.topics.emplace_back();
    topic.name = t.name;
    // KafkaApis.handleDescribeProducersRequest: READ on the topic.
    const bool allowed = authorized(ctx, acl_operation::read, acl_resource_type::topic, t.name);
    for (int32_t p : t.partition_indexes) {
      const size_t slot = slots.next(resp);
      if (!allowed) {
        topic.partitions.push_back(error_response(p, error_code::topic_authorization_failed));
      } else if (!find_partition(*image, t.name, p)) {
        topic.partitions.push_back(error_response(p, error_code::unknown_topic_or_partition));
      } else {
        topic.partitions.push_back(error_response(p, error_code::none));
        lookups.push_back({slot, t.name, p});
      }
    }
  }
  // The shards describe their partitions at once.
  auto groups = group_by_shard(services, std::move(lookups));
  auto describe = [&services](const std::vector<lookup>& l)
      -> asio::awaitable<std::vector<std::pair<size_t, partition_response>>> {
    co_return describe_on_shard(services, l);
  };
  auto parts =
      co_await replication::run_on_shards_async(services.shards, std::move(groups), std::move(describe));
  for (auto& answers : parts) slots.fill(resp, answers);
  co_return resp;
}

}  // namespace mala::broker::handlers
