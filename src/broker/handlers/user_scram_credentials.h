// DescribeUserScramCredentials (key 50, v0) and AlterUserScramCredentials (key 51, v0): `kafka-configs
// --entity-type users --describe / --alter --add-config 'SCRAM-SHA-256=[iterations=N,password=P]' /
// --delete-config SCRAM-SHA-256` and AdminClient's describe/alterUserScramCredentials (KIP-554). Describe is
// answered from this node's metadata image; Alter runs on the active controller (forwarded from any node, as
// Kafka forwards it), answered once the credentials are committed and applied by every live broker, so a
// client may authenticate with them through any broker next (controller/scram_control.h).
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/alter_user_scram_credentials_request.h"
#include "mala/protocol/messages/alter_user_scram_credentials_response.h"
#include "mala/protocol/messages/describe_user_scram_credentials_request.h"
#include "mala/protocol/messages/describe_user_scram_credentials_response.h"

namespace mala::broker::handlers {

struct describe_user_scram_credentials_handler {
  using request = protocol::describe_user_scram_credentials_request;
  using response = protocol::describe_user_scram_credentials_response;
  static constexpr int16_t api_key = 50;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;

  static response handle(request_context& ctx, const request& req, int16_t version);
};

struct alter_user_scram_credentials_handler {
  using request = protocol::alter_user_scram_credentials_request;
  using response = protocol::alter_user_scram_credentials_response;
  static constexpr int16_t api_key = 51;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 0;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
