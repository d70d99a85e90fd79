// DescribeQuorum (key 55, v0-v2): the metadata quorum as its leader sees it (leader, epoch, high watermark,
// each voter's and observer's log end offset and last fetch), what `kafka-metadata-quorum.sh describe
// --status / --replication` print. A broker forwards it to the active controller (Kafka's KafkaApis does);
// a lone voter is that controller itself.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/describe_quorum_request.h"
#include "mala/protocol/messages/describe_quorum_response.h"

namespace mala::broker::handlers {

struct describe_quorum_handler {
  using request = protocol::describe_quorum_request;
  using response = protocol::describe_quorum_response;
  static constexpr int16_t api_key = 55;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 2;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
