// OffsetFetch (key 9, v1-9): a group's committed positions (-1 where none), one group before v8 (top-level
// error from v2, partition errors before), several from v8 (KIP-709); a null topic list (v2+) asks for every
// committed partition. require_stable (v7+, KIP-447) waits for commits still being written.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/offset_fetch_request.h"
#include "mala/protocol/messages/offset_fetch_response.h"

namespace mala::broker::handlers {

struct offset_fetch_handler {
  using request = protocol::offset_fetch_request;
  using response = protocol::offset_fetch_response;
  static constexpr int16_t api_key = 9;
  static constexpr int16_t min_version = 1;
  static constexpr int16_t max_version = 9;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
