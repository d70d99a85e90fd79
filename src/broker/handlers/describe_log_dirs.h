// DescribeLogDirs (key 35; kafka-log-dirs.sh, UIs): per log dir of this node, its absolute path, error
// (KAFKA_STORAGE_ERROR when offline), total and usable bytes of its file system (v4+), and the partitions it
// holds with their size on disk, offset lag 0 (this node has no future replicas; a replica's high watermark
// never exceeds its log end offset) and is_future false; is_cordoned (v5) whether cordoned.log.dirs names
// it (KIP-1066, broker/cordoned_log_dirs.h). Topics null means every partition; otherwise only the partitions
// named (topics with none left are omitted). Reads the log dirs through the replica manager on the home
// shard. Mirrors Kafka's ReplicaManager.describeLogDirs.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/describe_log_dirs_request.h"
#include "mala/protocol/messages/describe_log_dirs_response.h"

namespace mala::broker::handlers {

struct describe_log_dirs_handler {
  using request = protocol::describe_log_dirs_request;
  using response = protocol::describe_log_dirs_response;
  static constexpr int16_t api_key = 35;
  static constexpr int16_t min_version = 1;
  static constexpr int16_t max_version = 5;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
