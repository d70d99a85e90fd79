#include "handlers/api_versions.h"

#include <regex>

#include "mala/broker/handler_table.h"
#include "mala/common/error_code.h"
#include "mala/common/logging.h"

namespace mala::broker::handlers {

namespace {
// Kafka validates ClientSoftwareName/Version with this pattern (ApiVersionsRequest.isValid) and answers
// INVALID_REQUEST otherwise.
bool valid_software_token(const std::string& s) {
  static const std::regex pattern("[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?");
  return std::regex_match(s, pattern);
}

void add_api_keys(const handler_table& table, bool controller_listener, api_versions_handler::response& out) {
  for (const auto& entry : table.entries()) {
    if (entry.controller_only && !controller_listener) continue;
    auto& key = out.api_keys.emplace_back();
    key.api_key = entry.api_key;
    key.min_version = entry.advertised_min_version;
    key.max_version = entry.max_version;
  }
}
}  // namespace

api_versions_handler::response api_versions_handler::handle(request_context& ctx, const request& req,
                                                            int16_t version) {
  response resp;
  if (version >= 3) {
    if (!valid_software_token(req.client_software_name) ||
        !valid_software_token(req.client_software_version)) {
      resp.error_code = to_wire(error_code::invalid_request);
      return resp;
    }
    ctx.connection.client_software_name = req.client_software_name;
    ctx.connection.client_software_version = req.client_software_version;
    subsystem_logger("broker")->debug("connection {} from {}: client software {} {}", ctx.connection.id,
                                      ctx.connection.peer, req.client_software_name,
                                      req.client_software_version);
  }
  add_api_keys(*ctx.services.handlers, is_controller_listener(ctx.services, ctx.connection.listener_name),
               resp);
  return resp;
}

std::vector<uint8_t> api_versions_handler::unsupported_version_body() {
  response resp;
  resp.error_code = to_wire(error_code::unsupported_version);
  auto& key = resp.api_keys.emplace_back();
  key.api_key = api_key;
  key.min_version = min_version;
  key.max_version = max_version;
  std::vector<uint8_t> body;
  protocol::wire_writer w(body);
  resp.encode(w, 0);
  return body;
}

}  // namespace mala::broker::handlers
