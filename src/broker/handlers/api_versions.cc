#include "handlers/api_versions.h"

#include <regex>

#include "mala/broker/handler_table.h"
#include "mala/common/error_code.h"
#include "mala/common/logging.h"
#include "mala/controller/feature_control.h"
#include "mala/metadata/metadata_image.h"

namespace mala::broker::handlers {

namespace {
// Kafka validates ClientSoftwareName/Version with this pattern (ApiVersionsRequest.isValid) and answers
// INVALID_REQUEST otherwise.
bool valid_software_token(const std::string& s) {
  static const std::regex pattern("[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?");
  return std::regex_match(s, pattern);
}

void add_api_keys(const handler_table& table, bool controller_listener, bool client_telemetry,
                  api_versions_handler::response& out) {
  for (const auto& entry : table.entries()) {
    if (entry.controller_only && !controller_listener) continue;
    if (entry.client_telemetry_only && !client_telemetry) continue;
    auto& key = out.api_keys.emplace_back();
    key.api_key = entry.api_key;
    key.min_version = entry.advertised_min_version;
    key.max_version = entry.max_version;
  }
}
// KIP-584: the features this binary implements and their finalized levels (controller/feature_control.h), as
// Kafka's ApiVersionsResponse carries them for `kafka-features describe` and the admin client's
// describeFeatures.
void add_features(const broker_services& services, api_versions_handler::response& out) {
  const auto image = services.metadata ? services.metadata->current() : nullptr;
  // kraft.version: the quorum's, as the metadata loader last saw it; without one (handler unit tests) what
  // the configuration implies.
  const bool kip_853_voters = services.config && services.config->quorum_voters().empty();
  const int16_t kraft_version = image && image->kraft_version >= 0
                                    ? image->kraft_version
                                    : static_cast<int16_t>(kip_853_voters ? 1 : 0);
  for (const auto& f : controller::implemented_features) {
    auto& supported = out.supported_features.emplace_back();
    supported.name = std::string(f.name);
    supported.min_version = f.min_level;
    supported.max_version = f.max_level;
    int16_t level = f.fixed_level;
    if (f.name == controller::kraft_version_feature) level = kraft_version;
    if (level < 0 && image) level = image->feature_level(std::string(f.name));  // finalized in the log
    if (level <= 0) continue;  // a feature at level 0 is not finalized (Kafka leaves it out)
    auto& finalized = out.finalized_features.emplace_back();
    finalized.name = std::string(f.name);
    finalized.min_version_level = level;
    finalized.max_version_level = level;
  }
  if (image) out.finalized_features_epoch = image->metadata_offset;
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
               ctx.services.telemetry != nullptr, resp);
  if (version >= 3) add_features(ctx.services, resp);
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
