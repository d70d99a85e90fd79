// UpdateFeatures (key 57, v0-2): `kafka-features upgrade / downgrade` (and --dry-run, v1's ValidateOnly).
// Run by the active controller (forwarded from any node, as Kafka brokers forward it), answered once the
// FeatureLevelRecords are committed; every broker then advertises the new finalized levels in ApiVersions.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/update_features_request.h"
#include "mala/protocol/messages/update_features_response.h"

namespace mala::broker::handlers {

struct update_features_handler {
  using request = protocol::update_features_request;
  using response = protocol::update_features_response;
  static constexpr int16_t api_key = 57;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 2;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
