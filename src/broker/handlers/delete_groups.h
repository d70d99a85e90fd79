// DeleteGroups (key 42, v0-3; v3 answers ErrorMessage null): deletes empty groups and their offsets
// (tombstones in __consumer_offsets); NON_EMPTY_GROUP while members exist, GROUP_ID_NOT_FOUND for unknown
// ones. A name given twice is answered once.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/delete_groups_request.h"
#include "mala/protocol/messages/delete_groups_response.h"

namespace mala::broker::handlers {

struct delete_groups_handler {
  using request = protocol::delete_groups_request;
  using response = protocol::delete_groups_response;
  static constexpr int16_t api_key = 42;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 3;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
