// FetchSnapshot (key 59, v0-v1, KIP-630): a controller that fell behind the leader's log start downloads the
// leader's latest metadata snapshot in chunks; answered by this node's Raft replica like the other KRaft
// RPCs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/fetch_snapshot_request.h"
#include "mala/protocol/messages/fetch_snapshot_response.h"
#include "mala/protocol/wire.h"

namespace mala::broker::handlers {

// The response and the chunk its records view points into.
struct fetch_snapshot_reply {
  protocol::fetch_snapshot_response body;
  std::shared_ptr<const std::vector<uint8_t>> owned_bytes;

  size_t encoded_size(int16_t version) const { return body.encoded_size(version); }
  void encode(protocol::wire_writer& w, int16_t version) const { body.encode(w, version); }
};

struct fetch_snapshot_handler {
  using request = protocol::fetch_snapshot_request;
  using response = fetch_snapshot_reply;
  static constexpr int16_t api_key = 59;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 1;
  static constexpr bool controller_only = true;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
