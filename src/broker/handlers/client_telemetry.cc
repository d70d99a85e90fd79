#include "handlers/client_telemetry.h"

#include "mala/broker/client_telemetry.h"
#include "mala/metadata/metadata_image.h"

namespace mala::broker::handlers {

namespace {

// The request's client as subscriptions see it (ClientMetricsInstanceMetadata).
telemetry_client client_of(const request_context& ctx) {
  telemetry_client c;
  c.client_id = ctx.header.client_id.value_or("");
  c.software_name = ctx.connection.client_software_name;
  c.software_version = ctx.connection.client_software_version;
  // peer is "host:port" or "[v6]:port".
  const std::string& peer = ctx.connection.peer;
  const size_t colon = peer.rfind(':');
  if (colon != std::string::npos) {
    std::string host = peer.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    c.source_address = std::move(host);
    c.source_port = peer.substr(colon + 1);
  }
  return c;
}

int64_t now_ms(const request_context& ctx) {
  return ctx.services.clock_ms ? ctx.services.clock_ms() : 0;
}

}  // namespace

get_telemetry_subscriptions_handler::response get_telemetry_subscriptions_handler::handle(
    request_context& ctx, const request& req, int16_t /*version*/) {
  if (!ctx.services.telemetry || !ctx.services.metadata) {
    response resp;
    resp.error_code = to_wire(error_code::unsupported_version);
    return resp;
  }
  return ctx.services.telemetry->get_subscriptions(*ctx.services.metadata->current(), req.client_instance_id,
                                                   client_of(ctx), now_ms(ctx));
}

push_telemetry_handler::response push_telemetry_handler::handle(request_context& ctx, const request& req,
                                                                int16_t /*version*/) {
  if (!ctx.services.telemetry || !ctx.services.metadata) {
    response resp;
    resp.error_code = to_wire(error_code::unsupported_version);
    return resp;
  }
  return ctx.services.telemetry->push(*ctx.services.metadata->current(), req, client_of(ctx), now_ms(ctx));
}

}  // namespace mala::broker::handlers
