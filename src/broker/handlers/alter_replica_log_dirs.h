// AlterReplicaLogDirs (key 34, KIP-113; kafka-reassign-partitions.sh with log dirs): moves replicas of this
// node to other log dirs of it. Each partition goes to its owning shard (replica_manager::alter_log_dir),
// which starts the copy to a future log and answers at once; DescribeLogDirs shows the future replica
// (IsFutureKey, OffsetLag) until it is swapped in. Errors per partition, as Kafka's
// ReplicaManager.alterReplicaLogDirs answers: CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster,
// LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR (offline dir or replica), REPLICA_NOT_AVAILABLE (not hosted here
// yet: the dir is remembered for when it is created).
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/alter_replica_log_dirs_request.h"
#include "mala/protocol/messages/alter_replica_log_dirs_response.h"

namespace mala::broker::handlers {

struct alter_replica_log_dirs_handler {
  using request = protocol::alter_replica_log_dirs_request;
  using response = protocol::alter_replica_log_dirs_response;
  static constexpr int16_t api_key = 34;
  static constexpr int16_t min_version = 1;
  static constexpr int16_t max_version = 2;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
