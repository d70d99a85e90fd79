#include "handlers/alter_replica_log_dirs.h"

#include <map>
#include <string>
#include <utility>

#include "handlers/authorization.h"
#include "mala/net/coroutine_frame_warning.h"
#include "mala/net/shard_pool.h"
#include "mala/replication/replica_manager.h"

namespace mala::broker::handlers {

asio::awaitable<std::optional<alter_replica_log_dirs_handler::response>>
alter_replica_log_dirs_handler::handle_async(request_context& ctx, request req, int16_t /*version*/) {
  const bool allowed = authorized_cluster(ctx, acl_operation::alter);
  const auto& services = ctx.services;
  // Kafka answers each partition once, grouped by topic.
  std::map<std::string, std::map<int32_t, error_code>> results;
  for (const auto& dir : req.dirs) {
    for (const auto& topic : dir.topics) {
      for (int32_t partition : topic.partitions) {
        error_code code = error_code::cluster_authorization_failed;
        if (allowed) {
          const size_t shard = services.shard_of(topic.name, partition);
          auto* replicas = services.replicas_on(shard);
          if (!replicas) {
            code = error_code::replica_not_available;
          } else {
            // Only pointers and numbers in the capture: GCC 12 mishandles a lambda owning strings moved
            // through invoke_on's coroutine frame (describe_log_dirs does the same). The request outlives
            // the hop.
            const std::string* name = &topic.name;
            const std::string* path = &dir.path;
            auto move = [replicas, name, path, partition] {
              return replicas->alter_log_dir(replication::topic_partition{*name, partition}, *path);
            };
            if (services.shards) {
              code = co_await services.shards->invoke_on(shard, std::move(move));
            } else {
              code = move();
            }
          }
        }
        results[topic.name][partition] = code;
      }
    }
  }
  response resp;
  for (const auto& [name, partitions] : results) {
    auto& t = resp.results.emplace_back();
    t.topic_name = name;
    for (const auto& [partition, code] : partitions) {
      auto& p = t.partitions.emplace_back();
      p.partition_index = partition;
      p.error_code = to_wire(code);
    }
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
