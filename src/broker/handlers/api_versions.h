// ApiVersions (key 18): the API keys and version ranges this node serves, derived from the handler table.
// Versions 3+ carry the client's software name and version (KIP-511), kept on the connection for logs.
#pragma once

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/api_versions_request.h"
#include "mala/protocol/messages/api_versions_response.h"

namespace mala::broker::handlers {

struct api_versions_handler {
  using request = protocol::api_versions_request;
  using response = protocol::api_versions_response;
  static constexpr int16_t api_key = 18;
  static constexpr int16_t min_version = 0;
  static constexpr int16_t max_version = 4;

  static response handle(request_context& ctx, const request& req, int16_t version);

  // The answer to an ApiVersions request whose version this node does not know: error UNSUPPORTED_VERSION,
  // encoded as v0 (KIP-511), listing only ApiVersions' own range so the client can retry at a version we
  // serve.
  static std::vector<uint8_t> unsupported_version_body();
};

}  // namespace mala::broker::handlers
