// AlterPartitionReassignments (key 45, v0) and ListPartitionReassignments (key 46, v0): what
// kafka-reassign-partitions.sh --execute / --cancel / --verify send. Run by the active controller (forwarded
// from any node); an AlterPartitionReassignments answer comes once the reassignment has started (committed),
// not when it completes.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/alter_partition_reassignments_request.h"
#include "mala/protocol/messages/alter_partition_reassignments_response.h"
#include "mala/protocol/messages/list_partition_reassignments_request.h"
#include "mala/protocol/messages/list_partition_reassignments_response.h"

namespace mala::broker::handlers {

struct alter_partition_reassignments_handler {
  using request = protocol::alter_partition_reassignments_request;
  using response = protocol::alter_partition_reassignments_response;
  static constexpr int16_t api_key = 45;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

struct list_partition_reassignments_handler {
  using request = protocol::list_partition_reassignments_request;
  using response = protocol::list_partition_reassignments_response;
  static constexpr int16_t api_key = 46;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
