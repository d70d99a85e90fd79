// DescribeClientQuotas (key 48, v0-1) and AlterClientQuotas (key 49, v0-1): `kafka-configs --entity-type
// users|clients|ips --describe / --alter --add-config producer_byte_rate=...`.
// - AlterClientQuotas runs on the active controller (forwarded from any node, as Kafka brokers forward it)
// and is
//   answered once its ClientQuotaRecords are committed and every live broker applied them
//   (controller/client_quota_control.h has the validation); validate_only writes nothing.
// - DescribeClientQuotas answers from this node's metadata image, as Kafka's ClientQuotasImage.describe:
// match
//   types exact (0), default (1) and specified (2), strict; an empty or repeated entity type, a match string
//   where none belongs (or none where one does), ip combined with user or client-id and an unknown match type
//   are INVALID_REQUEST, an unknown entity type UNSUPPORTED_VERSION, with no entries.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/alter_client_quotas_request.h"
#include "mala/protocol/messages/alter_client_quotas_response.h"
#include "mala/protocol/messages/describe_client_quotas_request.h"
#include "mala/protocol/messages/describe_client_quotas_response.h"

namespace mala::broker::handlers {

struct describe_client_quotas_handler {
  using request = protocol::describe_client_quotas_request;
  using response = protocol::describe_client_quotas_response;
  static constexpr int16_t api_key = 48;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 1;

  static response handle(request_context& ctx, const request& req, int16_t version);
};

// The DescribeClientQuotas answer of `image` (unit tests call it directly).
protocol::describe_client_quotas_response describe_client_quotas(
    const metadata::metadata_image& image, const protocol::describe_client_quotas_request& req);

struct alter_client_quotas_handler {
  using request = protocol::alter_client_quotas_request;
  using response = protocol::alter_client_quotas_response;
  static constexpr int16_t api_key = 49;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 1;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
