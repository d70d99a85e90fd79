// AlterPartition (key 56, v2-3): a partition leader asks the active controller to change the partition's ISR
// (shrink a follower that fell behind, expand one that caught up) or to mark it recovered after an unclean
// election. Served on the CONTROLLER listener (brokers send it there, through the controller channel); a
// node that is not the active controller answers NOT_CONTROLLER.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/alter_partition_request.h"
#include "mala/protocol/messages/alter_partition_response.h"

namespace mala::broker::handlers {

struct alter_partition_handler {
  using request = protocol::alter_partition_request;
  using response = protocol::alter_partition_response;
  static constexpr int16_t api_key = 56;
  static constexpr int16_t min_version = 2;
  static constexpr int16_t max_version = 3;
  static constexpr bool controller_only = true;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
